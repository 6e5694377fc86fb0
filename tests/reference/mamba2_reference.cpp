// Double-precision Mamba2 reference (contracts in mamba2_reference.h).
#include "tests/reference/mamba2_reference.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "kernels/core/error.h"

namespace resident::reference {

namespace {

void require(bool ok, const std::string& what) {
  if (!ok) throw Error("mamba2_reference", "invalid argument", what, __FILE__, __LINE__);
}

double sigmoid(double v) { return 1.0 / (1.0 + std::exp(-v)); }
double silu(double v) { return v * sigmoid(v); }
double silu_grad(double v) {
  const double s = sigmoid(v);
  return s * (1.0 + v * (1.0 - s));
}
// PyTorch's softplus(beta 1, threshold 20).
double softplus(double v) { return v > 20.0 ? v : std::log1p(std::exp(v)); }
double softplus_grad(double v) { return v > 20.0 ? 1.0 : sigmoid(v); }

double g_max_exponent = -std::numeric_limits<double>::infinity();
double tracked_exp(double argument) {
  g_max_exponent = std::max(g_max_exponent, argument);
  return std::exp(argument);
}

// y [rows, out] = x [rows, in] W^T (W [out, in]).
std::vector<double> matmul_wt(std::size_t rows, std::size_t in, std::size_t out,
                              std::span<const double> x, std::span<const double> w) {
  std::vector<double> y(rows * out, 0.0);
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t o = 0; o < out; ++o) {
      double acc = 0.0;
      for (std::size_t i = 0; i < in; ++i) acc += x[r * in + i] * w[o * in + i];
      y[r * out + o] = acc;
    }
  return y;
}

// dx [rows, in] = dy W; dW [out, in] += dy^T x.
void matmul_wt_backward(std::size_t rows, std::size_t in, std::size_t out,
                        std::span<const double> x, std::span<const double> w,
                        std::span<const double> dy, std::vector<double>* dx,
                        std::vector<double>& dw) {
  if (dx != nullptr) dx->assign(rows * in, 0.0);
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t o = 0; o < out; ++o) {
      const double g = dy[r * out + o];
      for (std::size_t i = 0; i < in; ++i) {
        if (dx != nullptr) (*dx)[r * in + i] += g * w[o * in + i];
        dw[o * in + i] += g * x[r * in + i];
      }
    }
}

// RMSNorm of one row: returns rstd, writes y.
double rms_row(std::size_t cols, const double* x, const double* w, double* y) {
  double sq = 0.0;
  for (std::size_t c = 0; c < cols; ++c) sq += x[c] * x[c];
  const double rstd = 1.0 / std::sqrt(sq / static_cast<double>(cols) + kMamba2NormEps);
  for (std::size_t c = 0; c < cols; ++c) y[c] = x[c] * rstd * w[c];
  return rstd;
}

// Backward of one RMSNorm row: dx += ..., dw += ....
void rms_row_backward(std::size_t cols, const double* x, const double* w, double rstd,
                      const double* dy, double* dx, double* dw) {
  double dot = 0.0;
  for (std::size_t c = 0; c < cols; ++c) dot += dy[c] * w[c] * x[c];
  const double coef = rstd * rstd * rstd * dot / static_cast<double>(cols);
  for (std::size_t c = 0; c < cols; ++c) {
    dx[c] += rstd * dy[c] * w[c] - x[c] * coef;
    dw[c] += dy[c] * x[c] * rstd;
  }
}

void check_ssd(const SsdShape& s, std::span<const double> x, std::span<const double> dt,
               std::span<const double> B, std::span<const double> C) {
  require(s.chunk >= 1, "ssd chunk must be >= 1");
  require(x.size() == s.length * s.headdim, "ssd x size");
  require(dt.size() == s.length, "ssd dt size");
  require(B.size() == s.length * s.d_state && C.size() == s.length * s.d_state, "ssd B/C size");
}

// One chunk's decay terms: cs (inclusive cumsum from the chunk start) and the segment sums
// seg[i][j] = sum_{r=j+1..i} a_r (j <= i), accumulated down each column.
struct ChunkDecay {
  std::size_t len = 0;
  std::vector<double> cs;      // exp(cs_i) is ecs
  std::vector<double> ecs;     // [len]
  std::vector<double> lambda;  // [len, len], exp(seg), 0 above the diagonal
};

ChunkDecay chunk_decay(std::span<const double> dt, double A, std::size_t t0, std::size_t len) {
  ChunkDecay d;
  d.len = len;
  d.cs.resize(len);
  d.ecs.resize(len);
  d.lambda.assign(len * len, 0.0);
  double run = 0.0;
  for (std::size_t i = 0; i < len; ++i) {
    run += dt[t0 + i] * A;
    d.cs[i] = run;
    d.ecs[i] = tracked_exp(run);
  }
  for (std::size_t j = 0; j < len; ++j) {
    double seg = 0.0;
    d.lambda[j * len + j] = tracked_exp(0.0);
    for (std::size_t i = j + 1; i < len; ++i) {
      seg += dt[t0 + i] * A;
      d.lambda[i * len + j] = tracked_exp(seg);
    }
  }
  return d;
}

// The forward over all chunks; writes y when non-null and returns the state entering each
// chunk ([chunks][P * N]).
std::vector<std::vector<double>> ssd_chunks(const SsdShape& s, std::span<const double> x,
                                            std::span<const double> dt, double A,
                                            std::span<const double> B, std::span<const double> C,
                                            double D, std::vector<double>* y) {
  check_ssd(s, x, dt, B, C);
  const std::size_t L = s.length, P = s.headdim, N = s.d_state, Q = s.chunk;
  std::vector<std::vector<double>> states;
  std::vector<double> h(P * N, 0.0);
  if (y != nullptr) y->assign(L * P, 0.0);
  for (std::size_t t0 = 0; t0 < L; t0 += Q) {
    const std::size_t len = std::min(Q, L - t0);
    states.push_back(h);
    const ChunkDecay d = chunk_decay(dt, A, t0, len);
    if (y != nullptr) {
      for (std::size_t i = 0; i < len; ++i) {
        const std::size_t t = t0 + i;
        for (std::size_t p = 0; p < P; ++p) {
          double acc = 0.0;
          for (std::size_t j = 0; j <= i; ++j) {
            const std::size_t s_ = t0 + j;
            double cb = 0.0;
            for (std::size_t n = 0; n < N; ++n) cb += C[t * N + n] * B[s_ * N + n];
            acc += cb * d.lambda[i * len + j] * dt[s_] * x[s_ * P + p];
          }
          double hc = 0.0;
          for (std::size_t n = 0; n < N; ++n) hc += h[p * N + n] * C[t * N + n];
          (*y)[t * P + p] = acc + d.ecs[i] * hc + D * x[t * P + p];
        }
      }
    }
    const std::size_t end = len - 1;
    std::vector<double> next(P * N, 0.0);
    for (std::size_t p = 0; p < P; ++p)
      for (std::size_t n = 0; n < N; ++n) {
        double acc = d.ecs[end] * h[p * N + n];
        for (std::size_t j = 0; j < len; ++j) {
          const std::size_t s_ = t0 + j;
          acc += d.lambda[end * len + j] * dt[s_] * x[s_ * P + p] * B[s_ * N + n];
        }
        next[p * N + n] = acc;
      }
    h = std::move(next);
  }
  return states;
}

}  // namespace

void ssd_reset_max_exponent() { g_max_exponent = -std::numeric_limits<double>::infinity(); }
double ssd_max_exponent() { return g_max_exponent; }

std::vector<double> ssd_forward(const SsdShape& shape, std::span<const double> x,
                                std::span<const double> dt, double A, std::span<const double> B,
                                std::span<const double> C, double D) {
  std::vector<double> y;
  ssd_chunks(shape, x, dt, A, B, C, D, &y);
  return y;
}

std::vector<double> ssd_recurrent_forward(const SsdShape& s, std::span<const double> x,
                                          std::span<const double> dt, double A,
                                          std::span<const double> B, std::span<const double> C,
                                          double D) {
  check_ssd(s, x, dt, B, C);
  const std::size_t L = s.length, P = s.headdim, N = s.d_state;
  std::vector<double> h(P * N, 0.0), y(L * P, 0.0);
  for (std::size_t t = 0; t < L; ++t) {
    const double decay = std::exp(dt[t] * A);
    for (std::size_t p = 0; p < P; ++p) {
      double acc = 0.0;
      for (std::size_t n = 0; n < N; ++n) {
        double& hv = h[p * N + n];
        hv = decay * hv + dt[t] * x[t * P + p] * B[t * N + n];
        acc += hv * C[t * N + n];
      }
      y[t * P + p] = acc + D * x[t * P + p];
    }
  }
  return y;
}

SsdGrads ssd_backward(const SsdShape& s, std::span<const double> x, std::span<const double> dt,
                      double A, std::span<const double> B, std::span<const double> C, double D,
                      std::span<const double> dy) {
  const std::size_t L = s.length, P = s.headdim, N = s.d_state, Q = s.chunk;
  require(dy.size() == L * P, "ssd dy size");
  const std::vector<std::vector<double>> states = ssd_chunks(s, x, dt, A, B, C, D, nullptr);
  SsdGrads g;
  g.dx.assign(L * P, 0.0);
  g.ddt.assign(L, 0.0);
  g.dB.assign(L * N, 0.0);
  g.dC.assign(L * N, 0.0);
  std::vector<double> dh(P * N, 0.0);  // dLoss / d(state leaving the chunk)
  const std::size_t chunks = states.size();
  for (std::size_t c = chunks; c-- > 0;) {
    const std::size_t t0 = c * Q;
    const std::size_t len = std::min(Q, L - t0);
    const std::size_t end = len - 1;
    const std::vector<double>& hin = states[c];
    const ChunkDecay d = chunk_decay(dt, A, t0, len);
    auto lam = [&](std::size_t i, std::size_t j) { return d.lambda[i * len + j]; };
    std::vector<double> M(len * len, 0.0), dM(len * len, 0.0);
    for (std::size_t i = 0; i < len; ++i)
      for (std::size_t j = 0; j <= i; ++j) {
        double cb = 0.0, dyx = 0.0;
        for (std::size_t n = 0; n < N; ++n) cb += C[(t0 + i) * N + n] * B[(t0 + j) * N + n];
        for (std::size_t p = 0; p < P; ++p) dyx += dy[(t0 + i) * P + p] * x[(t0 + j) * P + p];
        M[i * len + j] = cb * lam(i, j);
        dM[i * len + j] = dt[t0 + j] * dyx;
      }
    // dXd, dx, ddt (direct), dD
    for (std::size_t j = 0; j < len; ++j) {
      const std::size_t sj = t0 + j;
      for (std::size_t p = 0; p < P; ++p) {
        double dxd = 0.0;
        for (std::size_t i = j; i < len; ++i) dxd += M[i * len + j] * dy[(t0 + i) * P + p];
        double hb = 0.0;
        for (std::size_t n = 0; n < N; ++n) hb += dh[p * N + n] * B[sj * N + n];
        dxd += lam(end, j) * hb;
        g.dx[sj * P + p] = dt[sj] * dxd + D * dy[sj * P + p];
        g.ddt[sj] += x[sj * P + p] * dxd;
        g.dD += x[sj * P + p] * dy[sj * P + p];
      }
    }
    // dC, dB
    for (std::size_t i = 0; i < len; ++i)
      for (std::size_t n = 0; n < N; ++n) {
        double acc = 0.0;
        for (std::size_t j = 0; j <= i; ++j) acc += dM[i * len + j] * lam(i, j) * B[(t0 + j) * N + n];
        double inter = 0.0;
        for (std::size_t p = 0; p < P; ++p) inter += dy[(t0 + i) * P + p] * hin[p * N + n];
        g.dC[(t0 + i) * N + n] += acc + d.ecs[i] * inter;
      }
    for (std::size_t j = 0; j < len; ++j)
      for (std::size_t n = 0; n < N; ++n) {
        double acc = 0.0;
        for (std::size_t i = j; i < len; ++i) acc += dM[i * len + j] * lam(i, j) * C[(t0 + i) * N + n];
        double inter = 0.0;
        for (std::size_t p = 0; p < P; ++p) inter += x[(t0 + j) * P + p] * dh[p * N + n];
        g.dB[(t0 + j) * N + n] += acc + lam(end, j) * dt[t0 + j] * inter;
      }
    // dcs: the gradient through every exponent, as if seg(i, j) = cs_i - cs_j.
    std::vector<double> dcs(len, 0.0);
    for (std::size_t i = 0; i < len; ++i)
      for (std::size_t j = 0; j < i; ++j) {
        const double G = dM[i * len + j] * M[i * len + j];
        dcs[i] += G;
        dcs[j] -= G;
      }
    double w_total = 0.0;
    for (std::size_t i = 0; i < len; ++i) {
      const std::size_t t = t0 + i;
      double e = 0.0, w = 0.0;
      for (std::size_t p = 0; p < P; ++p) {
        double hc = 0.0, hb = 0.0;
        for (std::size_t n = 0; n < N; ++n) {
          hc += hin[p * N + n] * C[t * N + n];
          hb += dh[p * N + n] * B[t * N + n];
        }
        e += dy[t * P + p] * hc;
        w += x[t * P + p] * hb;
      }
      e *= d.ecs[i];
      w *= lam(end, i) * dt[t];
      dcs[i] += e - w;
      w_total += w;
    }
    double dh_hin = 0.0;
    for (std::size_t k = 0; k < P * N; ++k) dh_hin += dh[k] * hin[k];
    dcs[end] += w_total + d.ecs[end] * dh_hin;
    // da_r = sum_{t >= r} dcs_t (cs_t = sum_{r <= t} a_r), a_r = dt_r A
    double da = 0.0;
    for (std::size_t r = len; r-- > 0;) {
      da += dcs[r];
      g.ddt[t0 + r] += A * da;
      g.dA += dt[t0 + r] * da;
    }
    // dLoss / d(state entering the chunk)
    std::vector<double> next(P * N, 0.0);
    for (std::size_t p = 0; p < P; ++p)
      for (std::size_t n = 0; n < N; ++n) {
        double acc = d.ecs[end] * dh[p * N + n];
        for (std::size_t i = 0; i < len; ++i)
          acc += d.ecs[i] * dy[(t0 + i) * P + p] * C[(t0 + i) * N + n];
        next[p * N + n] = acc;
      }
    dh = std::move(next);
  }
  return g;
}

std::vector<double> causal_conv1d_forward(std::size_t batch, std::size_t length,
                                          std::size_t channels, std::size_t kernel,
                                          std::span<const double> u, std::span<const double> weight,
                                          std::span<const double> bias, bool silu_out) {
  require(u.size() == batch * length * channels, "conv u size");
  require(weight.size() == channels * kernel && bias.size() == channels, "conv weight/bias size");
  std::vector<double> y(u.size());
  for (std::size_t b = 0; b < batch; ++b)
    for (std::size_t t = 0; t < length; ++t)
      for (std::size_t c = 0; c < channels; ++c) {
        double acc = bias[c];
        for (std::size_t k = 0; k < kernel; ++k) {
          const std::ptrdiff_t src = static_cast<std::ptrdiff_t>(t + k) -
                                     static_cast<std::ptrdiff_t>(kernel - 1);
          if (src >= 0)
            acc += weight[c * kernel + k] *
                   u[(b * length + static_cast<std::size_t>(src)) * channels + c];
        }
        y[(b * length + t) * channels + c] = silu_out ? silu(acc) : acc;
      }
  return y;
}

CausalConv1dGrads causal_conv1d_backward(std::size_t batch, std::size_t length,
                                         std::size_t channels, std::size_t kernel,
                                         std::span<const double> u, std::span<const double> weight,
                                         std::span<const double> bias, bool silu_out,
                                         std::span<const double> dy) {
  require(dy.size() == batch * length * channels, "conv dy size");
  const std::vector<double> pre =
      causal_conv1d_forward(batch, length, channels, kernel, u, weight, bias, false);
  CausalConv1dGrads g;
  g.du.assign(u.size(), 0.0);
  g.dweight.assign(channels * kernel, 0.0);
  g.dbias.assign(channels, 0.0);
  for (std::size_t b = 0; b < batch; ++b)
    for (std::size_t t = 0; t < length; ++t)
      for (std::size_t c = 0; c < channels; ++c) {
        const std::size_t row = (b * length + t) * channels + c;
        const double dpre = silu_out ? dy[row] * silu_grad(pre[row]) : dy[row];
        g.dbias[c] += dpre;
        for (std::size_t k = 0; k < kernel; ++k) {
          const std::ptrdiff_t src = static_cast<std::ptrdiff_t>(t + k) -
                                     static_cast<std::ptrdiff_t>(kernel - 1);
          if (src < 0) continue;
          const std::size_t from = (b * length + static_cast<std::size_t>(src)) * channels + c;
          g.dweight[c * kernel + k] += dpre * u[from];
          g.du[from] += dpre * weight[c * kernel + k];
        }
      }
  return g;
}

std::vector<double> gated_rms_norm_forward(std::size_t rows, std::size_t cols,
                                           std::span<const double> y, std::span<const double> z,
                                           std::span<const double> w) {
  std::vector<double> gated(rows * cols), out(rows * cols);
  for (std::size_t i = 0; i < rows * cols; ++i) gated[i] = y[i] * silu(z[i]);
  for (std::size_t r = 0; r < rows; ++r)
    rms_row(cols, gated.data() + r * cols, w.data(), out.data() + r * cols);
  return out;
}

GatedRmsNormGrads gated_rms_norm_backward(std::size_t rows, std::size_t cols,
                                          std::span<const double> y, std::span<const double> z,
                                          std::span<const double> w, std::span<const double> dyn) {
  GatedRmsNormGrads g;
  g.dy.assign(rows * cols, 0.0);
  g.dz.assign(rows * cols, 0.0);
  g.dw.assign(cols, 0.0);
  std::vector<double> gated(cols), scratch(cols), dg(cols);
  for (std::size_t r = 0; r < rows; ++r) {
    for (std::size_t c = 0; c < cols; ++c) gated[c] = y[r * cols + c] * silu(z[r * cols + c]);
    const double rstd = rms_row(cols, gated.data(), w.data(), scratch.data());
    std::fill(dg.begin(), dg.end(), 0.0);
    rms_row_backward(cols, gated.data(), w.data(), rstd, dyn.data() + r * cols, dg.data(),
                     g.dw.data());
    for (std::size_t c = 0; c < cols; ++c) {
      const std::size_t i = r * cols + c;
      g.dy[i] = dg[c] * silu(z[i]);
      g.dz[i] = dg[c] * y[i] * silu_grad(z[i]);
    }
  }
  return g;
}

Mamba2Params mamba2_zero_params(const Mamba2Dims& m) {
  require(m.headdim >= 1 && m.d_inner() % m.headdim == 0, "headdim must divide d_inner");
  const std::size_t D = m.d_model, di = m.d_inner(), H = m.heads(), C = m.conv_channels();
  Mamba2Params p;
  p.embed_w.assign(D * m.features, 0.0);
  p.embed_b.assign(D, 0.0);
  p.layers.resize(m.n_layers);
  for (Mamba2LayerParams& l : p.layers) {
    l.norm_w.assign(D, 0.0);
    l.in_proj_w.assign(m.proj_width() * D, 0.0);
    l.conv_w.assign(C * m.d_conv, 0.0);
    l.conv_b.assign(C, 0.0);
    l.dt_bias.assign(H, 0.0);
    l.A_log.assign(H, 0.0);
    l.D.assign(H, 0.0);
    l.gnorm_w.assign(di, 0.0);
    l.out_proj_w.assign(D * di, 0.0);
  }
  p.norm_f_w.assign(D, 0.0);
  p.head_w.assign(m.outputs * D, 0.0);
  p.head_b.assign(m.outputs, 0.0);
  return p;
}

std::vector<std::pair<std::string, std::vector<double>*>> mamba2_named_tensors(Mamba2Params& p) {
  std::vector<std::pair<std::string, std::vector<double>*>> t;
  t.emplace_back("embed.weight", &p.embed_w);
  t.emplace_back("embed.bias", &p.embed_b);
  for (std::size_t i = 0; i < p.layers.size(); ++i) {
    const std::string pre = "layers." + std::to_string(i) + ".";
    Mamba2LayerParams& l = p.layers[i];
    t.emplace_back(pre + "norm.weight", &l.norm_w);
    t.emplace_back(pre + "mixer.in_proj.weight", &l.in_proj_w);
    t.emplace_back(pre + "mixer.conv1d.weight", &l.conv_w);
    t.emplace_back(pre + "mixer.conv1d.bias", &l.conv_b);
    t.emplace_back(pre + "mixer.dt_bias", &l.dt_bias);
    t.emplace_back(pre + "mixer.A_log", &l.A_log);
    t.emplace_back(pre + "mixer.D", &l.D);
    t.emplace_back(pre + "mixer.norm.weight", &l.gnorm_w);
    t.emplace_back(pre + "mixer.out_proj.weight", &l.out_proj_w);
  }
  t.emplace_back("norm_f.weight", &p.norm_f_w);
  t.emplace_back("head.weight", &p.head_w);
  t.emplace_back("head.bias", &p.head_b);
  return t;
}

std::vector<double> mamba2_flatten(const Mamba2Params& p) {
  std::vector<double> flat;
  for (const auto& [name, tensor] : mamba2_named_tensors(const_cast<Mamba2Params&>(p)))
    flat.insert(flat.end(), tensor->begin(), tensor->end());
  return flat;
}

void mamba2_unflatten(std::span<const double> flat, Mamba2Params& p) {
  std::size_t offset = 0;
  for (const auto& [name, tensor] : mamba2_named_tensors(p)) {
    require(offset + tensor->size() <= flat.size(), "unflatten: too few values");
    std::copy_n(flat.begin() + static_cast<std::ptrdiff_t>(offset), tensor->size(),
                tensor->begin());
    offset += tensor->size();
  }
  require(offset == flat.size(), "unflatten: too many values");
}

namespace {

struct LayerCache {
  std::vector<double> h_in, rstd, u, proj, xbc_pre, xbc, dt, y, yn;
};

struct SampleCache {
  std::vector<LayerCache> layers;
  std::vector<double> h_last, hf;
  double rstd_f = 0.0;
  std::vector<double> pred;
};

// Column block [col0, col0 + width) of a [rows, stride] matrix.
std::vector<double> columns(std::span<const double> m, std::size_t rows, std::size_t stride,
                            std::size_t col0, std::size_t width) {
  std::vector<double> out(rows * width);
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < width; ++c) out[r * width + c] = m[r * stride + col0 + c];
  return out;
}

void check_dims(const Mamba2Dims& m) {
  require(m.window >= 1 && m.features >= 1 && m.outputs >= 1 && m.d_model >= 1 &&
              m.n_layers >= 1 && m.expand >= 1 && m.d_state >= 1 && m.d_conv >= 1 &&
              m.chunk >= 1,
          "every Mamba2 dimension must be >= 1");
  require(m.headdim >= 1 && m.d_inner() % m.headdim == 0, "headdim must divide d_inner");
}

SampleCache forward_sample(const Mamba2Dims& m, const Mamba2Params& p, const double* x) {
  const std::size_t L = m.window, F = m.features, D = m.d_model, di = m.d_inner(),
                    H = m.heads(), P = m.headdim, N = m.d_state, C = m.conv_channels(),
                    W = m.proj_width();
  SampleCache sc;
  std::vector<double> h = matmul_wt(L, F, D, std::span<const double>(x, L * F), p.embed_w);
  for (std::size_t t = 0; t < L; ++t)
    for (std::size_t d = 0; d < D; ++d) h[t * D + d] += p.embed_b[d];
  for (const Mamba2LayerParams& lp : p.layers) {
    LayerCache lc;
    lc.h_in = h;
    lc.rstd.resize(L);
    lc.u.resize(L * D);
    for (std::size_t t = 0; t < L; ++t)
      lc.rstd[t] = rms_row(D, h.data() + t * D, lp.norm_w.data(), lc.u.data() + t * D);
    lc.proj = matmul_wt(L, D, W, lc.u, lp.in_proj_w);
    lc.xbc_pre = columns(lc.proj, L, W, di, C);
    lc.xbc = causal_conv1d_forward(1, L, C, m.d_conv, lc.xbc_pre, lp.conv_w, lp.conv_b, true);
    lc.dt.resize(L * H);
    for (std::size_t t = 0; t < L; ++t)
      for (std::size_t hh = 0; hh < H; ++hh)
        lc.dt[t * H + hh] = softplus(lc.proj[t * W + di + C + hh] + lp.dt_bias[hh]);
    const std::vector<double> Bm = columns(lc.xbc, L, C, di, N);
    const std::vector<double> Cm = columns(lc.xbc, L, C, di + N, N);
    lc.y.assign(L * di, 0.0);
    const SsdShape shape{L, P, N, m.chunk};
    for (std::size_t hh = 0; hh < H; ++hh) {
      const std::vector<double> xh = columns(lc.xbc, L, C, hh * P, P);
      const std::vector<double> dth = columns(lc.dt, L, H, hh, 1);
      const std::vector<double> yh =
          ssd_forward(shape, xh, dth, -std::exp(lp.A_log[hh]), Bm, Cm, lp.D[hh]);
      for (std::size_t t = 0; t < L; ++t)
        for (std::size_t pp = 0; pp < P; ++pp) lc.y[t * di + hh * P + pp] = yh[t * P + pp];
    }
    const std::vector<double> z = columns(lc.proj, L, W, 0, di);
    lc.yn = gated_rms_norm_forward(L, di, lc.y, z, lp.gnorm_w);
    const std::vector<double> out = matmul_wt(L, di, D, lc.yn, lp.out_proj_w);
    for (std::size_t i = 0; i < L * D; ++i) h[i] += out[i];
    sc.layers.push_back(std::move(lc));
  }
  sc.h_last.assign(h.begin() + static_cast<std::ptrdiff_t>((L - 1) * D), h.end());
  sc.hf.resize(D);
  sc.rstd_f = rms_row(D, sc.h_last.data(), p.norm_f_w.data(), sc.hf.data());
  sc.pred = matmul_wt(1, D, m.outputs, sc.hf, p.head_w);
  for (std::size_t o = 0; o < m.outputs; ++o) sc.pred[o] += p.head_b[o];
  return sc;
}

}  // namespace

std::vector<double> mamba2_forward(const Mamba2Dims& dims, const Mamba2Params& params,
                                   std::span<const double> x, std::size_t batch) {
  check_dims(dims);
  require(x.size() == batch * dims.window * dims.features, "mamba2 x size");
  std::vector<double> pred;
  for (std::size_t b = 0; b < batch; ++b) {
    const SampleCache sc = forward_sample(dims, params, x.data() + b * dims.window * dims.features);
    pred.insert(pred.end(), sc.pred.begin(), sc.pred.end());
  }
  return pred;
}

Mamba2Gradients mamba2_backward(const Mamba2Dims& m, const Mamba2Params& p,
                                std::span<const double> x, std::size_t batch,
                                std::span<const double> d_prediction) {
  check_dims(m);
  require(x.size() == batch * m.window * m.features, "mamba2 x size");
  require(d_prediction.size() == batch * m.outputs, "mamba2 d_prediction size");
  const std::size_t L = m.window, F = m.features, D = m.d_model, di = m.d_inner(),
                    H = m.heads(), P = m.headdim, N = m.d_state, C = m.conv_channels(),
                    W = m.proj_width(), O = m.outputs;
  Mamba2Gradients g;
  g.params = mamba2_zero_params(m);
  g.dx.assign(x.size(), 0.0);
  Mamba2Params& gp = g.params;
  for (std::size_t b = 0; b < batch; ++b) {
    const double* xb = x.data() + b * L * F;
    const SampleCache sc = forward_sample(m, p, xb);
    const double* dpred = d_prediction.data() + b * O;
    // head
    std::vector<double> dhf(D, 0.0);
    for (std::size_t o = 0; o < O; ++o) {
      gp.head_b[o] += dpred[o];
      for (std::size_t d = 0; d < D; ++d) {
        gp.head_w[o * D + d] += dpred[o] * sc.hf[d];
        dhf[d] += dpred[o] * p.head_w[o * D + d];
      }
    }
    std::vector<double> dh(L * D, 0.0);
    rms_row_backward(D, sc.h_last.data(), p.norm_f_w.data(), sc.rstd_f, dhf.data(),
                     dh.data() + (L - 1) * D, gp.norm_f_w.data());
    for (std::size_t li = m.n_layers; li-- > 0;) {
      const Mamba2LayerParams& lp = p.layers[li];
      Mamba2LayerParams& lg = gp.layers[li];
      const LayerCache& lc = sc.layers[li];
      // out_proj: out = yn Wout^T, d out = dh
      std::vector<double> dyn;
      matmul_wt_backward(L, di, D, lc.yn, lp.out_proj_w, dh, &dyn, lg.out_proj_w);
      const std::vector<double> z = columns(lc.proj, L, W, 0, di);
      const GatedRmsNormGrads gg = gated_rms_norm_backward(L, di, lc.y, z, lp.gnorm_w, dyn);
      for (std::size_t c = 0; c < di; ++c) lg.gnorm_w[c] += gg.dw[c];
      std::vector<double> dproj(L * W, 0.0), dxbc(L * C, 0.0);
      for (std::size_t t = 0; t < L; ++t)
        for (std::size_t c = 0; c < di; ++c) dproj[t * W + c] = gg.dz[t * di + c];
      const std::vector<double> Bm = columns(lc.xbc, L, C, di, N);
      const std::vector<double> Cm = columns(lc.xbc, L, C, di + N, N);
      const SsdShape shape{L, P, N, m.chunk};
      for (std::size_t hh = 0; hh < H; ++hh) {
        const double A = -std::exp(lp.A_log[hh]);
        const std::vector<double> xh = columns(lc.xbc, L, C, hh * P, P);
        const std::vector<double> dth = columns(lc.dt, L, H, hh, 1);
        const std::vector<double> dyh = columns(gg.dy, L, di, hh * P, P);
        const SsdGrads sg = ssd_backward(shape, xh, dth, A, Bm, Cm, lp.D[hh], dyh);
        for (std::size_t t = 0; t < L; ++t) {
          for (std::size_t pp = 0; pp < P; ++pp) dxbc[t * C + hh * P + pp] = sg.dx[t * P + pp];
          for (std::size_t n = 0; n < N; ++n) {
            dxbc[t * C + di + n] += sg.dB[t * N + n];
            dxbc[t * C + di + N + n] += sg.dC[t * N + n];
          }
          const double pre = lc.proj[t * W + di + C + hh] + lp.dt_bias[hh];
          const double ddt_raw = sg.ddt[t] * softplus_grad(pre);
          dproj[t * W + di + C + hh] = ddt_raw;
          lg.dt_bias[hh] += ddt_raw;
        }
        lg.A_log[hh] += sg.dA * A;
        lg.D[hh] += sg.dD;
      }
      const CausalConv1dGrads cg = causal_conv1d_backward(1, L, C, m.d_conv, lc.xbc_pre,
                                                          lp.conv_w, lp.conv_b, true, dxbc);
      for (std::size_t i = 0; i < C * m.d_conv; ++i) lg.conv_w[i] += cg.dweight[i];
      for (std::size_t c = 0; c < C; ++c) lg.conv_b[c] += cg.dbias[c];
      for (std::size_t t = 0; t < L; ++t)
        for (std::size_t c = 0; c < C; ++c) dproj[t * W + di + c] = cg.du[t * C + c];
      std::vector<double> du;
      matmul_wt_backward(L, D, W, lc.u, lp.in_proj_w, dproj, &du, lg.in_proj_w);
      for (std::size_t t = 0; t < L; ++t)
        rms_row_backward(D, lc.h_in.data() + t * D, lp.norm_w.data(), lc.rstd[t],
                         du.data() + t * D, dh.data() + t * D, lg.norm_w.data());
    }
    std::vector<double> dxb;
    matmul_wt_backward(L, F, D, std::span<const double>(xb, L * F), p.embed_w, dh, &dxb,
                       gp.embed_w);
    for (std::size_t t = 0; t < L; ++t)
      for (std::size_t d = 0; d < D; ++d) gp.embed_b[d] += dh[t * D + d];
    std::copy(dxb.begin(), dxb.end(), g.dx.begin() + static_cast<std::ptrdiff_t>(b * L * F));
  }
  return g;
}

}  // namespace resident::reference
