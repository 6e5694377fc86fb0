// The GPU model's forward and backward sequence (lib/models/mamba2/mamba2_pipeline.h) run on the
// host: every kernel's block program executed by HostBlock (the same code the GPU runs, phase
// by phase), the GEMMs by a plain implementation of cuBLAS' column-major sgemm semantics, the
// conv by the kit op's element functions. Compared with the double reference at tiny configs,
// one chunk and several, with the activation arena poisoned (NaN) and the gradients starting
// from random values (the backward must add). Checks the wiring on a machine without a GPU; the
// GPU test (mamba2_model_test) checks the same on the device.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <random>
#include <span>
#include <string>
#include <vector>

#include "kernels/models/mamba2/bc_head_sum.cuh"
#include "kernels/models/mamba2/last_step_head.cuh"
#include "kernels/models/mamba2/partials_sum.cuh"
#include "kernels/models/mamba2/row_norms.cuh"
#include "kernels/models/mamba2/ssd_backward.cuh"
#include "kernels/models/mamba2/ssd_forward.cuh"
#include "kernels/nn/causal_conv1d.cuh"
#include "lib/models/mamba2/mamba2_pipeline.h"
#include "tests/models/mamba2/mamba2_test_support.h"
#include "tests/reference/mamba2_reference.h"
#include "tests/support/host_grid.h"

namespace {

namespace km = resident::kernels::mamba2;
namespace mm = resident::models::mamba2;
namespace ref = resident::reference;
namespace tm = resident::test::mamba2;
using resident::models::Mamba2Config;
using resident::models::ModelShape;

template <class Body>
void emulate_grid(long long blocks, int threads, long long smem_floats, Body body) {
  resident::test::emulate_host_grid<km::HostBlock>(blocks, threads, smem_floats, body);
}

class HostBackend {
 public:
  void gemm(bool ta, bool tb, int m, int n, int k, const float* A, int lda, const float* B,
            int ldb, float beta, float* C, int ldc) {
    for (int j = 0; j < n; ++j)
      for (int i = 0; i < m; ++i) {
        double acc = 0.0;
        for (int l = 0; l < k; ++l) {
          const float a = ta ? A[l + static_cast<long long>(i) * lda] : A[i + static_cast<long long>(l) * lda];
          const float b = tb ? B[j + static_cast<long long>(l) * ldb] : B[l + static_cast<long long>(j) * ldb];
          acc += static_cast<double>(a) * b;
        }
        float& c = C[i + static_cast<long long>(j) * ldc];
        c = static_cast<float>(acc) + (beta != 0.0f ? beta * c : 0.0f);
      }
  }
  void run(const km::ResidualRmsNormForwardArgs& a) {
    emulate_grid(km::norm_blocks(a.rows), km::kNormThreads, km::kNormSharedFloats,
                 [&](km::HostBlock& b, float* s) { km::residual_rms_norm_forward_block(b, a, s); });
  }
  void run(const km::ResidualRmsNormBackwardArgs& a) {
    emulate_grid(km::norm_blocks(a.rows), km::kNormThreads, km::kNormSharedFloats,
                 [&](km::HostBlock& b, float* s) { km::residual_rms_norm_backward_block(b, a, s); });
  }
  void run(const km::GatedRmsNormForwardArgs& a) {
    emulate_grid(km::norm_blocks(a.rows), km::kNormThreads, km::kNormSharedFloats,
                 [&](km::HostBlock& b, float* s) { km::gated_rms_norm_forward_block(b, a, s); });
  }
  void run(const km::GatedRmsNormBackwardArgs& a) {
    emulate_grid(km::norm_blocks(a.rows), km::kNormThreads, km::kNormSharedFloats,
                 [&](km::HostBlock& b, float* s) { km::gated_rms_norm_backward_block(b, a, s); });
  }
  void run(const km::SsdForwardArgs& a) {
    const km::SsdDims& d = a.dims;
    emulate_grid(d.batch * d.heads, km::kSsdThreads,
                 km::ssd_forward_shared_floats(d.chunk, d.headdim, d.d_state),
                 [&](km::HostBlock& b, float* s) { km::ssd_forward_block(b, a, s); });
  }
  void run(const km::SsdBackwardArgs& a) {
    const km::SsdDims& d = a.dims;
    emulate_grid(d.batch * d.heads, km::kSsdThreads,
                 km::ssd_backward_shared_floats(d.chunk, d.headdim, d.d_state),
                 [&](km::HostBlock& b, float* s) { km::ssd_backward_block(b, a, s); });
  }
  void run(const km::BcHeadSumArgs& a) {
    emulate_grid(km::bc_head_sum_blocks(a), km::kBcHeadSumThreads, 0,
                 [&](km::HostBlock& b, float*) { km::bc_head_sum_block(b, a); });
  }
  void run(const km::LastStepHeadForwardArgs& a) {
    emulate_grid(a.batch, km::kHeadThreads, km::last_step_head_shared_floats(a.d_model),
                 [&](km::HostBlock& b, float* s) { km::last_step_head_forward_block(b, a, s); });
  }
  void run(const km::LastStepHeadBackwardArgs& a) {
    emulate_grid(a.batch, km::kHeadThreads, km::last_step_head_shared_floats(a.d_model),
                 [&](km::HostBlock& b, float* s) { km::last_step_head_backward_block(b, a, s); });
  }
  void conv_forward(const mm::ConvForward& c) {
    const resident::kernels::causal_conv::View v{c.u, static_cast<long long>(c.u_stride), c.weight,
                                                 c.bias, static_cast<int>(c.length),
                                                 static_cast<int>(c.kernel), true};
    for (std::size_t b = 0; b < c.batch; ++b)
      for (std::size_t t = 0; t < c.length; ++t)
        for (std::size_t ch = 0; ch < c.channels; ++ch)
          c.y[(b * c.length + t) * c.y_stride + ch] = resident::kernels::causal_conv::forward(
              v, static_cast<long long>(b), static_cast<int>(t), static_cast<int>(ch));
  }
  void conv_backward(const mm::ConvBackward& c) {
    namespace cc = resident::kernels::causal_conv;
    const cc::View v{c.u, static_cast<long long>(c.u_stride), c.weight, c.bias,
                     static_cast<int>(c.length), static_cast<int>(c.kernel), true};
    const int K = static_cast<int>(c.kernel);
    for (std::size_t ch = 0; ch < c.channels; ++ch) {
      std::vector<float> dw(c.kernel, 0.0f);
      float db = 0.0f;
      for (std::size_t b = 0; b < c.batch; ++b)
        for (std::size_t t = 0; t < c.length; ++t) {
          const auto bb = static_cast<long long>(b);
          const int tt = static_cast<int>(t), cc_ = static_cast<int>(ch);
          const std::size_t row = b * c.length + t;
          c.du[row * c.du_stride + ch] = cc::du(v, c.dy, static_cast<long long>(c.dy_stride), bb, tt, cc_);
          const float dp = cc::dpre(v, bb, tt, cc_, c.dy[row * c.dy_stride + ch]);
          db += dp;
          for (int k = 0; k < K; ++k) {
            const int src = tt - K + 1 + k;
            if (src >= 0) dw[static_cast<std::size_t>(k)] += dp * c.u[(b * c.length + static_cast<std::size_t>(src)) * c.u_stride + ch];
          }
        }
      for (int k = 0; k < K; ++k) c.dweight[ch * c.kernel + static_cast<std::size_t>(k)] += dw[static_cast<std::size_t>(k)];
      c.dbias[ch] += db;
    }
  }
  void partials_sum(std::span<const km::PartialSegment> segments) {
    for (std::size_t first = 0; first < segments.size(); first += km::kMaxPartialSegments) {
      km::PartialsSumArgs args;
      for (std::size_t i = first; i < segments.size() && args.count < km::kMaxPartialSegments; ++i)
        args.segments[args.count++] = segments[i];
      const int blocks = km::partials_sum_plan(args);
      emulate_grid(blocks, km::kPartialThreads, km::kPartialThreads,
                   [&](km::HostBlock& b, float* s) { km::partials_sum_block(b, args, s); });
    }
  }
};

ref::Mamba2Dims reference_dims(const Mamba2Config& c, const ModelShape& s) {
  ref::Mamba2Dims d;
  d.window = s.window;
  d.features = s.features;
  d.outputs = s.outputs;
  d.d_model = c.d_model;
  d.n_layers = c.n_layers;
  d.expand = c.expand;
  d.headdim = c.headdim;
  d.d_state = c.d_state;
  d.d_conv = c.d_conv;
  d.chunk = c.chunk;
  return d;
}

struct HostTensors {
  std::map<std::string, std::vector<float>> params, grads, grads0;
};

mm::Params bind(HostTensors& t, int layers) {
  auto p = [&](const std::string& n) -> const float* { return t.params.at(n).data(); };
  auto g = [&](const std::string& n) { return t.grads.at(n).data(); };
  mm::Params out{};
  out.embed_w = p("embed.weight");
  out.embed_b = p("embed.bias");
  out.norm_f_w = p("norm_f.weight");
  out.head_w = p("head.weight");
  out.head_b = p("head.bias");
  out.g_embed_w = g("embed.weight");
  out.g_embed_b = g("embed.bias");
  out.g_norm_f_w = g("norm_f.weight");
  out.g_head_w = g("head.weight");
  out.g_head_b = g("head.bias");
  for (int l = 0; l < layers; ++l) {
    const std::string pre = "layers." + std::to_string(l) + ".";
    mm::LayerParams lp{};
    lp.norm_w = p(pre + "norm.weight");
    lp.in_w = p(pre + "mixer.in_proj.weight");
    lp.conv_w = p(pre + "mixer.conv1d.weight");
    lp.conv_b = p(pre + "mixer.conv1d.bias");
    lp.dt_bias = p(pre + "mixer.dt_bias");
    lp.A_log = p(pre + "mixer.A_log");
    lp.D = p(pre + "mixer.D");
    lp.gnorm_w = p(pre + "mixer.norm.weight");
    lp.out_w = p(pre + "mixer.out_proj.weight");
    lp.g_norm_w = g(pre + "norm.weight");
    lp.g_in_w = g(pre + "mixer.in_proj.weight");
    lp.g_conv_w = g(pre + "mixer.conv1d.weight");
    lp.g_conv_b = g(pre + "mixer.conv1d.bias");
    lp.g_dt_bias = g(pre + "mixer.dt_bias");
    lp.g_A_log = g(pre + "mixer.A_log");
    lp.g_D = g(pre + "mixer.D");
    lp.g_gnorm_w = g(pre + "mixer.norm.weight");
    lp.g_out_w = g(pre + "mixer.out_proj.weight");
    out.layers.push_back(lp);
  }
  return out;
}

// fp32 pipeline vs double reference.
constexpr double kRtol = 1e-3;
constexpr double kAtol = 1e-4;

void run_case(const Mamba2Config& config, const ModelShape& shape, int batch, std::uint64_t seed) {
  const ref::Mamba2Dims rd = reference_dims(config, shape);
  std::mt19937_64 rng(seed);
  ref::Mamba2Params rp = tm::random_params(rd, rng);
  const std::vector<double> x = tm::random_values(static_cast<std::size_t>(batch) * shape.window * shape.features, -1, 1, rng);
  const std::vector<double> up = tm::random_values(static_cast<std::size_t>(batch) * shape.outputs, -1, 1, rng);

  HostTensors t;
  for (auto& [name, tensor] : ref::mamba2_named_tensors(rp)) {
    t.params[name].assign(tensor->begin(), tensor->end());
    const std::vector<double> g0 = tm::random_values(tensor->size(), -1, 1, rng);
    t.grads[name].assign(g0.begin(), g0.end());
    t.grads0[name] = t.grads[name];
  }
  const mm::Mamba2Dims d = mm::Mamba2Dims::from(config, shape);
  const mm::Params params = bind(t, d.layers);
  const std::size_t conv_scratch = 1;  // the host conv needs none
  std::vector<float> arena(mm::layout_buffers(d, conv_scratch, nullptr, nullptr),
                           std::numeric_limits<float>::quiet_NaN());
  mm::Buffers buffers;
  mm::layout_buffers(d, conv_scratch, arena.data(), &buffers);

  const std::vector<float> xf(x.begin(), x.end()), upf(up.begin(), up.end());
  std::vector<float> pred(static_cast<std::size_t>(batch) * shape.outputs,
                          std::numeric_limits<float>::quiet_NaN());
  HostBackend be;
  mm::forward_pass(be, d, params, buffers, xf.data(), batch, pred.data());
  mm::backward_pass(be, d, params, buffers, xf.data(), upf.data(), batch);

  const std::vector<double> want = ref::mamba2_forward(rd, rp, x, static_cast<std::size_t>(batch));
  ref::Mamba2Gradients g = ref::mamba2_backward(rd, rp, x, static_cast<std::size_t>(batch), up);
  std::printf("L %zu chunk %zu batch %d layers %zu D %zu headdim %zu d_state %zu:\n",
              shape.window, config.chunk, batch, config.n_layers, config.d_model, config.headdim,
              config.d_state);
  const tm::Agreement pa = tm::agreement(pred, want, kRtol, kAtol);
  tm::print_agreement("prediction", pa, kRtol, kAtol);
  EXPECT_LE(pa.share, 1.0) << "prediction element " << pa.worst;
  for (auto& [name, tensor] : ref::mamba2_named_tensors(g.params)) {
    std::vector<double> added(tensor->size());
    for (std::size_t i = 0; i < added.size(); ++i)
      added[i] = static_cast<double>(t.grads[name][i]) - t.grads0[name][i];
    const tm::Agreement a = tm::agreement(added, *tensor, kRtol, kAtol);
    tm::print_agreement(name, a, kRtol, kAtol);
    EXPECT_LE(a.share, 1.0) << name << " element " << a.worst << ": got " << added[a.worst]
                            << ", want " << (*tensor)[a.worst];
  }
}

Mamba2Config tiny_config(std::size_t chunk) {
  Mamba2Config c;
  c.d_model = 8;
  c.n_layers = 2;
  c.expand = 2;
  c.headdim = 4;
  c.d_state = 3;
  c.d_conv = 4;
  c.chunk = chunk;
  return c;
}

TEST(Mamba2PipelineEmulation, TinyOneChunk) {
  run_case(tiny_config(64), ModelShape{5, 3, 2, 4}, 2, 61);
}

TEST(Mamba2PipelineEmulation, TinyChunked) {
  run_case(tiny_config(2), ModelShape{5, 3, 2, 4}, 2, 62);
  run_case(tiny_config(3), ModelShape{7, 3, 1, 4}, 3, 63);
}

TEST(Mamba2PipelineEmulation, WiderOddSizes) {
  Mamba2Config c;
  c.d_model = 12;
  c.n_layers = 3;
  c.expand = 2;
  c.headdim = 8;
  c.d_state = 5;
  c.d_conv = 3;
  c.chunk = 7;
  run_case(c, ModelShape{19, 5, 3, 3}, 3, 64);  // 3 chunks, the last partial; batch 3 < max 3
  c.chunk = 64;
  run_case(c, ModelShape{37, 5, 1, 40}, 1, 65);  // rows = 37: a partial norm block, batch 1
}

}  // namespace
