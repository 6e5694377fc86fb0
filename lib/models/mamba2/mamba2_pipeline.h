// The Mamba2 model's forward and backward as one sequence of GEMMs and kernel calls, written
// once over a Backend: the GPU model (mamba2_model.cpp) runs it on cuBLAS and the kernels'
// launchers; the CPU tests run the same sequence on the host, with a BLAS-semantics GEMM and the
// kernels' block programs, so the wiring (layouts, strides, GEMM orientations, which buffer
// feeds which op) is checked against the double reference without a GPU.
//
// A Backend provides
//   gemm(transa, transb, m, n, k, A, lda, B, ldb, beta, C, ldc)   column-major
//                                  C = op(A) op(B) + beta C (alpha 1), cuBLAS' argument order
//   run(args) for each kernels::mamba2 *Args struct, conv_forward(ConvForward),
//   conv_backward(ConvBackward), partials_sum(span<const PartialSegment>).
//
// Row-major views: a row-major A [r, c] is a column-major [c, r] matrix with leading dimension c.
#pragma once

#include <array>
#include <cstddef>
#include <span>
#include <string>
#include <vector>

#include "kernels/models/mamba2/bc_head_sum.h"
#include "kernels/models/mamba2/last_step_head.h"
#include "kernels/models/mamba2/partials_sum.h"
#include "kernels/models/mamba2/row_norms.h"
#include "kernels/models/mamba2/ssd.h"
#include "lib/models/mamba2/mamba2_config.h"

namespace resident::models::mamba2 {

namespace km = kernels::mamba2;

inline constexpr float kNormEps = 1e-5f;

// Static sizes of one model instance.
struct Mamba2Dims {
  int L = 0, F = 0, O = 0, D = 0, layers = 0, di = 0, H = 0, P = 0, N = 0, K = 0, Q = 0;
  int C = 0;  // conv channels d_inner + 2N
  int W = 0;  // in_proj width
  int max_batch = 0;

  int chunks() const { return (L + Q - 1) / Q; }
  static Mamba2Dims from(const Mamba2Config& c, const ModelShape& s) {
    Mamba2Dims d;
    d.L = static_cast<int>(s.window);
    d.F = static_cast<int>(s.features);
    d.O = static_cast<int>(s.outputs);
    d.D = static_cast<int>(c.d_model);
    d.layers = static_cast<int>(c.n_layers);
    d.di = static_cast<int>(c.d_inner());
    d.H = static_cast<int>(c.heads());
    d.P = static_cast<int>(c.headdim);
    d.N = static_cast<int>(c.d_state);
    d.K = static_cast<int>(c.d_conv);
    d.Q = static_cast<int>(c.chunk < s.window ? c.chunk : s.window);
    d.C = static_cast<int>(c.conv_channels());
    d.W = static_cast<int>(c.proj_width());
    d.max_batch = static_cast<int>(s.max_batch);
    return d;
  }
};

struct ConvForward {
  float* y;
  std::size_t y_stride;
  const float* u;
  std::size_t u_stride;
  const float* weight;
  const float* bias;
  std::size_t batch, length, channels, kernel;
};

struct ConvBackward {
  float* du;  // overwritten
  std::size_t du_stride;
  float* dweight;  // accumulated
  float* dbias;    // accumulated
  float* scratch;
  std::size_t scratch_floats;
  const float* dy;
  std::size_t dy_stride;
  const float* u;
  std::size_t u_stride;
  const float* weight;
  const float* bias;
  std::size_t batch, length, channels, kernel;
};

// Parameters (read) and their gradients (accumulated into) of one layer.
struct LayerParams {
  const float *norm_w, *in_w, *conv_w, *conv_b, *dt_bias, *A_log, *D, *gnorm_w, *out_w;
  float *g_norm_w, *g_in_w, *g_conv_w, *g_conv_b, *g_dt_bias, *g_A_log, *g_D, *g_gnorm_w,
      *g_out_w;
};

struct Params {
  const float *embed_w, *embed_b, *norm_f_w, *head_w, *head_b;
  float *g_embed_w, *g_embed_b, *g_norm_f_w, *g_head_w, *g_head_b;
  std::vector<LayerParams> layers;
};

// Saved activations and scratch, sized for max_batch (rows = max_batch * L).
struct LayerBuffers {
  float* h;        // [rows, D] the block's input (norm input)
  float* u;        // [rows, D] RMSNorm(h) * w
  float* rstd;     // [rows]
  float* proj;     // [rows, W]
  float* xbc;      // [rows, C] SiLU(conv(xBC))
  float* y;        // [rows, di] SSD output
  float* yn;       // [rows, di] gated norm output
  float* rstd_g;   // [rows]
  float* states;   // [max_batch, H, chunks - 1, P, N] or null
  float* part_norm;   // [norm_blocks(rows), D]
  float* part_gnorm;  // [norm_blocks(rows), di]
  float* part_ssd;    // [3, max_batch, H]
};

struct Buffers {
  std::vector<LayerBuffers> layers;
  float* out;         // [rows, D] a block's out_proj output
  float* h_last;      // [max_batch, D]
  float* rstd_f;      // [max_batch]
  float* dh;          // [rows, D]
  float* dyn;         // [rows, di]
  float* dy;          // [rows, di]
  float* dproj;       // [rows, W]
  float* dxbc;        // [rows, C]
  float* dbc_heads;   // [H, rows, 2N]
  float* du;          // [rows, D]
  float* conv_scratch;
  std::size_t conv_scratch_floats;
  float* part_head_w;   // [max_batch, O * D]
  float* part_head_b;   // [max_batch, O]
  float* part_norm_f;   // [max_batch, D]
  float* part_embed_b;  // [norm_blocks(rows), D]
};

// Lays Buffers out in one float arena (each piece 64-float aligned): call with base = nullptr
// to size it (returns the float count), then again with the arena.
std::size_t layout_buffers(const Mamba2Dims& d, std::size_t conv_scratch_floats, float* base,
                           Buffers* out);

// prediction [batch, O] from x [batch, L, F].
template <class Backend>
void forward_pass(Backend& be, const Mamba2Dims& d, const Params& p, const Buffers& buf,
                  const float* x, int batch, float* prediction) {
  const int R = batch * d.L;
  // embed: h0 [R, D] = x We^T (the bias is added by layer 0's norm)
  be.gemm(true, false, d.D, R, d.F, p.embed_w, d.F, x, d.F, 0.0f, buf.layers[0].h, d.D);
  for (int l = 0; l < d.layers; ++l) {
    const LayerParams& lp = p.layers[static_cast<std::size_t>(l)];
    const LayerBuffers& lb = buf.layers[static_cast<std::size_t>(l)];
    km::ResidualRmsNormForwardArgs norm;
    norm.h_out = lb.h;
    norm.u = lb.u;
    norm.rstd = lb.rstd;
    norm.h_in = l == 0 ? lb.h : buf.layers[static_cast<std::size_t>(l - 1)].h;
    norm.delta = l == 0 ? nullptr : buf.out;
    norm.bias = l == 0 ? p.embed_b : nullptr;
    norm.weight = lp.norm_w;
    norm.rows = R;
    norm.cols = d.D;
    norm.eps = kNormEps;
    be.run(norm);
    // proj [R, W] = u Win^T
    be.gemm(true, false, d.W, R, d.D, lp.in_w, d.D, lb.u, d.D, 0.0f, lb.proj, d.W);
    be.conv_forward(ConvForward{lb.xbc, static_cast<std::size_t>(d.C), lb.proj + d.di,
                                static_cast<std::size_t>(d.W), lp.conv_w, lp.conv_b,
                                static_cast<std::size_t>(batch), static_cast<std::size_t>(d.L),
                                static_cast<std::size_t>(d.C), static_cast<std::size_t>(d.K)});
    km::SsdForwardArgs ssd;
    ssd.dims = km::SsdDims{batch, d.L, d.H, d.P, d.N, d.Q, d.C, d.W};
    ssd.y = lb.y;
    ssd.states = lb.states;
    ssd.xbc = lb.xbc;
    ssd.dt_raw = lb.proj + d.di + d.C;
    ssd.dt_bias = lp.dt_bias;
    ssd.A_log = lp.A_log;
    ssd.D = lp.D;
    be.run(ssd);
    km::GatedRmsNormForwardArgs gate;
    gate.yn = lb.yn;
    gate.rstd = lb.rstd_g;
    gate.y = lb.y;
    gate.z = lb.proj;
    gate.weight = lp.gnorm_w;
    gate.rows = R;
    gate.cols = d.di;
    gate.z_stride = d.W;
    gate.eps = kNormEps;
    be.run(gate);
    // out [R, D] = yn Wout^T
    be.gemm(true, false, d.D, R, d.di, lp.out_w, d.di, lb.yn, d.di, 0.0f, buf.out, d.D);
  }
  km::LastStepHeadForwardArgs head;
  head.pred = prediction;
  head.h_last = buf.h_last;
  head.rstd = buf.rstd_f;
  head.h_prev = buf.layers.back().h;
  head.delta = buf.out;
  head.norm_w = p.norm_f_w;
  head.head_w = p.head_w;
  head.head_b = p.head_b;
  head.batch = batch;
  head.length = d.L;
  head.d_model = d.D;
  head.outputs = d.O;
  head.eps = kNormEps;
  be.run(head);
}

// Adds dLoss/dparams into the gradient views, from d_prediction [batch, O] and the saved
// activations of the last forward_pass (same x, same batch).
template <class Backend>
void backward_pass(Backend& be, const Mamba2Dims& d, const Params& p, const Buffers& buf,
                   const float* x, const float* d_prediction, int batch) {
  const int R = batch * d.L;
  const int nb = km::norm_blocks(R);
  km::LastStepHeadBackwardArgs head;
  head.dh = buf.dh;
  head.partial_head_w = buf.part_head_w;
  head.partial_head_b = buf.part_head_b;
  head.partial_norm_w = buf.part_norm_f;
  head.dpred = d_prediction;
  head.h_last = buf.h_last;
  head.rstd = buf.rstd_f;
  head.norm_w = p.norm_f_w;
  head.head_w = p.head_w;
  head.batch = batch;
  head.length = d.L;
  head.d_model = d.D;
  head.outputs = d.O;
  be.run(head);
  for (int l = d.layers - 1; l >= 0; --l) {
    const LayerParams& lp = p.layers[static_cast<std::size_t>(l)];
    const LayerBuffers& lb = buf.layers[static_cast<std::size_t>(l)];
    // out = yn Wout^T with d out = dh: dyn [R, di] = dh Wout; dWout += dh^T yn
    be.gemm(false, false, d.di, R, d.D, lp.out_w, d.di, buf.dh, d.D, 0.0f, buf.dyn, d.di);
    be.gemm(false, true, d.di, d.D, R, lb.yn, d.di, buf.dh, d.D, 1.0f, lp.g_out_w, d.di);
    km::GatedRmsNormBackwardArgs gate;
    gate.dy = buf.dy;
    gate.dz = buf.dproj;
    gate.partial_weight = lb.part_gnorm;
    gate.dyn = buf.dyn;
    gate.y = lb.y;
    gate.z = lb.proj;
    gate.rstd = lb.rstd_g;
    gate.weight = lp.gnorm_w;
    gate.rows = R;
    gate.cols = d.di;
    gate.z_stride = d.W;
    gate.dz_stride = d.W;
    be.run(gate);
    km::SsdBackwardArgs ssd;
    ssd.dims = km::SsdDims{batch, d.L, d.H, d.P, d.N, d.Q, d.C, d.W};
    ssd.dxbc = buf.dxbc;
    ssd.dbc_heads = buf.dbc_heads;
    ssd.ddt_raw = buf.dproj + d.di + d.C;
    ssd.partials = lb.part_ssd;
    ssd.dy = buf.dy;
    ssd.xbc = lb.xbc;
    ssd.dt_raw = lb.proj + d.di + d.C;
    ssd.dt_bias = lp.dt_bias;
    ssd.A_log = lp.A_log;
    ssd.D = lp.D;
    ssd.states = lb.states;
    be.run(ssd);
    km::BcHeadSumArgs bc;
    bc.dxbc = buf.dxbc;
    bc.dbc_heads = buf.dbc_heads;
    bc.rows = R;
    bc.heads = d.H;
    bc.width = 2 * d.N;
    bc.stride = d.C;
    bc.col0 = d.di;
    be.run(bc);
    be.conv_backward(ConvBackward{buf.dproj + d.di, static_cast<std::size_t>(d.W), lp.g_conv_w,
                                  lp.g_conv_b, buf.conv_scratch, buf.conv_scratch_floats, buf.dxbc,
                                  static_cast<std::size_t>(d.C), lb.proj + d.di,
                                  static_cast<std::size_t>(d.W), lp.conv_w, lp.conv_b,
                                  static_cast<std::size_t>(batch), static_cast<std::size_t>(d.L),
                                  static_cast<std::size_t>(d.C), static_cast<std::size_t>(d.K)});
    // proj = u Win^T: du [R, D] = dproj Win; dWin += dproj^T u
    be.gemm(false, false, d.D, R, d.W, lp.in_w, d.D, buf.dproj, d.W, 0.0f, buf.du, d.D);
    be.gemm(false, true, d.D, d.W, R, lb.u, d.D, buf.dproj, d.W, 1.0f, lp.g_in_w, d.D);
    km::ResidualRmsNormBackwardArgs norm;
    norm.dh = buf.dh;
    norm.partial_weight = lb.part_norm;
    norm.partial_dh = l == 0 ? buf.part_embed_b : nullptr;
    norm.du = buf.du;
    norm.h = lb.h;
    norm.rstd = lb.rstd;
    norm.weight = lp.norm_w;
    norm.rows = R;
    norm.cols = d.D;
    be.run(norm);
  }
  // embed: h0 = x We^T + be: dWe += dh^T x (dbe from layer 0's partial_dh)
  be.gemm(false, true, d.F, d.D, R, x, d.F, buf.dh, d.D, 1.0f, p.g_embed_w, d.F);
  // Fixed storage (no allocation on the hot path): 5 segments per layer (<= 32 layers) + 4.
  std::array<km::PartialSegment, 5 * 32 + 4> segments{};
  std::size_t count = 0;
  const auto push = [&](const km::PartialSegment& s) { segments[count++] = s; };
  for (int l = 0; l < d.layers; ++l) {
    const LayerParams& lp = p.layers[static_cast<std::size_t>(l)];
    const LayerBuffers& lb = buf.layers[static_cast<std::size_t>(l)];
    const int bh = batch * d.H;
    push({lb.part_norm, lp.g_norm_w, nb, d.D});
    push({lb.part_gnorm, lp.g_gnorm_w, nb, d.di});
    push({lb.part_ssd, lp.g_A_log, batch, d.H});
    push({lb.part_ssd + bh, lp.g_D, batch, d.H});
    push({lb.part_ssd + 2 * bh, lp.g_dt_bias, batch, d.H});
  }
  push({buf.part_norm_f, p.g_norm_f_w, batch, d.D});
  push({buf.part_head_w, p.g_head_w, batch, d.O * d.D});
  push({buf.part_head_b, p.g_head_b, batch, d.O});
  push({buf.part_embed_b, p.g_embed_b, nb, d.D});
  be.partials_sum(std::span<const km::PartialSegment>(segments.data(), count));
}

}  // namespace resident::models::mamba2
