#include "tests/reference/tlob_reference.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "kernels/core/error.h"

namespace resident::reference {

namespace {

constexpr double kGeluC = 0.7978845608028654;  // sqrt(2 / pi)
constexpr double kGeluA = 0.044715;

double gelu(double u) { return 0.5 * u * (1.0 + std::tanh(kGeluC * (u + kGeluA * u * u * u))); }
double gelu_grad(double u) {
  const double t = std::tanh(kGeluC * (u + kGeluA * u * u * u));
  return 0.5 * (1.0 + t) + 0.5 * u * (1.0 - t * t) * kGeluC * (1.0 + 3.0 * kGeluA * u * u);
}

[[noreturn]] void fail(const std::string& detail) {
  throw Error("tlob_reference", "invalid argument", detail, __FILE__, __LINE__);
}

const std::vector<double>& tensor(const std::vector<TlobTensor>& p, const std::string& name) {
  for (const TlobTensor& t : p)
    if (t.name == name) return t.values;
  fail("no tensor " + name);
}
std::vector<double>& tensor(std::vector<TlobTensor>& p, const std::string& name) {
  for (TlobTensor& t : p)
    if (t.name == name) return t.values;
  fail("no tensor " + name);
}

std::string layer_name(std::size_t k, const char* what) {
  return "layer" + std::to_string(k) + "." + what;
}

// y [rows, out] = x [rows, in] W^T + b.
std::vector<double> linear(const std::vector<double>& x, std::size_t rows, std::size_t in,
                           std::size_t out, const std::vector<double>& w,
                           const std::vector<double>& b) {
  std::vector<double> y(rows * out);
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t o = 0; o < out; ++o) {
      double s = b[o];
      for (std::size_t i = 0; i < in; ++i) s += x[r * in + i] * w[o * in + i];
      y[r * out + o] = s;
    }
  return y;
}

// dx = dy W (returned), dW += dy^T x, db += sum dy.
std::vector<double> linear_back(const std::vector<double>& x, const std::vector<double>& dy,
                                std::size_t rows, std::size_t in, std::size_t out,
                                const std::vector<double>& w, std::vector<double>& dw,
                                std::vector<double>& db) {
  std::vector<double> dx(rows * in, 0.0);
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t o = 0; o < out; ++o) {
      const double g = dy[r * out + o];
      db[o] += g;
      for (std::size_t i = 0; i < in; ++i) {
        dw[o * in + i] += g * x[r * in + i];
        dx[r * in + i] += g * w[o * in + i];
      }
    }
  return dx;
}

std::vector<double> transpose(const std::vector<double>& a, std::size_t rows, std::size_t cols) {
  std::vector<double> t(a.size());
  for (std::size_t r = 0; r < rows; ++r)
    for (std::size_t c = 0; c < cols; ++c) t[c * rows + r] = a[r * cols + c];
  return t;
}

// Unbiased std of n values at stride, floored as BiN does; also the mean.
void bin_stats(const double* v, std::size_t n, std::size_t stride, double* mean, double* std) {
  double m = 0.0;
  for (std::size_t i = 0; i < n; ++i) m += v[i * stride];
  m /= static_cast<double>(n);
  double ss = 0.0;
  for (std::size_t i = 0; i < n; ++i) ss += (v[i * stride] - m) * (v[i * stride] - m);
  double s = std::sqrt(ss / static_cast<double>(n - 1));
  if (s < kTlobStdFloor) s = 1.0;
  *mean = m;
  *std = s;
}

struct LayerCache {
  std::vector<double> x, qkv, p, a, r, mean, rstd, y, u, g;  // r: the pre-norm sum
};

struct SampleCache {
  std::vector<double> z1, z2;  // BiN z-scores [L, F]
  std::vector<double> xb;      // BiN output [L, F]
  std::vector<LayerCache> layers;
  std::vector<std::vector<double>> head_in;   // the input of each head Linear
  std::vector<std::vector<double>> head_pre;  // pre-gelu of each hidden head Linear
};

std::size_t bin_index_check(const TlobDims& d, std::span<const double> x, std::size_t batch) {
  validate_tlob_dims(d);
  const std::size_t n = d.window * d.features;
  if (batch == 0 || x.size() != batch * n)
    fail("x has " + std::to_string(x.size()) + " values, expected batch * L * F = " +
         std::to_string(batch * n) + " with batch >= 1");
  return n;
}

// The forward of one sample; returns the logits.
std::vector<double> sample_forward(const TlobDims& d, const std::vector<TlobTensor>& p,
                                   const double* x, SampleCache& c) {
  const std::size_t L = d.window, F = d.features, H = d.hidden, nh = d.heads;
  // BiN
  const std::vector<double>& l1 = tensor(p, "bin.l1");
  const std::vector<double>& b1 = tensor(p, "bin.b1");
  const std::vector<double>& l2 = tensor(p, "bin.l2");
  const std::vector<double>& b2 = tensor(p, "bin.b2");
  const double y1 = tensor(p, "bin.y1")[0], y2 = tensor(p, "bin.y2")[0];
  c.z1.assign(L * F, 0.0);
  c.z2.assign(L * F, 0.0);
  c.xb.assign(L * F, 0.0);
  for (std::size_t f = 0; f < F; ++f) {
    double m, s;
    bin_stats(x + f, L, F, &m, &s);
    for (std::size_t t = 0; t < L; ++t) c.z2[t * F + f] = (x[t * F + f] - m) / s;
  }
  for (std::size_t t = 0; t < L; ++t) {
    double m, s;
    bin_stats(x + t * F, F, 1, &m, &s);
    for (std::size_t f = 0; f < F; ++f) c.z1[t * F + f] = (x[t * F + f] - m) / s;
  }
  for (std::size_t t = 0; t < L; ++t)
    for (std::size_t f = 0; f < F; ++f) {
      const std::size_t i = t * F + f;
      c.xb[i] = y1 * (l1[t] * c.z1[i] + b1[t]) + y2 * (l2[f] * c.z2[i] + b2[f]);
    }
  // Embedding
  std::vector<double> h =
      linear(c.xb, L, F, H, tensor(p, "embed.weight"), tensor(p, "embed.bias"));
  const std::vector<double> pos = tlob_positional_embedding(L, H);
  for (std::size_t i = 0; i < L * H; ++i) h[i] += pos[i];
  // Layers
  c.layers.assign(d.layers(), {});
  for (std::size_t k = 0; k < d.layers(); ++k) {
    LayerCache& lc = c.layers[k];
    const std::size_t T = d.tokens(k), D = d.width(k), O = d.out_width(k), W = D * nh;
    lc.x = h;
    lc.qkv = linear(h, T, D, 3 * W, tensor(p, layer_name(k, "qkv.weight")),
                    tensor(p, layer_name(k, "qkv.bias")));
    lc.p.assign(nh * T * T, 0.0);
    lc.a.assign(T * W, 0.0);
    const double scale = 1.0 / std::sqrt(static_cast<double>(D));
    for (std::size_t hd = 0; hd < nh; ++hd) {
      double* P = lc.p.data() + hd * T * T;
      for (std::size_t t = 0; t < T; ++t) {
        double mx = -1e300;
        for (std::size_t s = 0; s < T; ++s) {
          double v = 0.0;
          for (std::size_t i = 0; i < D; ++i)
            v += lc.qkv[t * 3 * W + hd * D + i] * lc.qkv[s * 3 * W + W + hd * D + i];
          P[t * T + s] = v * scale;
          mx = std::max(mx, P[t * T + s]);
        }
        double sum = 0.0;
        for (std::size_t s = 0; s < T; ++s) sum += (P[t * T + s] = std::exp(P[t * T + s] - mx));
        for (std::size_t s = 0; s < T; ++s) P[t * T + s] /= sum;
        for (std::size_t i = 0; i < D; ++i) {
          double v = 0.0;
          for (std::size_t s = 0; s < T; ++s)
            v += P[t * T + s] * lc.qkv[s * 3 * W + 2 * W + hd * D + i];
          lc.a[t * W + hd * D + i] = v;
        }
      }
    }
    std::vector<double> r = linear(lc.a, T, W, D, tensor(p, layer_name(k, "out.weight")),
                                   tensor(p, layer_name(k, "out.bias")));
    for (std::size_t i = 0; i < T * D; ++i) r[i] += h[i];
    lc.r = r;
    const std::vector<double>& gamma = tensor(p, layer_name(k, "norm.gamma"));
    const std::vector<double>& beta = tensor(p, layer_name(k, "norm.beta"));
    lc.mean.assign(T, 0.0);
    lc.rstd.assign(T, 0.0);
    lc.y.assign(T * D, 0.0);
    for (std::size_t t = 0; t < T; ++t) {
      double m = 0.0, v = 0.0;
      for (std::size_t i = 0; i < D; ++i) m += r[t * D + i];
      m /= static_cast<double>(D);
      for (std::size_t i = 0; i < D; ++i) v += (r[t * D + i] - m) * (r[t * D + i] - m);
      const double rs = 1.0 / std::sqrt(v / static_cast<double>(D) + kTlobNormEps);
      lc.mean[t] = m;
      lc.rstd[t] = rs;
      for (std::size_t i = 0; i < D; ++i)
        lc.y[t * D + i] = (r[t * D + i] - m) * rs * gamma[i] + beta[i];
    }
    lc.u = linear(lc.y, T, D, 4 * D, tensor(p, layer_name(k, "fc1.weight")),
                  tensor(p, layer_name(k, "fc1.bias")));
    lc.g.resize(lc.u.size());
    for (std::size_t i = 0; i < lc.u.size(); ++i) lc.g[i] = gelu(lc.u[i]);
    std::vector<double> out = linear(lc.g, T, 4 * D, O, tensor(p, layer_name(k, "fc2.weight")),
                                     tensor(p, layer_name(k, "fc2.bias")));
    if (O == D)
      for (std::size_t i = 0; i < T * D; ++i) out[i] += h[i];
    h = k + 1 < d.layers() ? transpose(out, T, O) : out;
  }
  // Head
  const std::vector<std::size_t> w = d.head_widths();
  c.head_in.assign(w.size() - 1, {});
  c.head_pre.assign(w.size() - 1, {});
  for (std::size_t j = 0; j + 1 < w.size(); ++j) {
    c.head_in[j] = h;
    h = linear(h, 1, w[j], w[j + 1], tensor(p, "head" + std::to_string(j) + ".weight"),
               tensor(p, "head" + std::to_string(j) + ".bias"));
    if (j + 2 < w.size()) {
      c.head_pre[j] = h;
      for (double& v : h) v = gelu(v);
    }
  }
  return h;
}

void sample_backward(const TlobDims& d, const std::vector<TlobTensor>& p, const SampleCache& c,
                     const double* dlogits, std::vector<TlobTensor>& g) {
  const std::size_t L = d.window, F = d.features, H = d.hidden, nh = d.heads;
  const std::vector<std::size_t> w = d.head_widths();
  std::vector<double> dh(dlogits, dlogits + d.classes);
  for (std::size_t j = w.size() - 1; j-- > 0;) {
    if (j + 2 < w.size())
      for (std::size_t i = 0; i < dh.size(); ++i) dh[i] *= gelu_grad(c.head_pre[j][i]);
    const std::string n = "head" + std::to_string(j);
    dh = linear_back(c.head_in[j], dh, 1, w[j], w[j + 1], tensor(p, n + ".weight"),
                     tensor(g, n + ".weight"), tensor(g, n + ".bias"));
  }
  for (std::size_t k = d.layers(); k-- > 0;) {
    const LayerCache& lc = c.layers[k];
    const std::size_t T = d.tokens(k), D = d.width(k), O = d.out_width(k), W = D * nh;
    // dh is the gradient of this layer's input to the next layer (transposed) or of the flatten.
    const std::vector<double> dout = k + 1 < d.layers() ? transpose(dh, O, T) : dh;
    std::vector<double> dx(T * D, 0.0);
    if (O == D) dx = dout;
    std::vector<double> dg =
        linear_back(lc.g, dout, T, 4 * D, O, tensor(p, layer_name(k, "fc2.weight")),
                    tensor(g, layer_name(k, "fc2.weight")), tensor(g, layer_name(k, "fc2.bias")));
    for (std::size_t i = 0; i < dg.size(); ++i) dg[i] *= gelu_grad(lc.u[i]);
    const std::vector<double> dy =
        linear_back(lc.y, dg, T, D, 4 * D, tensor(p, layer_name(k, "fc1.weight")),
                    tensor(g, layer_name(k, "fc1.weight")), tensor(g, layer_name(k, "fc1.bias")));
    const std::vector<double>& gamma = tensor(p, layer_name(k, "norm.gamma"));
    std::vector<double>& dgamma = tensor(g, layer_name(k, "norm.gamma"));
    std::vector<double>& dbeta = tensor(g, layer_name(k, "norm.beta"));
    std::vector<double> dr(T * D);
    for (std::size_t t = 0; t < T; ++t) {
      double mg = 0.0, mgx = 0.0;
      std::vector<double> xhat(D), gi(D);
      for (std::size_t i = 0; i < D; ++i) {
        xhat[i] = (lc.r[t * D + i] - lc.mean[t]) * lc.rstd[t];
        gi[i] = dy[t * D + i] * gamma[i];
        mg += gi[i];
        mgx += gi[i] * xhat[i];
        dgamma[i] += dy[t * D + i] * xhat[i];
        dbeta[i] += dy[t * D + i];
      }
      mg /= static_cast<double>(D);
      mgx /= static_cast<double>(D);
      for (std::size_t i = 0; i < D; ++i)
        dr[t * D + i] = lc.rstd[t] * (gi[i] - mg - xhat[i] * mgx);
    }
    for (std::size_t i = 0; i < T * D; ++i) dx[i] += dr[i];
    const std::vector<double> da =
        linear_back(lc.a, dr, T, W, D, tensor(p, layer_name(k, "out.weight")),
                    tensor(g, layer_name(k, "out.weight")), tensor(g, layer_name(k, "out.bias")));
    std::vector<double> dqkv(T * 3 * W, 0.0);
    const double scale = 1.0 / std::sqrt(static_cast<double>(D));
    for (std::size_t hd = 0; hd < nh; ++hd) {
      const double* P = lc.p.data() + hd * T * T;
      for (std::size_t t = 0; t < T; ++t) {
        std::vector<double> dp(T, 0.0);
        double dot = 0.0;
        for (std::size_t s = 0; s < T; ++s) {
          for (std::size_t i = 0; i < D; ++i) {
            dp[s] += da[t * W + hd * D + i] * lc.qkv[s * 3 * W + 2 * W + hd * D + i];
            dqkv[s * 3 * W + 2 * W + hd * D + i] += P[t * T + s] * da[t * W + hd * D + i];
          }
          dot += dp[s] * P[t * T + s];
        }
        for (std::size_t s = 0; s < T; ++s) {
          const double ds = P[t * T + s] * (dp[s] - dot) * scale;
          for (std::size_t i = 0; i < D; ++i) {
            dqkv[t * 3 * W + hd * D + i] += ds * lc.qkv[s * 3 * W + W + hd * D + i];
            dqkv[s * 3 * W + W + hd * D + i] += ds * lc.qkv[t * 3 * W + hd * D + i];
          }
        }
      }
    }
    const std::vector<double> dxq =
        linear_back(lc.x, dqkv, T, D, 3 * W, tensor(p, layer_name(k, "qkv.weight")),
                    tensor(g, layer_name(k, "qkv.weight")), tensor(g, layer_name(k, "qkv.bias")));
    for (std::size_t i = 0; i < T * D; ++i) dx[i] += dxq[i];
    dh = dx;
  }
  // Embedding (the positional term is fixed).
  const std::vector<double> dxb = linear_back(c.xb, dh, L, F, H, tensor(p, "embed.weight"),
                                              tensor(g, "embed.weight"), tensor(g, "embed.bias"));
  // BiN parameters.
  const std::vector<double>& l1 = tensor(p, "bin.l1");
  const std::vector<double>& b1 = tensor(p, "bin.b1");
  const std::vector<double>& l2 = tensor(p, "bin.l2");
  const std::vector<double>& b2 = tensor(p, "bin.b2");
  const double y1 = tensor(p, "bin.y1")[0], y2 = tensor(p, "bin.y2")[0];
  std::vector<double>& dl1 = tensor(g, "bin.l1");
  std::vector<double>& db1 = tensor(g, "bin.b1");
  std::vector<double>& dl2 = tensor(g, "bin.l2");
  std::vector<double>& db2 = tensor(g, "bin.b2");
  double& dy1 = tensor(g, "bin.y1")[0];
  double& dy2 = tensor(g, "bin.y2")[0];
  for (std::size_t t = 0; t < L; ++t)
    for (std::size_t f = 0; f < F; ++f) {
      const std::size_t i = t * F + f;
      const double gi = dxb[i];
      dl1[t] += gi * y1 * c.z1[i];
      db1[t] += gi * y1;
      dl2[f] += gi * y2 * c.z2[i];
      db2[f] += gi * y2;
      dy1 += gi * (l1[t] * c.z1[i] + b1[t]);
      dy2 += gi * (l2[f] * c.z2[i] + b2[f]);
    }
}

}  // namespace

std::vector<std::size_t> TlobDims::head_widths() const {
  std::vector<std::size_t> w{(hidden / 4) * (window / 4)};
  while (w.back() > head_limit && w.back() / 4 >= 1) w.push_back(w.back() / 4);
  w.push_back(classes);
  return w;
}

void validate_tlob_dims(const TlobDims& d) {
  if (d.window < 4 || d.window % 4 != 0)
    fail("window = " + std::to_string(d.window) + ", allowed a multiple of 4, >= 4");
  if (d.features < 2) fail("features = " + std::to_string(d.features) + ", allowed >= 2");
  if (d.hidden < 4 || d.hidden % 4 != 0)
    fail("hidden = " + std::to_string(d.hidden) + ", allowed a multiple of 4, >= 4");
  if (d.pairs < 1) fail("pairs = 0, allowed >= 1");
  if (d.heads < 1) fail("heads = 0, allowed >= 1");
  if (d.classes < 2) fail("classes = " + std::to_string(d.classes) + ", allowed >= 2");
  if (d.head_limit < 1) fail("head_limit = 0, allowed >= 1");
}

std::vector<TlobTensor> tlob_zero_params(const TlobDims& d) {
  validate_tlob_dims(d);
  std::vector<TlobTensor> p;
  const auto add = [&](std::string name, std::vector<std::size_t> shape) {
    std::size_t n = 1;
    for (const std::size_t s : shape) n *= s;
    p.push_back({std::move(name), std::move(shape), std::vector<double>(n, 0.0)});
  };
  const std::size_t L = d.window, F = d.features, H = d.hidden, nh = d.heads;
  add("bin.l1", {L});
  add("bin.b1", {L});
  add("bin.l2", {F});
  add("bin.b2", {F});
  add("bin.y1", {1});
  add("bin.y2", {1});
  add("embed.weight", {H, F});
  add("embed.bias", {H});
  for (std::size_t k = 0; k < d.layers(); ++k) {
    const std::size_t D = d.width(k), O = d.out_width(k);
    add(layer_name(k, "qkv.weight"), {3 * D * nh, D});
    add(layer_name(k, "qkv.bias"), {3 * D * nh});
    add(layer_name(k, "out.weight"), {D, D * nh});
    add(layer_name(k, "out.bias"), {D});
    add(layer_name(k, "norm.gamma"), {D});
    add(layer_name(k, "norm.beta"), {D});
    add(layer_name(k, "fc1.weight"), {4 * D, D});
    add(layer_name(k, "fc1.bias"), {4 * D});
    add(layer_name(k, "fc2.weight"), {O, 4 * D});
    add(layer_name(k, "fc2.bias"), {O});
  }
  const std::vector<std::size_t> w = d.head_widths();
  for (std::size_t j = 0; j + 1 < w.size(); ++j) {
    add("head" + std::to_string(j) + ".weight", {w[j + 1], w[j]});
    add("head" + std::to_string(j) + ".bias", {w[j + 1]});
  }
  return p;
}

std::vector<double> tlob_positional_embedding(std::size_t window, std::size_t hidden) {
  std::vector<double> pos(window * hidden, 0.0);
  for (std::size_t t = 0; t < window; ++t)
    for (std::size_t i = 0; 2 * i < hidden; ++i) {
      const double angle = static_cast<double>(t) /
                           std::pow(10000.0, static_cast<double>(2 * i) /
                                                 static_cast<double>(hidden));
      pos[t * hidden + 2 * i] = std::sin(angle);
      if (2 * i + 1 < hidden) pos[t * hidden + 2 * i + 1] = std::cos(angle);
    }
  return pos;
}

std::vector<double> tlob_forward(const TlobDims& d, const std::vector<TlobTensor>& params,
                                 std::span<const double> x, std::size_t batch) {
  const std::size_t n = bin_index_check(d, x, batch);
  std::vector<double> logits;
  for (std::size_t b = 0; b < batch; ++b) {
    SampleCache c;
    const std::vector<double> z = sample_forward(d, params, x.data() + b * n, c);
    logits.insert(logits.end(), z.begin(), z.end());
  }
  return logits;
}

std::vector<TlobTensor> tlob_backward(const TlobDims& d, const std::vector<TlobTensor>& params,
                                      std::span<const double> x, std::size_t batch,
                                      std::span<const double> dlogits) {
  const std::size_t n = bin_index_check(d, x, batch);
  if (dlogits.size() != batch * d.classes)
    fail("dlogits has " + std::to_string(dlogits.size()) + " values, expected batch * classes");
  std::vector<TlobTensor> g = tlob_zero_params(d);
  for (std::size_t b = 0; b < batch; ++b) {
    SampleCache c;
    (void)sample_forward(d, params, x.data() + b * n, c);
    sample_backward(d, params, c, dlogits.data() + b * d.classes, g);
  }
  return g;
}

// ----- classification

double cross_entropy(std::span<const double> logits, std::span<const std::int32_t> labels,
                     std::size_t rows, std::size_t classes) {
  if (rows == 0 || logits.size() != rows * classes || labels.size() != rows)
    fail("cross_entropy: sizes do not match rows * classes");
  double sum = 0.0;
  for (std::size_t r = 0; r < rows; ++r) {
    const double* z = logits.data() + r * classes;
    const double mx = *std::max_element(z, z + classes);
    double s = 0.0;
    for (std::size_t c = 0; c < classes; ++c) s += std::exp(z[c] - mx);
    sum += mx + std::log(s) - z[labels[r]];
  }
  return sum / static_cast<double>(rows);
}

std::vector<double> cross_entropy_backward(std::span<const double> logits,
                                           std::span<const std::int32_t> labels, std::size_t rows,
                                           std::size_t classes) {
  if (rows == 0 || logits.size() != rows * classes || labels.size() != rows)
    fail("cross_entropy_backward: sizes do not match rows * classes");
  std::vector<double> d(rows * classes);
  for (std::size_t r = 0; r < rows; ++r) {
    const double* z = logits.data() + r * classes;
    const double mx = *std::max_element(z, z + classes);
    double s = 0.0;
    for (std::size_t c = 0; c < classes; ++c) s += std::exp(z[c] - mx);
    for (std::size_t c = 0; c < classes; ++c)
      d[r * classes + c] = (std::exp(z[c] - mx) / s -
                            (static_cast<std::int32_t>(c) == labels[r] ? 1.0 : 0.0)) /
                           static_cast<double>(rows);
  }
  return d;
}

double trend_change(std::span<const float> series, std::size_t columns, std::size_t column,
                    std::size_t start, std::size_t window, std::size_t horizon) {
  if (horizon == 0 || horizon > window || column >= columns ||
      (start + window + horizon) * columns > series.size())
    fail("trend_change: horizon in [1, window] and the window inside the series");
  double past = 0.0, future = 0.0;
  for (std::size_t k = 0; k < horizon; ++k) {
    past += static_cast<double>(series[(start + window - horizon + k) * columns + column]);
    future += static_cast<double>(series[(start + window + k) * columns + column]);
  }
  const double h = static_cast<double>(horizon);
  return future / h - past / h;
}

std::int32_t trend_label(double change, double theta) {
  return change > theta ? 2 : (change < -theta ? 0 : 1);
}

std::vector<std::uint64_t> confusion_counts(std::span<const double> logits,
                                            std::span<const std::int32_t> labels,
                                            std::size_t rows, std::size_t classes) {
  std::vector<std::uint64_t> m(classes * classes, 0);
  for (std::size_t r = 0; r < rows; ++r) {
    const double* z = logits.data() + r * classes;
    const std::size_t arg = static_cast<std::size_t>(std::max_element(z, z + classes) - z);
    ++m[static_cast<std::size_t>(labels[r]) * classes + arg];
  }
  return m;
}

ClassMetrics class_metrics(std::span<const std::uint64_t> m, std::size_t classes) {
  ClassMetrics out;
  std::uint64_t total = 0, correct = 0;
  double f1 = 0.0;
  for (std::size_t c = 0; c < classes; ++c) {
    std::uint64_t row = 0, col = 0;
    for (std::size_t j = 0; j < classes; ++j) {
      row += m[c * classes + j];
      col += m[j * classes + c];
    }
    const std::uint64_t tp = m[c * classes + c];
    total += row;
    correct += tp;
    const double denom = static_cast<double>(row + col);  // 2 tp + fp + fn
    f1 += denom > 0.0 ? 2.0 * static_cast<double>(tp) / denom : 0.0;
  }
  out.accuracy = total > 0 ? static_cast<double>(correct) / static_cast<double>(total) : 0.0;
  out.macro_f1 = f1 / static_cast<double>(classes);
  return out;
}

}  // namespace resident::reference
