#include "tests/reference/xlstm_reference.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/core/error.h"

namespace resident::reference {

namespace {

using Vec = std::vector<double>;

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }
double log_sigmoid(double x) { return std::min(x, 0.0) - std::log1p(std::exp(-std::fabs(x))); }
double silu(double x) { return x * sigmoid(x); }
double silu_grad(double x) {
  const double s = sigmoid(x);
  return s * (1.0 + x * (1.0 - s));
}
constexpr double kGeluC = 0.7978845608028654;  // sqrt(2 / pi)
double gelu(double x) { return 0.5 * x * (1.0 + std::tanh(kGeluC * (x + 0.044715 * x * x * x))); }
double gelu_grad(double x) {
  const double t = std::tanh(kGeluC * (x + 0.044715 * x * x * x));
  return 0.5 * (1.0 + t) + 0.5 * x * (1.0 - t * t) * kGeluC * (1.0 + 3.0 * 0.044715 * x * x);
}

[[noreturn]] void invalid(const std::string& detail) {
  throw Error("XlstmDims", "invalid dims", detail, __FILE__, __LINE__);
}

// y [rows, out] = x [rows, in] W^T + b (b may be null).
Vec linear(const Vec& x, std::size_t rows, std::size_t in, const double* W, std::size_t out,
           const double* b) {
  Vec y(rows * out);
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t o = 0; o < out; ++o) {
      double s = b != nullptr ? b[o] : 0.0;
      for (std::size_t i = 0; i < in; ++i) s += W[o * in + i] * x[r * in + i];
      y[r * out + o] = s;
    }
  return y;
}

// dx += dy W, dW += dy^T x, db += column sums of dy (each when non-null).
void linear_back(Vec* dx, double* dW, double* db, const Vec& x, std::size_t rows, std::size_t in,
                 const double* W, std::size_t out, const Vec& dy) {
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t o = 0; o < out; ++o) {
      const double g = dy[r * out + o];
      if (db != nullptr) db[o] += g;
      for (std::size_t i = 0; i < in; ++i) {
        if (dx != nullptr) (*dx)[r * in + i] += g * W[o * in + i];
        if (dW != nullptr) dW[o * in + i] += g * x[r * in + i];
      }
    }
}

// Headwise (block-diagonal) projection: x [rows, nb * bi] -> y [rows, nb * bo] with W [nb, bo,
// bi]; reads x with row stride x_stride and writes y with row stride y_stride.
void headwise(double* y, std::size_t y_stride, const double* x, std::size_t x_stride,
              std::size_t rows, const double* W, std::size_t nb, std::size_t bo, std::size_t bi) {
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t blk = 0; blk < nb; ++blk)
      for (std::size_t o = 0; o < bo; ++o) {
        double s = 0.0;
        for (std::size_t i = 0; i < bi; ++i)
          s += W[(blk * bo + o) * bi + i] * x[r * x_stride + blk * bi + i];
        y[r * y_stride + blk * bo + o] = s;
      }
}

// dx += HW^T(dy), dW += per block dy^T x.
void headwise_back(double* dx, std::size_t dx_stride, double* dW, const double* x,
                   std::size_t x_stride, const double* dy, std::size_t dy_stride,
                   std::size_t rows, const double* W, std::size_t nb, std::size_t bo,
                   std::size_t bi) {
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t blk = 0; blk < nb; ++blk)
      for (std::size_t o = 0; o < bo; ++o) {
        const double g = dy[r * dy_stride + blk * bo + o];
        for (std::size_t i = 0; i < bi; ++i) {
          dx[r * dx_stride + blk * bi + i] += g * W[(blk * bo + o) * bi + i];
          dW[(blk * bo + o) * bi + i] += g * x[r * x_stride + blk * bi + i];
        }
      }
}

// LayerNorm over rows of x [rows, cols], no bias; gamma null means ones.
struct Norm {
  Vec y, xhat, rstd;
};
Norm layer_norm(const Vec& x, std::size_t rows, std::size_t cols, const double* gamma) {
  Norm n{Vec(rows * cols), Vec(rows * cols), Vec(rows)};
  for (std::size_t r = 0; r < rows; ++r) {
    double mean = 0.0, var = 0.0;
    for (std::size_t c = 0; c < cols; ++c) mean += x[r * cols + c];
    mean /= static_cast<double>(cols);
    for (std::size_t c = 0; c < cols; ++c)
      var += (x[r * cols + c] - mean) * (x[r * cols + c] - mean);
    var /= static_cast<double>(cols);
    n.rstd[r] = 1.0 / std::sqrt(var + kXlstmNormEps);
    for (std::size_t c = 0; c < cols; ++c) {
      n.xhat[r * cols + c] = (x[r * cols + c] - mean) * n.rstd[r];
      n.y[r * cols + c] = n.xhat[r * cols + c] * (gamma != nullptr ? gamma[c] : 1.0);
    }
  }
  return n;
}

// dx += LayerNorm's input gradient; dgamma += sum over rows of dy * xhat (when non-null).
void layer_norm_back(Vec& dx, double* dgamma, const Norm& n, std::size_t rows, std::size_t cols,
                     const double* gamma, const Vec& dy) {
  for (std::size_t r = 0; r < rows; ++r) {
    double mg = 0.0, mgx = 0.0;
    for (std::size_t c = 0; c < cols; ++c) {
      const double g = dy[r * cols + c] * (gamma != nullptr ? gamma[c] : 1.0);
      mg += g;
      mgx += g * n.xhat[r * cols + c];
      if (dgamma != nullptr) dgamma[c] += dy[r * cols + c] * n.xhat[r * cols + c];
    }
    mg /= static_cast<double>(cols);
    mgx /= static_cast<double>(cols);
    for (std::size_t c = 0; c < cols; ++c) {
      const double g = dy[r * cols + c] * (gamma != nullptr ? gamma[c] : 1.0);
      dx[r * cols + c] += n.rstd[r] * (g - mg - n.xhat[r * cols + c] * mgx);
    }
  }
}

// Causal depthwise conv with bias and SiLU: u [L, C] (row stride u_stride) -> pre, y [L, C].
void conv_forward(Vec& pre, Vec& y, const double* u, std::size_t u_stride, std::size_t L,
                  std::size_t C, const double* w, const double* b, std::size_t K) {
  pre.assign(L * C, 0.0);
  y.assign(L * C, 0.0);
  for (std::size_t t = 0; t < L; ++t)
    for (std::size_t c = 0; c < C; ++c) {
      double s = b[c];
      for (std::size_t k = 0; k < K; ++k) {
        const long tt = static_cast<long>(t) - static_cast<long>(K) + 1 + static_cast<long>(k);
        if (tt >= 0) s += w[c * K + k] * u[static_cast<std::size_t>(tt) * u_stride + c];
      }
      pre[t * C + c] = s;
      y[t * C + c] = silu(s);
    }
}

// du += conv's input gradient, dw, db += its parameter gradients, for dy [L, C].
void conv_back(double* du, std::size_t du_stride, double* dw, double* db, const Vec& pre,
               const Vec& dy, const double* u, std::size_t u_stride, std::size_t L, std::size_t C,
               const double* w, std::size_t K) {
  for (std::size_t t = 0; t < L; ++t)
    for (std::size_t c = 0; c < C; ++c) {
      const double g = dy[t * C + c] * silu_grad(pre[t * C + c]);
      db[c] += g;
      for (std::size_t k = 0; k < K; ++k) {
        const long tt = static_cast<long>(t) - static_cast<long>(K) + 1 + static_cast<long>(k);
        if (tt < 0) continue;
        const std::size_t s = static_cast<std::size_t>(tt);
        dw[c * K + k] += g * u[s * u_stride + c];
        du[s * du_stride + c] += g * w[c * K + k];
      }
    }
}

// The mLSTM cell of one head, parallel stabilized form, with what its backward needs.
struct Cell {
  Vec h, m, n, r, C, Dp;  // h [L, DH]; m, n, r [L]; C, Dp [L, L] (lower triangle)
};

Cell cell_forward(std::size_t L, std::size_t DH, const double* q, const double* k,
                  const double* v, const double* ig, const double* fg, double eps,
                  bool stabilized) {
  Cell c{Vec(L * DH, 0.0), Vec(L), Vec(L), Vec(L), Vec(L * L, 0.0), Vec(L * L, 0.0)};
  Vec F(L);
  double acc = 0.0;
  for (std::size_t t = 0; t < L; ++t) F[t] = acc += log_sigmoid(fg[t]);
  const double scale = 1.0 / std::sqrt(static_cast<double>(DH));
  for (std::size_t t = 0; t < L; ++t) {
    double m = -std::numeric_limits<double>::infinity();
    for (std::size_t s = 0; s <= t; ++s) m = std::max(m, F[t] - F[s] + ig[s]);
    if (!stabilized) m = 0.0;
    c.m[t] = m;
    double r = 0.0;
    for (std::size_t s = 0; s <= t; ++s) {
      double qk = 0.0;
      for (std::size_t j = 0; j < DH; ++j) qk += q[t * DH + j] * k[s * DH + j];
      c.Dp[t * L + s] = std::exp(F[t] - F[s] + ig[s] - m);
      c.C[t * L + s] = qk * scale * c.Dp[t * L + s];
      r += c.C[t * L + s];
    }
    c.r[t] = r;
    c.n[t] = std::max(std::fabs(r), std::exp(-m));
    for (std::size_t j = 0; j < DH; ++j) {
      double num = 0.0;
      for (std::size_t s = 0; s <= t; ++s) num += c.C[t * L + s] * v[s * DH + j];
      c.h[t * DH + j] = num / (c.n[t] + eps);
    }
  }
  return c;
}

// dq, dk, dv [L, DH] and dig, dfg [L] (each added into) for dh [L, DH]; m held constant.
void cell_backward(double* dq, double* dk, double* dv, double* dig, double* dfg, const Cell& c,
                   std::size_t L, std::size_t DH, const double* q, const double* k,
                   const double* v, const double* fg, double eps, bool skip_cumsum,
                   const double* dh) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(DH));
  Vec dF(L, 0.0);
  for (std::size_t t = 0; t < L; ++t) {
    const double inv = 1.0 / (c.n[t] + eps);
    double dn = 0.0;
    for (std::size_t j = 0; j < DH; ++j) dn -= inv * dh[t * DH + j] * c.h[t * DH + j];
    const double branch =
        std::fabs(c.r[t]) >= std::exp(-c.m[t]) ? (c.r[t] > 0 ? 1.0 : (c.r[t] < 0 ? -1.0 : 0.0))
                                                : 0.0;
    for (std::size_t s = 0; s <= t; ++s) {
      double dC = dn * branch;
      for (std::size_t j = 0; j < DH; ++j) {
        dC += inv * dh[t * DH + j] * v[s * DH + j];
        dv[s * DH + j] += c.C[t * L + s] * inv * dh[t * DH + j];
      }
      const double dqk = dC * c.Dp[t * L + s] * scale;
      for (std::size_t j = 0; j < DH; ++j) {
        dq[t * DH + j] += dqk * k[s * DH + j];
        dk[s * DH + j] += dqk * q[t * DH + j];
      }
      const double G = dC * c.C[t * L + s];
      dig[s] += G;
      dF[t] += G;
      dF[s] -= G;
    }
  }
  double suffix = 0.0;
  for (std::size_t j = L; j-- > 0;) {
    suffix = skip_cumsum ? dF[j] : suffix + dF[j];
    dfg[j] += suffix * sigmoid(-fg[j]);
  }
}

const double* P(const XlstmParams& p, const std::string& name) { return p.at(name).data(); }
double* G(XlstmParams& g, const std::string& name) { return g.at(name).data(); }

// The mLSTM layer on u [L, D] (already normalized); with dres non-null also its backward: du
// and the block's parameter gradients added into.
Vec mlstm_layer(const XlstmDims& d, const XlstmParams& p, const std::string& pre, const Vec& u,
                const Vec* dres, Vec* du, XlstmParams* g) {
  const std::size_t L = d.window, D = d.d_model, Di = d.inner, NH = d.heads;
  const std::size_t DH = d.mlstm_head_dim(), K = d.conv_kernel, nb = Di / kXlstmQkvBlock;
  const std::size_t B4 = kXlstmQkvBlock;
  const Vec up = linear(u, L, D, P(p, pre + "up.weight"), 2 * Di, nullptr);
  Vec xm(L * Di), z(L * Di);
  for (std::size_t t = 0; t < L; ++t)
    for (std::size_t c = 0; c < Di; ++c) {
      xm[t * Di + c] = up[t * 2 * Di + c];
      z[t * Di + c] = up[t * 2 * Di + Di + c];
    }
  Vec conv_pre, xc;
  conv_forward(conv_pre, xc, xm.data(), Di, L, Di, P(p, pre + "conv.weight"),
               P(p, pre + "conv.bias"), K);
  Vec qkv(L * 3 * Di);
  headwise(qkv.data(), 3 * Di, xc.data(), Di, L, P(p, pre + "q.weight"), nb, B4, B4);
  headwise(qkv.data() + Di, 3 * Di, xc.data(), Di, L, P(p, pre + "k.weight"), nb, B4, B4);
  headwise(qkv.data() + 2 * Di, 3 * Di, xm.data(), Di, L, P(p, pre + "v.weight"), nb, B4, B4);
  const Vec gates =
      linear(qkv, L, 3 * Di, P(p, pre + "gate.weight"), 2 * NH, P(p, pre + "gate.bias"));
  // Per head: contiguous [L, DH] copies of q, k, v and the gates.
  std::vector<Vec> hq(NH, Vec(L * DH)), hk(NH, Vec(L * DH)), hv(NH, Vec(L * DH));
  std::vector<Vec> hi(NH, Vec(L)), hf(NH, Vec(L));
  std::vector<Cell> cells;
  Vec htil(L * Di);
  for (std::size_t h = 0; h < NH; ++h) {
    for (std::size_t t = 0; t < L; ++t) {
      for (std::size_t j = 0; j < DH; ++j) {
        hq[h][t * DH + j] = qkv[t * 3 * Di + h * DH + j];
        hk[h][t * DH + j] = qkv[t * 3 * Di + Di + h * DH + j];
        hv[h][t * DH + j] = qkv[t * 3 * Di + 2 * Di + h * DH + j];
      }
      hi[h][t] = gates[t * 2 * NH + h];
      hf[h][t] = gates[t * 2 * NH + NH + h];
    }
    cells.push_back(cell_forward(L, DH, hq[h].data(), hk[h].data(), hv[h].data(), hi[h].data(),
                                 hf[h].data(), d.cell_eps, true));
    for (std::size_t t = 0; t < L; ++t)
      for (std::size_t j = 0; j < DH; ++j) htil[t * Di + h * DH + j] = cells[h].h[t * DH + j];
  }
  const Norm gn = layer_norm(htil, L * NH, DH, nullptr);
  const double* wo = P(p, pre + "outnorm.weight");
  const double* skip = P(p, pre + "skip");
  Vec out(L * Di);
  for (std::size_t t = 0; t < L; ++t)
    for (std::size_t c = 0; c < Di; ++c) {
      const std::size_t i = t * Di + c;
      out[i] = (wo[c] * gn.y[i] + skip[c] * xc[i]) * silu(z[i]);
    }
  Vec res = linear(out, L, Di, P(p, pre + "down.weight"), D, nullptr);
  if (dres == nullptr) return res;

  Vec dout(L * Di, 0.0);
  linear_back(&dout, G(*g, pre + "down.weight"), nullptr, out, L, Di, P(p, pre + "down.weight"),
              D, *dres);
  Vec dxc(L * Di, 0.0), dgn(L * Di), dup(L * 2 * Di, 0.0);
  for (std::size_t t = 0; t < L; ++t)
    for (std::size_t c = 0; c < Di; ++c) {
      const std::size_t i = t * Di + c;
      const double sz = silu(z[i]), a = wo[c] * gn.y[i] + skip[c] * xc[i];
      dgn[i] = dout[i] * sz * wo[c];
      G(*g, pre + "outnorm.weight")[c] += dout[i] * sz * gn.y[i];
      G(*g, pre + "skip")[c] += dout[i] * sz * xc[i];
      dxc[i] += dout[i] * sz * skip[c];
      dup[t * 2 * Di + Di + c] = dout[i] * a * silu_grad(z[i]);
    }
  Vec dhtil(L * Di, 0.0);
  layer_norm_back(dhtil, nullptr, gn, L * NH, DH, nullptr, dgn);
  Vec dqkv(L * 3 * Di, 0.0), dgates(L * 2 * NH, 0.0);
  for (std::size_t h = 0; h < NH; ++h) {
    Vec dh(L * DH), dq(L * DH, 0.0), dk(L * DH, 0.0), dv(L * DH, 0.0), di(L, 0.0), df(L, 0.0);
    for (std::size_t t = 0; t < L; ++t)
      for (std::size_t j = 0; j < DH; ++j) dh[t * DH + j] = dhtil[t * Di + h * DH + j];
    cell_backward(dq.data(), dk.data(), dv.data(), di.data(), df.data(), cells[h], L, DH,
                  hq[h].data(), hk[h].data(), hv[h].data(), hf[h].data(), d.cell_eps,
                  d.control_skip_forget_cumsum, dh.data());
    for (std::size_t t = 0; t < L; ++t) {
      for (std::size_t j = 0; j < DH; ++j) {
        dqkv[t * 3 * Di + h * DH + j] = dq[t * DH + j];
        dqkv[t * 3 * Di + Di + h * DH + j] = dk[t * DH + j];
        dqkv[t * 3 * Di + 2 * Di + h * DH + j] = dv[t * DH + j];
      }
      dgates[t * 2 * NH + h] = di[t];
      dgates[t * 2 * NH + NH + h] = df[t];
    }
  }
  linear_back(&dqkv, G(*g, pre + "gate.weight"), G(*g, pre + "gate.bias"), qkv, L, 3 * Di,
              P(p, pre + "gate.weight"), 2 * NH, dgates);
  headwise_back(dxc.data(), Di, G(*g, pre + "q.weight"), xc.data(), Di, dqkv.data(), 3 * Di, L,
                P(p, pre + "q.weight"), nb, B4, B4);
  headwise_back(dxc.data(), Di, G(*g, pre + "k.weight"), xc.data(), Di, dqkv.data() + Di,
                3 * Di, L, P(p, pre + "k.weight"), nb, B4, B4);
  // dx_m (the first Di columns of dup): the v path, then the conv's input gradient.
  headwise_back(dup.data(), 2 * Di, G(*g, pre + "v.weight"), xm.data(), Di, dqkv.data() + 2 * Di,
                3 * Di, L, P(p, pre + "v.weight"), nb, B4, B4);
  conv_back(dup.data(), 2 * Di, G(*g, pre + "conv.weight"), G(*g, pre + "conv.bias"), conv_pre,
            dxc, xm.data(), Di, L, Di, P(p, pre + "conv.weight"), K);
  linear_back(du, G(*g, pre + "up.weight"), nullptr, u, L, D, P(p, pre + "up.weight"), 2 * Di,
              dup);
  return res;
}

// The sLSTM layer (conv, gate projections, recurrence, GN and its weight) on u [L, D]; with dres
// non-null also its backward (du and the parameter gradients added into).
Vec slstm_layer(const XlstmDims& d, const XlstmParams& p, const std::string& pre, const Vec& u,
                const Vec* dres, Vec* du, XlstmParams* g) {
  const std::size_t L = d.window, D = d.d_model, NH = d.heads, DHs = d.slstm_head_dim();
  const std::size_t K = d.conv_kernel, W1 = NH * DHs * DHs;
  Vec conv_pre, xc;
  conv_forward(conv_pre, xc, u.data(), D, L, D, P(p, pre + "conv.weight"), P(p, pre + "conv.bias"),
               K);
  const double* W = P(p, pre + "w.weight");
  const double* R = P(p, pre + "r.weight");
  const double* bias = P(p, pre + "bias");
  Vec wx(L * 4 * D);
  for (std::size_t gate = 0; gate < 4; ++gate)
    headwise(wx.data() + gate * D, 4 * D, gate < 2 ? xc.data() : u.data(), D, L, W + gate * W1,
             NH, DHs, DHs);
  // Recurrence; raw [L, 4D], states c, n, m, h [L, D].
  Vec raw(L * 4 * D), c(L * D), n(L * D), m(L * D), h(L * D);
  for (std::size_t t = 0; t < L; ++t)
    for (std::size_t hd = 0; hd < NH; ++hd)
      for (std::size_t j = 0; j < DHs; ++j) {
        const std::size_t unit = hd * DHs + j;
        for (std::size_t gate = 0; gate < 4; ++gate) {
          double s = wx[t * 4 * D + gate * D + unit] + bias[gate * D + unit];
          if (t > 0)
            for (std::size_t kk = 0; kk < DHs; ++kk)
              s += R[gate * W1 + (hd * DHs + j) * DHs + kk] * h[(t - 1) * D + hd * DHs + kk];
          raw[t * 4 * D + gate * D + unit] = s;
        }
        const double ig = raw[t * 4 * D + unit], lf = log_sigmoid(raw[t * 4 * D + D + unit]);
        const double zt = std::tanh(raw[t * 4 * D + 2 * D + unit]);
        const double og = sigmoid(raw[t * 4 * D + 3 * D + unit]);
        const std::size_t i = t * D + unit;
        if (t == 0) {
          m[i] = ig;
          c[i] = zt;
          n[i] = 1.0;
        } else {
          const std::size_t prev = i - D;
          m[i] = std::max(ig, lf + m[prev]);
          const double ip = std::exp(ig - m[i]), fp = std::exp(lf + m[prev] - m[i]);
          c[i] = fp * c[prev] + ip * zt;
          n[i] = fp * n[prev] + ip;
        }
        h[i] = og * c[i] / n[i];
      }
  const Norm gn = layer_norm(h, L * NH, DHs, nullptr);
  const double* wo = P(p, pre + "outnorm.weight");
  Vec res(L * D);
  for (std::size_t i = 0; i < L * D; ++i) res[i] = wo[i % D] * gn.y[i];
  if (dres == nullptr) return res;

  Vec dgn(L * D), dh(L * D, 0.0);
  for (std::size_t i = 0; i < L * D; ++i) {
    dgn[i] = (*dres)[i] * wo[i % D];
    G(*g, pre + "outnorm.weight")[i % D] += (*dres)[i] * gn.y[i];
  }
  layer_norm_back(dh, nullptr, gn, L * NH, DHs, nullptr, dgn);
  Vec draw(L * 4 * D, 0.0), dc(D, 0.0), dn(D, 0.0), dh_rec(D, 0.0);
  double* dR = G(*g, pre + "r.weight");
  double* db = G(*g, pre + "bias");
  for (std::size_t t = L; t-- > 0;) {
    for (std::size_t unit = 0; unit < D; ++unit) {
      const std::size_t i = t * D + unit;
      const double ig = raw[t * 4 * D + unit], fr = raw[t * 4 * D + D + unit];
      const double zt = std::tanh(raw[t * 4 * D + 2 * D + unit]);
      const double og = sigmoid(raw[t * 4 * D + 3 * D + unit]);
      const double dht = dh[i] + dh_rec[unit];
      const double dct = dc[unit] + dht * og / n[i];
      const double dnt = dn[unit] - dht * h[i] / n[i];
      const double ip = std::exp(ig - m[i]);
      draw[t * 4 * D + 3 * D + unit] = dht * c[i] / n[i] * og * (1.0 - og);
      draw[t * 4 * D + 2 * D + unit] = dct * ip * (1.0 - zt * zt);
      draw[t * 4 * D + unit] = ip * (zt * dct + dnt);
      if (t > 0) {
        const double fp = std::exp(log_sigmoid(fr) + m[i - D] - m[i]);
        draw[t * 4 * D + D + unit] = fp * (dct * c[i - D] + dnt * n[i - D]) * (1.0 - sigmoid(fr));
        dc[unit] = fp * dct;
        dn[unit] = fp * dnt;
      }
    }
    std::fill(dh_rec.begin(), dh_rec.end(), 0.0);
    for (std::size_t gate = 0; gate < 4; ++gate)
      for (std::size_t hd = 0; hd < NH; ++hd)
        for (std::size_t j = 0; j < DHs; ++j) {
          const double gr = draw[t * 4 * D + gate * D + hd * DHs + j];
          db[gate * D + hd * DHs + j] += gr;
          if (t == 0) continue;
          for (std::size_t kk = 0; kk < DHs; ++kk) {
            const std::size_t w = gate * W1 + (hd * DHs + j) * DHs + kk;
            dh_rec[hd * DHs + kk] += R[w] * gr;
            dR[w] += gr * h[(t - 1) * D + hd * DHs + kk];
          }
        }
  }
  Vec dxc(L * D, 0.0);
  double* dW = G(*g, pre + "w.weight");
  for (std::size_t gate = 0; gate < 4; ++gate)
    headwise_back(gate < 2 ? dxc.data() : du->data(), D, dW + gate * W1,
                  gate < 2 ? xc.data() : u.data(), D, draw.data() + gate * D, 4 * D, L,
                  W + gate * W1, NH, DHs, DHs);
  conv_back(du->data(), D, G(*g, pre + "conv.weight"), G(*g, pre + "conv.bias"), conv_pre, dxc,
            u.data(), D, L, D, P(p, pre + "conv.weight"), K);
  return res;
}

// The gated-GeLU FFN on u [L, D]; with dres non-null also its backward.
Vec ffn_layer(const XlstmDims& d, const XlstmParams& p, const std::string& pre, const Vec& u,
              const Vec* dres, Vec* du, XlstmParams* g) {
  const std::size_t L = d.window, D = d.d_model, Fh = d.ffn;
  const Vec up = linear(u, L, D, P(p, pre + "ffn_up.weight"), 2 * Fh, nullptr);
  Vec a(L * Fh);
  for (std::size_t t = 0; t < L; ++t)
    for (std::size_t j = 0; j < Fh; ++j)
      a[t * Fh + j] = gelu(up[t * 2 * Fh + j]) * up[t * 2 * Fh + Fh + j];
  Vec res = linear(a, L, Fh, P(p, pre + "ffn_down.weight"), D, nullptr);
  if (dres == nullptr) return res;
  Vec da(L * Fh, 0.0), dup(L * 2 * Fh);
  linear_back(&da, G(*g, pre + "ffn_down.weight"), nullptr, a, L, Fh,
              P(p, pre + "ffn_down.weight"), D, *dres);
  for (std::size_t t = 0; t < L; ++t)
    for (std::size_t j = 0; j < Fh; ++j) {
      const double gt = up[t * 2 * Fh + j], ut = up[t * 2 * Fh + Fh + j];
      dup[t * 2 * Fh + j] = da[t * Fh + j] * ut * gelu_grad(gt);
      dup[t * 2 * Fh + Fh + j] = da[t * Fh + j] * gelu(gt);
    }
  linear_back(du, G(*g, pre + "ffn_up.weight"), nullptr, u, L, D, P(p, pre + "ffn_up.weight"),
              2 * Fh, dup);
  return res;
}

enum class Sub { Mlstm, Slstm, Ffn };
struct Residual {
  Sub kind;
  std::string prefix;
};

// The model's residual sub-blocks in order: h = h + layer(LN(h) * norm weight).
std::vector<Residual> residuals(const XlstmDims& d) {
  std::vector<Residual> list;
  for (std::size_t b = 0; b < d.blocks; ++b) {
    const std::string pre = "block" + std::to_string(b) + ".";
    if (static_cast<long>(b) == d.slstm_at) {
      list.push_back({Sub::Slstm, pre});
      list.push_back({Sub::Ffn, pre});
    } else {
      list.push_back({Sub::Mlstm, pre});
    }
  }
  return list;
}

// h + layer(LN(h)) for one sample; with dout non-null, returns dh_in (= dout + the path through
// the layer) instead and adds the parameter gradients into g.
Vec residual_step(const XlstmDims& d, const XlstmParams& p, const Residual& r, const Vec& h,
                  const Vec* dout, XlstmParams* g) {
  const std::size_t L = d.window, D = d.d_model;
  const std::string norm = r.prefix + (r.kind == Sub::Ffn ? "ffn_norm.weight" : "norm.weight");
  const Norm ln = layer_norm(h, L, D, P(p, norm));
  Vec du(L * D, 0.0);
  Vec* du_ptr = dout != nullptr ? &du : nullptr;
  Vec y;
  switch (r.kind) {
    case Sub::Mlstm: y = mlstm_layer(d, p, r.prefix, ln.y, dout, du_ptr, g); break;
    case Sub::Slstm: y = slstm_layer(d, p, r.prefix, ln.y, dout, du_ptr, g); break;
    case Sub::Ffn: y = ffn_layer(d, p, r.prefix, ln.y, dout, du_ptr, g); break;
  }
  if (dout == nullptr) {
    for (std::size_t i = 0; i < L * D; ++i) y[i] += h[i];
    return y;
  }
  Vec dh = *dout;
  layer_norm_back(dh, G(*g, norm), ln, L, D, P(p, norm), du);
  return dh;
}

}  // namespace

void validate_xlstm_dims(const XlstmDims& d) {
  auto positive = [](const char* field, std::size_t v) {
    if (v == 0) invalid(std::string(field) + " = 0, allowed >= 1");
  };
  positive("window", d.window);
  positive("features", d.features);
  positive("outputs", d.outputs);
  positive("d_model", d.d_model);
  positive("heads", d.heads);
  positive("inner", d.inner);
  positive("ffn", d.ffn);
  positive("blocks", d.blocks);
  positive("conv_kernel", d.conv_kernel);
  if (d.d_model % d.heads != 0)
    invalid("d_model = " + std::to_string(d.d_model) + ", allowed a multiple of heads = " +
            std::to_string(d.heads));
  if (d.inner % d.heads != 0 || d.inner % kXlstmQkvBlock != 0)
    invalid("inner = " + std::to_string(d.inner) + ", allowed a multiple of 4 and of heads = " +
            std::to_string(d.heads));
  if (d.slstm_at < -1 || d.slstm_at >= static_cast<long>(d.blocks))
    invalid("slstm_at = " + std::to_string(d.slstm_at) + ", allowed [-1, " +
            std::to_string(d.blocks - 1) + "]");
  if (!(d.cell_eps >= 0.0))
    invalid("cell_eps = " + std::to_string(d.cell_eps) + ", allowed >= 0");
}

std::vector<XlstmTensorShape> xlstm_tensor_shapes(const XlstmDims& d) {
  validate_xlstm_dims(d);
  const std::size_t D = d.d_model, Di = d.inner, NH = d.heads, DHs = d.slstm_head_dim();
  const std::size_t K = d.conv_kernel, B4 = kXlstmQkvBlock;
  std::vector<XlstmTensorShape> s = {{"embed.weight", {D, d.features}}, {"embed.bias", {D}}};
  for (std::size_t b = 0; b < d.blocks; ++b) {
    const std::string pre = "block" + std::to_string(b) + ".";
    if (static_cast<long>(b) == d.slstm_at) {
      for (const XlstmTensorShape& t : std::vector<XlstmTensorShape>{
               {"norm.weight", {D}},
               {"conv.weight", {D, K}},
               {"conv.bias", {D}},
               {"w.weight", {4, NH, DHs, DHs}},
               {"r.weight", {4, NH, DHs, DHs}},
               {"bias", {4, D}},
               {"outnorm.weight", {D}},
               {"ffn_norm.weight", {D}},
               {"ffn_up.weight", {2 * d.ffn, D}},
               {"ffn_down.weight", {D, d.ffn}}})
        s.push_back({pre + t.name, t.shape});
    } else {
      for (const XlstmTensorShape& t : std::vector<XlstmTensorShape>{
               {"norm.weight", {D}},
               {"up.weight", {2 * Di, D}},
               {"conv.weight", {Di, K}},
               {"conv.bias", {Di}},
               {"q.weight", {Di / B4, B4, B4}},
               {"k.weight", {Di / B4, B4, B4}},
               {"v.weight", {Di / B4, B4, B4}},
               {"gate.weight", {2 * NH, 3 * Di}},
               {"gate.bias", {2 * NH}},
               {"outnorm.weight", {Di}},
               {"skip", {Di}},
               {"down.weight", {D, Di}}})
        s.push_back({pre + t.name, t.shape});
    }
  }
  s.push_back({"post_norm.weight", {D}});
  s.push_back({"readout.weight", {d.outputs, D}});
  s.push_back({"readout.bias", {d.outputs}});
  return s;
}

std::vector<double>& XlstmParams::at(const std::string& name) {
  for (auto& t : tensors)
    if (t.first == name) return t.second;
  throw Error("XlstmParams::at", "unknown tensor", "'" + name + "'", __FILE__, __LINE__);
}

const std::vector<double>& XlstmParams::at(const std::string& name) const {
  return const_cast<XlstmParams*>(this)->at(name);
}

XlstmParams xlstm_zero_params(const XlstmDims& d) {
  XlstmParams p;
  for (const XlstmTensorShape& t : xlstm_tensor_shapes(d)) {
    std::size_t n = 1;
    for (const std::size_t e : t.shape) n *= e;
    p.tensors.emplace_back(t.name, Vec(n, 0.0));
  }
  return p;
}

namespace {

// One sample's forward (pred) or, with dpred non-null, its backward (dx returned, gradients
// added into g).
Vec run_sample(const XlstmDims& d, const XlstmParams& p, const double* x, const double* dpred,
               XlstmParams* g, Vec* pred) {
  const std::size_t L = d.window, D = d.d_model, F = d.features;
  const Vec xs(x, x + L * F);
  std::vector<Vec> inputs;
  Vec h = linear(xs, L, F, P(p, "embed.weight"), D, P(p, "embed.bias"));
  const std::vector<Residual> list = residuals(d);
  for (const Residual& r : list) {
    inputs.push_back(h);
    h = residual_step(d, p, r, h, nullptr, nullptr);
  }
  const Vec last(h.begin() + static_cast<long>((L - 1) * D), h.end());
  const Norm post = layer_norm(last, 1, D, P(p, "post_norm.weight"));
  *pred = linear(post.y, 1, D, P(p, "readout.weight"), d.outputs, P(p, "readout.bias"));
  if (dpred == nullptr) return {};
  const Vec dp(dpred, dpred + d.outputs);
  Vec dpost(D, 0.0), dlast(D, 0.0);
  linear_back(&dpost, G(*g, "readout.weight"), G(*g, "readout.bias"), post.y, 1, D,
              P(p, "readout.weight"), d.outputs, dp);
  layer_norm_back(dlast, G(*g, "post_norm.weight"), post, 1, D, P(p, "post_norm.weight"), dpost);
  Vec dh(L * D, 0.0);
  std::copy(dlast.begin(), dlast.end(), dh.begin() + static_cast<long>((L - 1) * D));
  for (std::size_t i = list.size(); i-- > 0;)
    dh = residual_step(d, p, list[i], inputs[i], &dh, g);
  Vec dx(L * F, 0.0);
  linear_back(&dx, G(*g, "embed.weight"), G(*g, "embed.bias"), xs, L, F, P(p, "embed.weight"), D,
              dh);
  return dx;
}

std::vector<double> cell_of(std::size_t L, std::size_t DH, std::span<const double> q,
                            std::span<const double> k, std::span<const double> v,
                            std::span<const double> ig, std::span<const double> fg, double eps,
                            bool stabilized) {
  return cell_forward(L, DH, q.data(), k.data(), v.data(), ig.data(), fg.data(), eps, stabilized)
      .h;
}

}  // namespace

std::vector<double> xlstm_forward(const XlstmDims& d, const XlstmParams& p,
                                  std::span<const double> x, std::size_t batch) {
  validate_xlstm_dims(d);
  std::vector<double> out;
  for (std::size_t b = 0; b < batch; ++b) {
    Vec pred;
    run_sample(d, p, x.data() + b * d.window * d.features, nullptr, nullptr, &pred);
    out.insert(out.end(), pred.begin(), pred.end());
  }
  return out;
}

XlstmGradients xlstm_backward(const XlstmDims& d, const XlstmParams& p,
                              std::span<const double> x, std::size_t batch,
                              std::span<const double> dpred) {
  validate_xlstm_dims(d);
  XlstmGradients g{xlstm_zero_params(d), {}};
  for (std::size_t b = 0; b < batch; ++b) {
    Vec pred;
    const Vec dx = run_sample(d, p, x.data() + b * d.window * d.features,
                              dpred.data() + b * d.outputs, &g.params, &pred);
    g.dx.insert(g.dx.end(), dx.begin(), dx.end());
  }
  return g;
}

std::vector<double> mlstm_cell_parallel(std::size_t L, std::size_t DH, std::span<const double> q,
                                        std::span<const double> k, std::span<const double> v,
                                        std::span<const double> igate,
                                        std::span<const double> fgate, double eps) {
  return cell_of(L, DH, q, k, v, igate, fgate, eps, true);
}

std::vector<double> mlstm_cell_naive(std::size_t L, std::size_t DH, std::span<const double> q,
                                     std::span<const double> k, std::span<const double> v,
                                     std::span<const double> igate, std::span<const double> fgate,
                                     double eps) {
  return cell_of(L, DH, q, k, v, igate, fgate, eps, false);
}

std::vector<double> mlstm_cell_recurrent(std::size_t L, std::size_t DH, std::span<const double> q,
                                         std::span<const double> k, std::span<const double> v,
                                         std::span<const double> igate,
                                         std::span<const double> fgate, double eps) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(DH));
  Vec C(DH * DH, 0.0), n(DH, 0.0), h(L * DH, 0.0);
  double m = -std::numeric_limits<double>::infinity();
  for (std::size_t t = 0; t < L; ++t) {
    const double lf = log_sigmoid(fgate[t]);
    const double m_new = std::max(lf + m, igate[t]);
    const double fp = std::exp(lf + m - m_new), ip = std::exp(igate[t] - m_new);
    m = m_new;
    for (std::size_t a = 0; a < DH; ++a) {
      n[a] = fp * n[a] + ip * k[t * DH + a] * scale;
      for (std::size_t b = 0; b < DH; ++b)
        C[a * DH + b] = fp * C[a * DH + b] + ip * k[t * DH + a] * scale * v[t * DH + b];
    }
    double nq = 0.0;
    for (std::size_t a = 0; a < DH; ++a) nq += n[a] * q[t * DH + a];
    const double denom = std::max(std::fabs(nq), std::exp(-m)) + eps;
    for (std::size_t b = 0; b < DH; ++b) {
      double s = 0.0;
      for (std::size_t a = 0; a < DH; ++a) s += C[a * DH + b] * q[t * DH + a];
      h[t * DH + b] = s / denom;
    }
  }
  return h;
}

}  // namespace resident::reference
