#include "tests/reference/cfc_reference.h"

#include <cmath>
#include <string>

#include "tests/reference/nn_reference_checks.h"

namespace resident::reference {

namespace {

constexpr const char* kOp = "cfc_reference";

double sigmoid(double v) { return 1.0 / (1.0 + std::exp(-v)); }
double sign(double v) { return v > 0.0 ? 1.0 : (v < 0.0 ? -1.0 : 0.0); }

// What one step saves for the backward.
struct Step {
  std::vector<double> h_prev;  // [H]
  std::vector<double> z;       // [U]
  std::vector<double> g;       // [nh * H], before any activation
  double ts = 1.0;
};

double elapsed(const CfcDims& d, std::span<const double> xt) {
  return d.time_column < 0 ? 1.0 : xt[static_cast<std::size_t>(d.time_column)];
}

// One sample's forward; fills `steps` and returns h_{L-1}.
std::vector<double> run_sample(const CfcDims& d, const CfcParams& p, std::span<const double> xs,
                               std::vector<Step>& steps) {
  const std::size_t F = d.features, H = d.hidden, U = d.units, G = d.heads() * H;
  std::vector<double> h(H, 0.0);
  steps.assign(d.window, Step{});
  for (std::size_t t = 0; t < d.window; ++t) {
    Step& s = steps[t];
    const std::span<const double> xt = xs.subspan(t * F, F);
    s.h_prev = h;
    s.ts = elapsed(d, xt);
    s.z.assign(U, 0.0);
    for (std::size_t k = 0; k < U; ++k) {
      double pre = p.backbone_bias[k];
      for (std::size_t f = 0; f < F; ++f) pre += p.input_weight[k * F + f] * xt[f];
      for (std::size_t j = 0; j < H; ++j) pre += p.recurrent_weight[k * H + j] * h[j];
      s.z[k] = kCfcLecunScale * std::tanh(kCfcLecunSlope * pre);
    }
    s.g.assign(G, 0.0);
    for (std::size_t j = 0; j < G; ++j) {
      double v = p.heads_bias[j];
      for (std::size_t k = 0; k < U; ++k) v += p.heads_weight[j * U + k] * s.z[k];
      s.g[j] = v;
    }
    for (std::size_t i = 0; i < H; ++i) {
      if (d.pure) {
        const double f = s.g[i];
        const double e = std::exp(-s.ts * (std::fabs(p.w_tau[i]) + std::fabs(f)));
        h[i] = -p.A[i] * e * f + p.A[i];
      } else {
        const double f1 = std::tanh(s.g[i]), f2 = std::tanh(s.g[H + i]);
        const double sg = sigmoid(s.g[2 * H + i] * s.ts + s.g[3 * H + i]);
        h[i] = f1 * (1.0 - sg) + sg * f2;
      }
    }
  }
  return h;
}

}  // namespace

void validate_cfc_dims(const CfcDims& d) {
  detail::require(d.window >= 1, kOp, "window = 0, need >= 1");
  detail::require(d.features >= 1, kOp, "features = 0, need >= 1");
  detail::require(d.outputs >= 1, kOp, "outputs = 0, need >= 1");
  detail::require(d.hidden >= 1, kOp, "hidden = 0, need >= 1");
  detail::require(d.units >= 1, kOp, "units = 0, need >= 1");
  detail::require(d.time_column >= -1 && d.time_column < static_cast<long>(d.features), kOp,
                  "time_column = " + std::to_string(d.time_column) + ", allowed [-1, " +
                      std::to_string(d.features - 1) + "]");
}

CfcParams cfc_zero_params(const CfcDims& d) {
  validate_cfc_dims(d);
  const std::size_t F = d.features, H = d.hidden, U = d.units, G = d.heads() * H;
  CfcParams p;
  p.input_weight.assign(U * F, 0.0);
  p.recurrent_weight.assign(U * H, 0.0);
  p.backbone_bias.assign(U, 0.0);
  p.heads_weight.assign(G * U, 0.0);
  p.heads_bias.assign(G, 0.0);
  if (d.pure) {
    p.w_tau.assign(H, 0.0);
    p.A.assign(H, 0.0);
  }
  p.readout_weight.assign(d.outputs * H, 0.0);
  p.readout_bias.assign(d.outputs, 0.0);
  return p;
}

std::vector<std::pair<std::string, std::vector<double>*>> cfc_named_tensors(CfcParams& p) {
  std::vector<std::pair<std::string, std::vector<double>*>> named = {
      {"backbone.input_weight", &p.input_weight},
      {"backbone.recurrent_weight", &p.recurrent_weight},
      {"backbone.bias", &p.backbone_bias},
      {"heads.weight", &p.heads_weight},
      {"heads.bias", &p.heads_bias}};
  if (!p.A.empty()) {
    named.emplace_back("w_tau", &p.w_tau);
    named.emplace_back("A", &p.A);
  }
  named.emplace_back("readout.weight", &p.readout_weight);
  named.emplace_back("readout.bias", &p.readout_bias);
  return named;
}

std::vector<double> cfc_forward(const CfcDims& d, const CfcParams& p, std::span<const double> x,
                                std::size_t batch) {
  validate_cfc_dims(d);
  const std::size_t per_sample = d.window * d.features;
  detail::require_size(kOp, "x", x.size(), batch * per_sample);
  std::vector<double> pred(batch * d.outputs);
  std::vector<Step> steps;
  for (std::size_t b = 0; b < batch; ++b) {
    const std::vector<double> h = run_sample(d, p, x.subspan(b * per_sample, per_sample), steps);
    for (std::size_t o = 0; o < d.outputs; ++o) {
      double v = p.readout_bias[o];
      for (std::size_t i = 0; i < d.hidden; ++i) v += p.readout_weight[o * d.hidden + i] * h[i];
      pred[b * d.outputs + o] = v;
    }
  }
  return pred;
}

CfcGradients cfc_backward(const CfcDims& d, const CfcParams& p, std::span<const double> x,
                          std::size_t batch, std::span<const double> dpred) {
  validate_cfc_dims(d);
  const std::size_t F = d.features, H = d.hidden, U = d.units, G = d.heads() * H;
  const std::size_t per_sample = d.window * F;
  detail::require_size(kOp, "x", x.size(), batch * per_sample);
  detail::require_size(kOp, "dpred", dpred.size(), batch * d.outputs);
  CfcGradients out{cfc_zero_params(d), std::vector<double>(x.size(), 0.0)};
  CfcParams& g = out.params;
  std::vector<Step> steps;
  for (std::size_t b = 0; b < batch; ++b) {
    const std::span<const double> xs = x.subspan(b * per_sample, per_sample);
    const std::vector<double> h_last = run_sample(d, p, xs, steps);
    // Readout.
    std::vector<double> dh(H, 0.0);
    for (std::size_t o = 0; o < d.outputs; ++o) {
      const double dy = dpred[b * d.outputs + o];
      g.readout_bias[o] += dy;
      for (std::size_t i = 0; i < H; ++i) {
        g.readout_weight[o * H + i] += dy * h_last[i];
        dh[i] += dy * p.readout_weight[o * H + i];
      }
    }
    for (std::size_t t = d.window; t-- > 0;) {
      const Step& s = steps[t];
      std::vector<double> dgv(G, 0.0);
      double dts = 0.0;
      for (std::size_t i = 0; i < H; ++i) {
        if (d.pure) {
          const double f = s.g[i], a = p.A[i], w = p.w_tau[i];
          const double e = std::exp(-s.ts * (std::fabs(w) + std::fabs(f)));
          dgv[i] = dh[i] * (-a * e * (1.0 - s.ts * std::fabs(f)));
          g.A[i] += dh[i] * (1.0 - e * f);
          g.w_tau[i] += dh[i] * a * f * e * s.ts * sign(w);
          dts += dh[i] * a * f * e * (std::fabs(w) + std::fabs(f));
        } else {
          const double f1 = std::tanh(s.g[i]), f2 = std::tanh(s.g[H + i]);
          const double sg = sigmoid(s.g[2 * H + i] * s.ts + s.g[3 * H + i]);
          const double ds = dh[i] * (f2 - f1) * sg * (1.0 - sg);
          dgv[i] = dh[i] * (1.0 - sg) * (1.0 - f1 * f1);
          dgv[H + i] = dh[i] * sg * (1.0 - f2 * f2);
          dgv[2 * H + i] = ds * s.ts;
          dgv[3 * H + i] = ds;
          dts += ds * s.g[2 * H + i];
        }
      }
      std::vector<double> dz(U, 0.0);
      for (std::size_t j = 0; j < G; ++j) {
        g.heads_bias[j] += dgv[j];
        for (std::size_t k = 0; k < U; ++k) {
          g.heads_weight[j * U + k] += dgv[j] * s.z[k];
          dz[k] += dgv[j] * p.heads_weight[j * U + k];
        }
      }
      std::vector<double> dh_prev(H, 0.0);
      double* dxt = out.dx.data() + b * per_sample + t * F;
      for (std::size_t k = 0; k < U; ++k) {
        const double th = s.z[k] / kCfcLecunScale;
        const double dp = dz[k] * kCfcLecunScale * kCfcLecunSlope * (1.0 - th * th);
        g.backbone_bias[k] += dp;
        for (std::size_t f = 0; f < F; ++f) {
          g.input_weight[k * F + f] += dp * xs[t * F + f];
          dxt[f] += dp * p.input_weight[k * F + f];
        }
        for (std::size_t j = 0; j < H; ++j) {
          g.recurrent_weight[k * H + j] += dp * s.h_prev[j];
          dh_prev[j] += dp * p.recurrent_weight[k * H + j];
        }
      }
      if (d.time_column >= 0) dxt[d.time_column] += dts;
      dh = dh_prev;
    }
  }
  return out;
}

}  // namespace resident::reference
