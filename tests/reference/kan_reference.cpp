#include "tests/reference/kan_reference.h"

#include <cmath>
#include <string>

#include "tests/reference/nn_reference_checks.h"

namespace resident::reference {

namespace {

constexpr const char* kOp = "kan_reference";

double silu(double u) { return u / (1.0 + std::exp(-u)); }

double silu_derivative(double u) {
  const double s = 1.0 / (1.0 + std::exp(-u));
  return s * (1.0 + u * (1.0 - s));
}

double grid_mid(const KanSpec& spec) { return 0.5 * (spec.grid_min + spec.grid_max); }
double grid_half(const KanSpec& spec) { return 0.5 * (spec.grid_max - spec.grid_min); }

// Every B_{m,p}(x) for p = 0..order, m = 0..(G + 2k - 1 - p): table[p][m].
std::vector<std::vector<double>> basis_table(const KanSpec& spec, double x, std::size_t order) {
  const std::vector<double> t = kan_knots(spec);
  const std::size_t intervals = t.size() - 1;  // G + 2k order-0 bases
  std::vector<std::vector<double>> table(order + 1);
  table[0].resize(intervals);
  for (std::size_t m = 0; m < intervals; ++m) table[0][m] = (t[m] <= x && x < t[m + 1]) ? 1.0 : 0.0;
  for (std::size_t p = 1; p <= order; ++p) {
    table[p].resize(intervals - p);
    for (std::size_t m = 0; m + p < intervals; ++m)
      table[p][m] = (x - t[m]) / (t[m + p] - t[m]) * table[p - 1][m] +
                    (t[m + p + 1] - x) / (t[m + p + 1] - t[m + 1]) * table[p - 1][m + 1];
  }
  return table;
}

struct LayerView {
  std::size_t in = 0, out = 0;
  std::span<const double> base, spline, scaler;
};

LayerView layer_view(const KanSpec& spec, std::span<const double> params,
                     const KanLayerOffsets& offsets, std::size_t l) {
  const std::size_t in = spec.widths[l], out = spec.widths[l + 1], nb = kan_basis_count(spec);
  return {in, out, params.subspan(offsets.base_weight, out * in),
          params.subspan(offsets.spline_weight, out * in * nb),
          params.subspan(offsets.spline_scaler, out * in)};
}

// One layer's forward: a [batch, in] -> y [batch, out].
std::vector<double> layer_forward(const KanSpec& spec, const LayerView& w, std::size_t batch,
                                  std::span<const double> a) {
  const std::size_t nb = kan_basis_count(spec);
  std::vector<double> y(batch * w.out, 0.0);
  for (std::size_t b = 0; b < batch; ++b)
    for (std::size_t i = 0; i < w.in; ++i) {
      const double u = grid_mid(spec) + grid_half(spec) * std::tanh(a[b * w.in + i]);
      const double s = silu(u);
      const std::vector<double> bases = bspline_bases(spec, u);
      for (std::size_t o = 0; o < w.out; ++o) {
        double sum = w.base[o * w.in + i] * s;
        for (std::size_t m = 0; m < nb; ++m)
          sum += w.spline[(o * w.in + i) * nb + m] * w.scaler[o * w.in + i] * bases[m];
        y[b * w.out + o] += sum;
      }
    }
  return y;
}

}  // namespace

void validate_kan_spec(const KanSpec& spec) {
  detail::require(spec.widths.size() >= 2, kOp,
                  "widths has " + std::to_string(spec.widths.size()) + " entries, need >= 2");
  for (std::size_t l = 0; l < spec.widths.size(); ++l)
    detail::require(spec.widths[l] >= 1, kOp, "widths[" + std::to_string(l) + "] = 0, need >= 1");
  detail::require(spec.grid_size >= 1, kOp, "grid_size = 0, need >= 1");
  detail::require(spec.spline_order >= 1, kOp, "spline_order = 0, need >= 1");
  detail::require(std::isfinite(spec.grid_min) && std::isfinite(spec.grid_max) &&
                      spec.grid_min < spec.grid_max,
                  kOp,
                  "grid range [" + std::to_string(spec.grid_min) + ", " +
                      std::to_string(spec.grid_max) + "] must be finite with min < max");
}

std::size_t kan_basis_count(const KanSpec& spec) { return spec.grid_size + spec.spline_order; }

std::vector<double> kan_knots(const KanSpec& spec) {
  validate_kan_spec(spec);
  const double h = (spec.grid_max - spec.grid_min) / static_cast<double>(spec.grid_size);
  const std::size_t count = spec.grid_size + 2 * spec.spline_order + 1;
  std::vector<double> t(count);
  for (std::size_t m = 0; m < count; ++m)
    t[m] = spec.grid_min +
           (static_cast<double>(m) - static_cast<double>(spec.spline_order)) * h;
  return t;
}

std::vector<double> bspline_bases(const KanSpec& spec, double x) {
  validate_kan_spec(spec);
  std::vector<std::vector<double>> table = basis_table(spec, x, spec.spline_order);
  return std::move(table[spec.spline_order]);
}

std::vector<double> bspline_basis_derivatives(const KanSpec& spec, double x) {
  validate_kan_spec(spec);
  const std::size_t k = spec.spline_order;
  const std::vector<double> t = kan_knots(spec);
  const std::vector<std::vector<double>> table = basis_table(spec, x, k - 1);
  const std::vector<double>& lower = table[k - 1];  // B_{m,k-1}, m < G + k + 1
  std::vector<double> d(kan_basis_count(spec));
  const double kd = static_cast<double>(k);
  for (std::size_t m = 0; m < d.size(); ++m)
    d[m] = kd / (t[m + k] - t[m]) * lower[m] - kd / (t[m + k + 1] - t[m + 1]) * lower[m + 1];
  return d;
}

std::vector<KanLayerOffsets> kan_parameter_offsets(const KanSpec& spec) {
  validate_kan_spec(spec);
  const std::size_t nb = kan_basis_count(spec);
  std::vector<KanLayerOffsets> offsets;
  std::size_t at = 0;
  for (std::size_t l = 0; l + 1 < spec.widths.size(); ++l) {
    const std::size_t edges = spec.widths[l] * spec.widths[l + 1];
    KanLayerOffsets o;
    o.base_weight = at;
    at += edges;
    o.spline_weight = at;
    at += edges * nb;
    o.spline_scaler = at;
    at += edges;
    offsets.push_back(o);
  }
  return offsets;
}

std::size_t kan_parameter_count(const KanSpec& spec) {
  validate_kan_spec(spec);
  std::size_t count = 0;
  for (std::size_t l = 0; l + 1 < spec.widths.size(); ++l)
    count += spec.widths[l] * spec.widths[l + 1] * (2 + kan_basis_count(spec));
  return count;
}

std::vector<double> kan_forward(const KanSpec& spec, std::size_t batch,
                                std::span<const double> params, std::span<const double> x) {
  validate_kan_spec(spec);
  detail::require_size(kOp, "params", params.size(), kan_parameter_count(spec));
  detail::require_size(kOp, "x", x.size(), batch * spec.widths.front());
  const std::vector<KanLayerOffsets> offsets = kan_parameter_offsets(spec);
  std::vector<double> a(x.begin(), x.end());
  for (std::size_t l = 0; l < offsets.size(); ++l)
    a = layer_forward(spec, layer_view(spec, params, offsets[l], l), batch, a);
  return a;
}

void kan_backward(const KanSpec& spec, std::size_t batch, std::span<const double> params,
                  std::span<const double> x, std::span<const double> dy, KanGrads grads,
                  GradMode mode) {
  validate_kan_spec(spec);
  const std::size_t count = kan_parameter_count(spec);
  detail::require_size(kOp, "params", params.size(), count);
  detail::require_size(kOp, "x", x.size(), batch * spec.widths.front());
  detail::require_size(kOp, "dy", dy.size(), batch * spec.widths.back());
  detail::require_size_or_empty(kOp, "dx", grads.dx.size(), x.size());
  detail::require_size_or_empty(kOp, "dparams", grads.dparams.size(), count);
  const std::size_t nb = kan_basis_count(spec);
  const std::vector<KanLayerOffsets> offsets = kan_parameter_offsets(spec);
  const std::size_t layers = offsets.size();

  // Every layer's input a_l.
  std::vector<std::vector<double>> inputs{std::vector<double>(x.begin(), x.end())};
  for (std::size_t l = 0; l + 1 < layers; ++l)
    inputs.push_back(
        layer_forward(spec, layer_view(spec, params, offsets[l], l), batch, inputs.back()));

  std::vector<double> dparams(count, 0.0);
  std::vector<double> upstream(dy.begin(), dy.end());  // dLoss/d(output of layer l)
  for (std::size_t l = layers; l-- > 0;) {
    const LayerView w = layer_view(spec, params, offsets[l], l);
    const std::vector<double>& a = inputs[l];
    std::vector<double> da(batch * w.in, 0.0);
    for (std::size_t b = 0; b < batch; ++b)
      for (std::size_t i = 0; i < w.in; ++i) {
        const double th = std::tanh(a[b * w.in + i]);
        const double u = grid_mid(spec) + grid_half(spec) * th;
        const double s = silu(u), ds = silu_derivative(u);
        const std::vector<double> bases = bspline_bases(spec, u);
        const std::vector<double> dbases = bspline_basis_derivatives(spec, u);
        double du = 0.0;
        for (std::size_t o = 0; o < w.out; ++o) {
          const double g = upstream[b * w.out + o];
          const std::size_t edge = o * w.in + i;
          dparams[offsets[l].base_weight + edge] += g * s;
          du += g * w.base[edge] * ds;
          for (std::size_t m = 0; m < nb; ++m) {
            const double coefficient = w.spline[edge * nb + m];
            dparams[offsets[l].spline_weight + edge * nb + m] += g * w.scaler[edge] * bases[m];
            dparams[offsets[l].spline_scaler + edge] += g * coefficient * bases[m];
            du += g * coefficient * w.scaler[edge] * dbases[m];
          }
        }
        da[b * w.in + i] = du * grid_half(spec) * (1.0 - th * th);
      }
    upstream = std::move(da);
  }
  if (!grads.dx.empty()) detail::write_grads(grads.dx, upstream, mode);
  if (!grads.dparams.empty()) detail::write_grads(grads.dparams, dparams, mode);
}

}  // namespace resident::reference
