#include "tests/reference/tft_reference.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <unordered_map>

#include "kernels/core/error.h"

namespace resident::reference {

namespace {

using Vec = std::vector<double>;

[[noreturn]] void fail(const std::string& detail) {
  throw Error("tft_reference", "invalid argument", detail, __FILE__, __LINE__);
}

double sigmoid(double z) { return 1.0 / (1.0 + std::exp(-z)); }
double elu(double z) { return z > 0.0 ? z : std::expm1(z); }
double elu_grad(double z) { return z > 0.0 ? 1.0 : std::exp(z); }

// Tensors by name; `at(name, offset)` is a pointer into one tensor's values.
template <class Tensors, class Pointer>
class Named {
 public:
  explicit Named(Tensors& tensors) : tensors_(tensors) {
    for (std::size_t i = 0; i < tensors.size(); ++i) index_[tensors[i].name] = i;
  }
  Pointer at(const std::string& name, std::size_t offset = 0) const {
    const auto found = index_.find(name);
    if (found == index_.end()) fail("no tensor " + name);
    return tensors_[found->second].values.data() + offset;
  }
  bool has(const std::string& name) const { return index_.count(name) != 0; }

 private:
  Tensors& tensors_;
  std::unordered_map<std::string, std::size_t> index_;
};
using ConstParams = Named<const std::vector<TftTensor>, const double*>;
using GradParams = Named<std::vector<TftTensor>, double*>;

// y [out] = W [out, in] a + b (b may be null).
Vec linear(const double* w, const double* b, std::size_t out, std::size_t in, const double* a) {
  Vec y(out);
  for (std::size_t o = 0; o < out; ++o) {
    double s = b != nullptr ? b[o] : 0.0;
    for (std::size_t i = 0; i < in; ++i) s += w[o * in + i] * a[i];
    y[o] = s;
  }
  return y;
}

// da += W^T dy, dW += dy a^T, db += dy (null ones skipped).
void linear_back(const double* w, std::size_t out, std::size_t in, const double* a,
                 const double* dy, double* da, double* dw, double* db) {
  for (std::size_t o = 0; o < out; ++o) {
    for (std::size_t i = 0; i < in; ++i) {
      if (da != nullptr) da[i] += w[o * in + i] * dy[o];
      if (dw != nullptr) dw[o * in + i] += dy[o] * a[i];
    }
    if (db != nullptr) db[o] += dy[o];
  }
}

// ----- gate, add, norm: y = LayerNorm(resid + GLU(a))

struct GanWeights {
  const double *glu_w, *glu_b, *gamma, *beta;
};
struct GanGrads {
  double *glu_w, *glu_b, *gamma, *beta;
};
struct GanCache {
  Vec pre;   // [2 out], the glu Linear's output
  Vec xhat;  // [out]
  double rstd = 0.0;
  Vec y;     // [out]
};

GanWeights gan_weights(const ConstParams& p, const std::string& prefix, std::size_t offset_w,
                       std::size_t offset_b, std::size_t offset_n) {
  return {p.at(prefix + ".glu.weight", offset_w), p.at(prefix + ".glu.bias", offset_b),
          p.at(prefix + ".norm.gamma", offset_n), p.at(prefix + ".norm.beta", offset_n)};
}
GanGrads gan_grads(const GradParams& g, const std::string& prefix, std::size_t offset_w,
                   std::size_t offset_b, std::size_t offset_n) {
  return {g.at(prefix + ".glu.weight", offset_w), g.at(prefix + ".glu.bias", offset_b),
          g.at(prefix + ".norm.gamma", offset_n), g.at(prefix + ".norm.beta", offset_n)};
}

GanCache gan_forward(const GanWeights& w, std::size_t out, std::size_t in, const double* a,
                     const double* resid) {
  GanCache c;
  c.pre = linear(w.glu_w, w.glu_b, 2 * out, in, a);
  Vec r(out);
  double mean = 0.0;
  for (std::size_t k = 0; k < out; ++k) {
    r[k] = resid[k] + c.pre[k] * sigmoid(c.pre[out + k]);
    mean += r[k];
  }
  mean /= static_cast<double>(out);
  double var = 0.0;
  for (std::size_t k = 0; k < out; ++k) var += (r[k] - mean) * (r[k] - mean);
  var /= static_cast<double>(out);
  c.rstd = 1.0 / std::sqrt(var + kTftNormEps);
  c.xhat.resize(out);
  c.y.resize(out);
  for (std::size_t k = 0; k < out; ++k) {
    c.xhat[k] = (r[k] - mean) * c.rstd;
    c.y[k] = c.xhat[k] * w.gamma[k] + w.beta[k];
  }
  return c;
}

// da += dLoss/da, dresid += dLoss/dresid; parameter gradients added.
void gan_backward(const GanCache& c, const GanWeights& w, const GanGrads& g, std::size_t out,
                  std::size_t in, const double* a, const double* dy, double* da,
                  double* dresid) {
  Vec gx(out);
  double mg = 0.0, mgx = 0.0;
  for (std::size_t k = 0; k < out; ++k) {
    gx[k] = dy[k] * w.gamma[k];
    mg += gx[k];
    mgx += gx[k] * c.xhat[k];
    g.gamma[k] += dy[k] * c.xhat[k];
    g.beta[k] += dy[k];
  }
  mg /= static_cast<double>(out);
  mgx /= static_cast<double>(out);
  Vec dpre(2 * out);
  for (std::size_t k = 0; k < out; ++k) {
    const double dr = c.rstd * (gx[k] - mg - c.xhat[k] * mgx);
    dresid[k] += dr;
    const double s = sigmoid(c.pre[out + k]);
    dpre[k] = dr * s;
    dpre[out + k] = dr * c.pre[k] * s * (1.0 - s);
  }
  linear_back(w.glu_w, 2 * out, in, a, dpre.data(), da, g.glu_w, g.glu_b);
}

// ----- gated residual network

struct GrnShape {
  std::size_t in, hidden, out;
};
struct GrnWeights {
  const double *w1, *b1, *w2, *b2;
  GanWeights gan;
  const double *skip_w, *skip_b;  // null when in == out
};
struct GrnGrads {
  double *w1, *b1, *w2, *b2;
  GanGrads gan;
  double *skip_w, *skip_b;
};
struct GrnCache {
  Vec z1, eta2, eta1, skip;
  GanCache gan;
};

// The weights of GRN `prefix`, the `index`-th of a stack (0 for a single GRN).
template <class Named, class Result, class MakeGan>
Result grn_part(const Named& p, const std::string& prefix, const GrnShape& s, std::size_t index,
                MakeGan make_gan) {
  const std::size_t h = s.hidden, o = s.out;
  Result r{};
  r.w1 = p.at(prefix + ".fc1.weight", index * h * s.in);
  r.b1 = p.at(prefix + ".fc1.bias", index * h);
  r.w2 = p.at(prefix + ".fc2.weight", index * h * h);
  r.b2 = p.at(prefix + ".fc2.bias", index * h);
  r.gan = make_gan(p, prefix, index * 2 * o * h, index * 2 * o, index * o);
  r.skip_w = s.in != s.out ? p.at(prefix + ".skip.weight", index * o * s.in) : nullptr;
  r.skip_b = s.in != s.out ? p.at(prefix + ".skip.bias", index * o) : nullptr;
  return r;
}
GrnWeights grn_weights(const ConstParams& p, const std::string& prefix, const GrnShape& s,
                       std::size_t index = 0) {
  return grn_part<ConstParams, GrnWeights>(p, prefix, s, index, gan_weights);
}
GrnGrads grn_grads(const GradParams& g, const std::string& prefix, const GrnShape& s,
                   std::size_t index = 0) {
  return grn_part<GradParams, GrnGrads>(g, prefix, s, index, gan_grads);
}

GrnCache grn_forward(const GrnWeights& w, const GrnShape& s, const double* a) {
  GrnCache c;
  c.z1 = linear(w.w1, w.b1, s.hidden, s.in, a);
  c.eta2.resize(s.hidden);
  for (std::size_t k = 0; k < s.hidden; ++k) c.eta2[k] = elu(c.z1[k]);
  c.eta1 = linear(w.w2, w.b2, s.hidden, s.hidden, c.eta2.data());
  c.skip = s.in != s.out ? linear(w.skip_w, w.skip_b, s.out, s.in, a) : Vec(a, a + s.in);
  c.gan = gan_forward(w.gan, s.out, s.hidden, c.eta1.data(), c.skip.data());
  return c;
}

// da += dLoss/da.
void grn_backward(const GrnCache& c, const GrnWeights& w, const GrnGrads& g, const GrnShape& s,
                  const double* a, const double* dy, double* da) {
  Vec deta1(s.hidden, 0.0), dskip(s.out, 0.0);
  gan_backward(c.gan, w.gan, g.gan, s.out, s.hidden, c.eta1.data(), dy, deta1.data(),
               dskip.data());
  if (s.in != s.out)
    linear_back(w.skip_w, s.out, s.in, a, dskip.data(), da, g.skip_w, g.skip_b);
  else
    for (std::size_t k = 0; k < s.in; ++k) da[k] += dskip[k];
  Vec deta2(s.hidden, 0.0);
  linear_back(w.w2, s.hidden, s.hidden, c.eta2.data(), deta1.data(), deta2.data(), g.w2, g.b2);
  Vec dz1(s.hidden);
  for (std::size_t k = 0; k < s.hidden; ++k) dz1[k] = deta2[k] * elu_grad(c.z1[k]);
  linear_back(w.w1, s.hidden, s.in, a, dz1.data(), da, g.w1, g.b1);
}

// ----- one window

struct WindowCache {
  Vec e;                                 // [L, F, dc]
  std::vector<GrnCache> flat;            // [L]
  Vec v;                                 // [L, F]
  std::vector<GrnCache> var;             // [L * F]
  Vec xi;                                // [L, H]
  Vec gates, c, h;                       // [L, 4H] (activated), [L, H], [L, H]
  std::vector<GanCache> lstm_gate;       // [L]: phi
  std::vector<GrnCache> enrich;          // [L]: theta
  Vec q, keys, values;                   // [H], [L, H], [L, dv]
  Vec probs;                             // [nh, L]
  Vec mean_probs, mixed, attn;           // [L], [dv], [H]
  GanCache attn_gate;                    // delta
  GrnCache ff;                           // psi
  GanCache out_gate;                     // u
};

struct Shapes {
  GrnShape flat, var, square;
  explicit Shapes(const TftDims& d)
      : flat{d.features * d.prescale, d.hidden, d.features},
        var{d.prescale, d.hidden, d.hidden},
        square{d.hidden, d.hidden, d.hidden} {}
};

Vec window_forward(const TftDims& d, const ConstParams& p, const double* x, WindowCache& c) {
  const std::size_t L = d.window, F = d.features, H = d.hidden, nh = d.heads, dc = d.prescale;
  const std::size_t dk = d.head_width(), dv = d.head_width();
  const Shapes s(d);
  // 1. prescalers
  const double* pw = p.at("prescale.weight");
  const double* pb = p.at("prescale.bias");
  c.e.assign(L * F * dc, 0.0);
  for (std::size_t t = 0; t < L; ++t)
    for (std::size_t j = 0; j < F; ++j)
      for (std::size_t k = 0; k < dc; ++k)
        c.e[(t * F + j) * dc + k] = pw[j * dc + k] * x[t * F + j] + pb[j * dc + k];
  // 2. variable selection
  const GrnWeights flat_w = grn_weights(p, "vsn_flat", s.flat);
  c.flat.clear();
  c.var.clear();
  c.v.assign(L * F, 0.0);
  c.xi.assign(L * H, 0.0);
  for (std::size_t t = 0; t < L; ++t) {
    c.flat.push_back(grn_forward(flat_w, s.flat, &c.e[t * F * dc]));
    const Vec& logits = c.flat.back().gan.y;
    double top = logits[0];
    for (std::size_t j = 1; j < F; ++j) top = std::max(top, logits[j]);
    double sum = 0.0;
    for (std::size_t j = 0; j < F; ++j) sum += (c.v[t * F + j] = std::exp(logits[j] - top));
    for (std::size_t j = 0; j < F; ++j) c.v[t * F + j] /= sum;
    for (std::size_t j = 0; j < F; ++j) {
      c.var.push_back(grn_forward(grn_weights(p, "vsn_var", s.var, j), s.var,
                                  &c.e[(t * F + j) * dc]));
      for (std::size_t k = 0; k < H; ++k)
        c.xi[t * H + k] += c.v[t * F + j] * c.var.back().gan.y[k];
    }
  }
  // 3. LSTM
  const double* wih = p.at("lstm.input_weight");
  const double* whh = p.at("lstm.recurrent_weight");
  const double* lb = p.at("lstm.bias");
  c.gates.assign(L * 4 * H, 0.0);
  c.c.assign(L * H, 0.0);
  c.h.assign(L * H, 0.0);
  const Vec zero(H, 0.0);
  for (std::size_t t = 0; t < L; ++t) {
    const double* hp = t == 0 ? zero.data() : &c.h[(t - 1) * H];
    const double* cp = t == 0 ? zero.data() : &c.c[(t - 1) * H];
    Vec z = linear(wih, lb, 4 * H, H, &c.xi[t * H]);
    const Vec zr = linear(whh, nullptr, 4 * H, H, hp);
    for (std::size_t u = 0; u < 4 * H; ++u) z[u] += zr[u];
    double* gt = &c.gates[t * 4 * H];
    for (std::size_t k = 0; k < H; ++k) {
      gt[k] = sigmoid(z[k]);
      gt[H + k] = sigmoid(z[H + k]);
      gt[2 * H + k] = std::tanh(z[2 * H + k]);
      gt[3 * H + k] = sigmoid(z[3 * H + k]);
      c.c[t * H + k] = gt[H + k] * cp[k] + gt[k] * gt[2 * H + k];
      c.h[t * H + k] = gt[3 * H + k] * std::tanh(c.c[t * H + k]);
    }
  }
  // 4, 5. post-LSTM gate and static enrichment (no statics: a plain GRN)
  const GanWeights lg = gan_weights(p, "lstm_gate", 0, 0, 0);
  const GrnWeights enrich_w = grn_weights(p, "enrich", s.square);
  c.lstm_gate.clear();
  c.enrich.clear();
  for (std::size_t t = 0; t < L; ++t) {
    c.lstm_gate.push_back(gan_forward(lg, H, H, &c.h[t * H], &c.xi[t * H]));
    c.enrich.push_back(grn_forward(enrich_w, s.square, c.lstm_gate.back().y.data()));
  }
  // 6. interpretable attention, the last step as the query
  const std::size_t qt = L - 1;
  c.q = linear(p.at("attn.query.weight"), p.at("attn.query.bias"), H, H,
               c.enrich[qt].gan.y.data());
  c.keys.assign(L * H, 0.0);
  c.values.assign(L * dv, 0.0);
  for (std::size_t t = 0; t < L; ++t) {
    const Vec k = linear(p.at("attn.key.weight"), p.at("attn.key.bias"), H, H,
                         c.enrich[t].gan.y.data());
    const Vec v = linear(p.at("attn.value.weight"), p.at("attn.value.bias"), dv, H,
                         c.enrich[t].gan.y.data());
    std::copy(k.begin(), k.end(), c.keys.begin() + static_cast<std::ptrdiff_t>(t * H));
    std::copy(v.begin(), v.end(), c.values.begin() + static_cast<std::ptrdiff_t>(t * dv));
  }
  const double scale = 1.0 / std::sqrt(static_cast<double>(dk));
  c.probs.assign(nh * L, 0.0);
  c.mean_probs.assign(L, 0.0);
  for (std::size_t h = 0; h < nh; ++h) {
    double* a = &c.probs[h * L];
    double top = -INFINITY;
    for (std::size_t t = 0; t <= qt; ++t) {  // the causal mask: steps up to the query's
      double sdot = 0.0;
      for (std::size_t k = 0; k < dk; ++k) sdot += c.q[h * dk + k] * c.keys[t * H + h * dk + k];
      a[t] = sdot * scale;
      top = std::max(top, a[t]);
    }
    double sum = 0.0;
    for (std::size_t t = 0; t <= qt; ++t) sum += (a[t] = std::exp(a[t] - top));
    for (std::size_t t = 0; t <= qt; ++t) {
      a[t] /= sum;
      c.mean_probs[t] += a[t] / static_cast<double>(nh);
    }
  }
  c.mixed.assign(dv, 0.0);
  for (std::size_t t = 0; t < L; ++t)
    for (std::size_t k = 0; k < dv; ++k) c.mixed[k] += c.mean_probs[t] * c.values[t * dv + k];
  c.attn = linear(p.at("attn.out.weight"), nullptr, H, dv, c.mixed.data());
  // 7, 8. gates, position-wise GRN, head
  c.attn_gate = gan_forward(gan_weights(p, "attn_gate", 0, 0, 0), H, H, c.attn.data(),
                            c.enrich[qt].gan.y.data());
  c.ff = grn_forward(grn_weights(p, "ff", s.square), s.square, c.attn_gate.y.data());
  c.out_gate = gan_forward(gan_weights(p, "out_gate", 0, 0, 0), H, H, c.ff.gan.y.data(),
                           c.lstm_gate[qt].y.data());
  return linear(p.at("head.weight"), p.at("head.bias"), d.predictions(), H,
                c.out_gate.y.data());
}

void window_backward(const TftDims& d, const ConstParams& p, const GradParams& g,
                     const double* x, const WindowCache& c, const double* dpred) {
  const std::size_t L = d.window, F = d.features, H = d.hidden, nh = d.heads, dc = d.prescale;
  const std::size_t dk = d.head_width(), dv = d.head_width(), qt = L - 1;
  const Shapes s(d);
  Vec dphi(L * H, 0.0), dtheta(L * H, 0.0);
  // 8. head, output gate
  Vec du(H, 0.0);
  linear_back(p.at("head.weight"), d.predictions(), H, c.out_gate.y.data(), dpred, du.data(),
              g.at("head.weight"), g.at("head.bias"));
  Vec dpsi(H, 0.0);
  gan_backward(c.out_gate, gan_weights(p, "out_gate", 0, 0, 0), gan_grads(g, "out_gate", 0, 0, 0),
               H, H, c.ff.gan.y.data(), du.data(), dpsi.data(), &dphi[qt * H]);
  // 7. position-wise GRN, attention gate
  Vec ddelta(H, 0.0);
  grn_backward(c.ff, grn_weights(p, "ff", s.square), grn_grads(g, "ff", s.square), s.square,
               c.attn_gate.y.data(), dpsi.data(), ddelta.data());
  Vec dattn(H, 0.0);
  gan_backward(c.attn_gate, gan_weights(p, "attn_gate", 0, 0, 0),
               gan_grads(g, "attn_gate", 0, 0, 0), H, H, c.attn.data(), ddelta.data(),
               dattn.data(), &dtheta[qt * H]);
  // 6. attention
  Vec dmixed(dv, 0.0);
  linear_back(p.at("attn.out.weight"), H, dv, c.mixed.data(), dattn.data(), dmixed.data(),
              g.at("attn.out.weight"), nullptr);
  const double scale = 1.0 / std::sqrt(static_cast<double>(dk));
  Vec dq(H, 0.0), dkeys(L * H, 0.0), dvalues(L * dv, 0.0), dmean(L, 0.0);
  for (std::size_t t = 0; t < L; ++t)
    for (std::size_t k = 0; k < dv; ++k) {
      dmean[t] += dmixed[k] * c.values[t * dv + k];
      dvalues[t * dv + k] += c.mean_probs[t] * dmixed[k];
    }
  for (std::size_t h = 0; h < nh; ++h) {
    const double* a = &c.probs[h * L];
    double dot = 0.0;
    for (std::size_t t = 0; t <= qt; ++t) dot += a[t] * dmean[t] / static_cast<double>(nh);
    for (std::size_t t = 0; t <= qt; ++t) {
      const double ds = a[t] * (dmean[t] / static_cast<double>(nh) - dot) * scale;
      for (std::size_t k = 0; k < dk; ++k) {
        dq[h * dk + k] += ds * c.keys[t * H + h * dk + k];
        dkeys[t * H + h * dk + k] += ds * c.q[h * dk + k];
      }
    }
  }
  linear_back(p.at("attn.query.weight"), H, H, c.enrich[qt].gan.y.data(), dq.data(),
              &dtheta[qt * H], g.at("attn.query.weight"), g.at("attn.query.bias"));
  for (std::size_t t = 0; t < L; ++t) {
    linear_back(p.at("attn.key.weight"), H, H, c.enrich[t].gan.y.data(), &dkeys[t * H],
                &dtheta[t * H], g.at("attn.key.weight"), g.at("attn.key.bias"));
    linear_back(p.at("attn.value.weight"), dv, H, c.enrich[t].gan.y.data(), &dvalues[t * dv],
                &dtheta[t * H], g.at("attn.value.weight"), g.at("attn.value.bias"));
  }
  // 5, 4. enrichment, post-LSTM gate
  const GrnWeights enrich_w = grn_weights(p, "enrich", s.square);
  const GrnGrads enrich_g = grn_grads(g, "enrich", s.square);
  const GanWeights lg_w = gan_weights(p, "lstm_gate", 0, 0, 0);
  const GanGrads lg_g = gan_grads(g, "lstm_gate", 0, 0, 0);
  Vec dh_above(L * H, 0.0), dxi(L * H, 0.0);
  for (std::size_t t = 0; t < L; ++t) {
    grn_backward(c.enrich[t], enrich_w, enrich_g, s.square, c.lstm_gate[t].y.data(),
                 &dtheta[t * H], &dphi[t * H]);
    gan_backward(c.lstm_gate[t], lg_w, lg_g, H, H, &c.h[t * H], &dphi[t * H], &dh_above[t * H],
                 &dxi[t * H]);
  }
  // 3. LSTM, reverse time
  const double* wih = p.at("lstm.input_weight");
  const double* whh = p.at("lstm.recurrent_weight");
  Vec dh_rec(H, 0.0), dc_rec(H, 0.0), dz(4 * H);
  const Vec zero(H, 0.0);
  for (std::size_t t = L; t-- > 0;) {
    const double* gt = &c.gates[t * 4 * H];
    const double* cp = t == 0 ? zero.data() : &c.c[(t - 1) * H];
    const double* hp = t == 0 ? zero.data() : &c.h[(t - 1) * H];
    for (std::size_t k = 0; k < H; ++k) {
      const double i = gt[k], f = gt[H + k], gg = gt[2 * H + k], o = gt[3 * H + k];
      const double dh = dh_above[t * H + k] + dh_rec[k];
      const double tc = std::tanh(c.c[t * H + k]);
      const double dcell = dc_rec[k] + dh * o * (1.0 - tc * tc);
      dz[k] = dcell * gg * i * (1.0 - i);
      dz[H + k] = dcell * cp[k] * f * (1.0 - f);
      dz[2 * H + k] = dcell * i * (1.0 - gg * gg);
      dz[3 * H + k] = dh * tc * o * (1.0 - o);
      dc_rec[k] = dcell * f;
    }
    linear_back(wih, 4 * H, H, &c.xi[t * H], dz.data(), &dxi[t * H], g.at("lstm.input_weight"),
                g.at("lstm.bias"));
    std::fill(dh_rec.begin(), dh_rec.end(), 0.0);
    linear_back(whh, 4 * H, H, hp, dz.data(), dh_rec.data(), g.at("lstm.recurrent_weight"),
                nullptr);
  }
  // 2. variable selection
  const GrnWeights flat_w = grn_weights(p, "vsn_flat", s.flat);
  const GrnGrads flat_g = grn_grads(g, "vsn_flat", s.flat);
  Vec de(L * F * dc, 0.0);
  for (std::size_t t = 0; t < L; ++t) {
    Vec dv_sel(F, 0.0);
    double dot = 0.0;
    for (std::size_t j = 0; j < F; ++j) {
      const GrnCache& r = c.var[t * F + j];
      Vec dr(H);
      for (std::size_t k = 0; k < H; ++k) {
        dv_sel[j] += dxi[t * H + k] * r.gan.y[k];
        dr[k] = c.v[t * F + j] * dxi[t * H + k];
      }
      dot += c.v[t * F + j] * dv_sel[j];
      grn_backward(r, grn_weights(p, "vsn_var", s.var, j), grn_grads(g, "vsn_var", s.var, j),
                   s.var, &c.e[(t * F + j) * dc], dr.data(), &de[(t * F + j) * dc]);
    }
    Vec dlogits(F);
    for (std::size_t j = 0; j < F; ++j) dlogits[j] = c.v[t * F + j] * (dv_sel[j] - dot);
    grn_backward(c.flat[t], flat_w, flat_g, s.flat, &c.e[t * F * dc], dlogits.data(),
                 &de[t * F * dc]);
  }
  // 1. prescalers
  double* gw = g.at("prescale.weight");
  double* gb = g.at("prescale.bias");
  for (std::size_t t = 0; t < L; ++t)
    for (std::size_t j = 0; j < F; ++j)
      for (std::size_t k = 0; k < dc; ++k) {
        gw[j * dc + k] += de[(t * F + j) * dc + k] * x[t * F + j];
        gb[j * dc + k] += de[(t * F + j) * dc + k];
      }
}

std::size_t checked_inputs(const TftDims& d, const std::vector<TftTensor>& params,
                           std::span<const double> x, std::size_t batch) {
  validate_tft_dims(d);
  const std::vector<TftTensor> zero = tft_zero_params(d);
  if (params.size() != zero.size()) fail("params do not match tft_zero_params(dims)");
  for (std::size_t i = 0; i < zero.size(); ++i)
    if (params[i].name != zero[i].name || params[i].values.size() != zero[i].values.size())
      fail("tensor " + std::to_string(i) + " is " + params[i].name + ", expected " +
           zero[i].name);
  const std::size_t n = d.window * d.features;
  if (batch == 0 || x.size() != batch * n)
    fail("x has " + std::to_string(x.size()) + " values, expected batch * L * F = " +
         std::to_string(batch * n) + " with batch >= 1");
  return n;
}

void add_grn(std::vector<TftTensor>& out, const std::string& prefix, const GrnShape& s,
             std::size_t stack) {
  const auto shape = [&](std::vector<std::size_t> dims) {
    if (stack > 0) dims.insert(dims.begin(), stack);
    return dims;
  };
  out.push_back({prefix + ".fc1.weight", shape({s.hidden, s.in}), {}});
  out.push_back({prefix + ".fc1.bias", shape({s.hidden}), {}});
  out.push_back({prefix + ".fc2.weight", shape({s.hidden, s.hidden}), {}});
  out.push_back({prefix + ".fc2.bias", shape({s.hidden}), {}});
  out.push_back({prefix + ".glu.weight", shape({2 * s.out, s.hidden}), {}});
  out.push_back({prefix + ".glu.bias", shape({2 * s.out}), {}});
  out.push_back({prefix + ".norm.gamma", shape({s.out}), {}});
  out.push_back({prefix + ".norm.beta", shape({s.out}), {}});
  if (s.in != s.out) {
    out.push_back({prefix + ".skip.weight", shape({s.out, s.in}), {}});
    out.push_back({prefix + ".skip.bias", shape({s.out}), {}});
  }
}

void add_gate(std::vector<TftTensor>& out, const std::string& prefix, std::size_t h) {
  out.push_back({prefix + ".glu.weight", {2 * h, h}, {}});
  out.push_back({prefix + ".glu.bias", {2 * h}, {}});
  out.push_back({prefix + ".norm.gamma", {h}, {}});
  out.push_back({prefix + ".norm.beta", {h}, {}});
}

}  // namespace

void validate_tft_dims(const TftDims& d) {
  const auto at_least_one = [](const char* field, std::size_t v) {
    if (v < 1) fail(std::string(field) + " = 0, allowed >= 1");
  };
  at_least_one("window", d.window);
  at_least_one("features", d.features);
  at_least_one("hidden", d.hidden);
  at_least_one("heads", d.heads);
  at_least_one("prescale", d.prescale);
  at_least_one("outputs", d.outputs);
  at_least_one("quantiles", d.quantiles);
  if (d.hidden % d.heads != 0)
    fail("hidden = " + std::to_string(d.hidden) + ", allowed a multiple of heads = " +
         std::to_string(d.heads));
}

std::vector<TftTensor> tft_zero_params(const TftDims& d) {
  validate_tft_dims(d);
  const std::size_t F = d.features, H = d.hidden, dv = d.head_width();
  const Shapes s(d);
  std::vector<TftTensor> out;
  out.push_back({"prescale.weight", {F, d.prescale}, {}});
  out.push_back({"prescale.bias", {F, d.prescale}, {}});
  add_grn(out, "vsn_flat", s.flat, 0);
  add_grn(out, "vsn_var", s.var, F);
  out.push_back({"lstm.input_weight", {4 * H, H}, {}});
  out.push_back({"lstm.recurrent_weight", {4 * H, H}, {}});
  out.push_back({"lstm.bias", {4 * H}, {}});
  add_gate(out, "lstm_gate", H);
  add_grn(out, "enrich", s.square, 0);
  out.push_back({"attn.query.weight", {H, H}, {}});
  out.push_back({"attn.query.bias", {H}, {}});
  out.push_back({"attn.key.weight", {H, H}, {}});
  out.push_back({"attn.key.bias", {H}, {}});
  out.push_back({"attn.value.weight", {dv, H}, {}});
  out.push_back({"attn.value.bias", {dv}, {}});
  out.push_back({"attn.out.weight", {H, dv}, {}});
  add_gate(out, "attn_gate", H);
  add_grn(out, "ff", s.square, 0);
  add_gate(out, "out_gate", H);
  out.push_back({"head.weight", {d.predictions(), H}, {}});
  out.push_back({"head.bias", {d.predictions()}, {}});
  for (TftTensor& t : out) {
    std::size_t n = 1;
    for (const std::size_t v : t.shape) n *= v;
    t.values.assign(n, 0.0);
  }
  return out;
}

std::vector<double> tft_forward(const TftDims& d, const std::vector<TftTensor>& params,
                                std::span<const double> x, std::size_t batch,
                                TftForwardDetail* detail) {
  const std::size_t n = checked_inputs(d, params, x, batch);
  const ConstParams p(params);
  std::vector<double> out;
  if (detail != nullptr) {
    detail->selection.clear();
    detail->attention.clear();
  }
  for (std::size_t b = 0; b < batch; ++b) {
    WindowCache c;
    const Vec y = window_forward(d, p, x.data() + b * n, c);
    out.insert(out.end(), y.begin(), y.end());
    if (detail != nullptr) {
      detail->selection.insert(detail->selection.end(), c.v.begin(), c.v.end());
      detail->attention.insert(detail->attention.end(), c.mean_probs.begin(),
                               c.mean_probs.end());
    }
  }
  return out;
}

std::vector<TftTensor> tft_backward(const TftDims& d, const std::vector<TftTensor>& params,
                                    std::span<const double> x, std::size_t batch,
                                    std::span<const double> dprediction) {
  const std::size_t n = checked_inputs(d, params, x, batch);
  if (dprediction.size() != batch * d.predictions())
    fail("dprediction has " + std::to_string(dprediction.size()) + " values, expected " +
         std::to_string(batch * d.predictions()));
  const ConstParams p(params);
  std::vector<TftTensor> grads = tft_zero_params(d);
  const GradParams g(grads);
  for (std::size_t b = 0; b < batch; ++b) {
    WindowCache c;
    (void)window_forward(d, p, x.data() + b * n, c);
    window_backward(d, p, g, x.data() + b * n, c, dprediction.data() + b * d.predictions());
  }
  return grads;
}

}  // namespace resident::reference
