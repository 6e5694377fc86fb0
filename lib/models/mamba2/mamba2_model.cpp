#include "lib/models/mamba2/mamba2_model.h"

#include <cmath>
#include <random>
#include <span>
#include <vector>

#include "kernels/core/error.h"
#include "kernels/core/grad_mode.h"
#include "kernels/core/nvtx_range.h"
#include "kernels/nn/causal_conv1d.h"
#include "lib/core/library_checks.h"

namespace resident::models {

namespace {

namespace km = kernels::mamba2;
using mamba2::Mamba2Dims;

// The pipeline's Backend on the GPU: cuBLAS and the kernels' launchers, on one stream.
class GpuBackend {
 public:
  explicit GpuBackend(const StreamContext& context) : context_(context) {
    RESIDENT_CUBLAS_CHECK(cublasSetPointerMode(context_.cublas(), CUBLAS_POINTER_MODE_HOST));
  }

  void gemm(bool transa, bool transb, int m, int n, int k, const float* A, int lda,
            const float* B, int ldb, float beta, float* C, int ldc) {
    const float one = 1.0f;
    RESIDENT_CUBLAS_CHECK(cublasSgemm(context_.cublas(), transa ? CUBLAS_OP_T : CUBLAS_OP_N,
                                      transb ? CUBLAS_OP_T : CUBLAS_OP_N, m, n, k, &one, A, lda,
                                      B, ldb, &beta, C, ldc));
  }
  void run(const km::ResidualRmsNormForwardArgs& a) {
    km::launch_residual_rms_norm_forward(a, stream());
  }
  void run(const km::ResidualRmsNormBackwardArgs& a) {
    km::launch_residual_rms_norm_backward(a, stream());
  }
  void run(const km::GatedRmsNormForwardArgs& a) { km::launch_gated_rms_norm_forward(a, stream()); }
  void run(const km::GatedRmsNormBackwardArgs& a) {
    km::launch_gated_rms_norm_backward(a, stream());
  }
  void run(const km::SsdForwardArgs& a) { km::launch_ssd_forward(a, stream()); }
  void run(const km::SsdBackwardArgs& a) { km::launch_ssd_backward(a, stream()); }
  void run(const km::BcHeadSumArgs& a) { km::launch_bc_head_sum(a, stream()); }
  void run(const km::LastStepHeadForwardArgs& a) { km::launch_last_step_head_forward(a, stream()); }
  void run(const km::LastStepHeadBackwardArgs& a) {
    km::launch_last_step_head_backward(a, stream());
  }
  void conv_forward(const mamba2::ConvForward& c) {
    kernels::launch_causal_conv1d_forward(c.y, c.y_stride, c.u, c.u_stride, c.weight, c.bias,
                                          c.batch, c.length, c.channels, c.kernel, true,
                                          stream());
  }
  void conv_backward(const mamba2::ConvBackward& c) {
    kernels::launch_causal_conv1d_backward(c.du, c.du_stride, c.dweight, c.dbias, c.scratch,
                                           c.scratch_floats, c.dy, c.dy_stride, c.u, c.u_stride,
                                           c.weight, c.bias, c.batch, c.length, c.channels,
                                           c.kernel, true, nn::GradMode::Accumulate, stream());
  }
  void partials_sum(std::span<const km::PartialSegment> segments) {
    km::launch_partials_sum(segments, stream());
  }

 private:
  cudaStream_t stream() const { return context_.stream(); }
  const StreamContext& context_;
};

std::size_t device_shared_limit() {
  int device = 0;
  RESIDENT_CUDA_CHECK(cudaGetDevice(&device));
  int limit = 0;
  RESIDENT_CUDA_CHECK(
      cudaDeviceGetAttribute(&limit, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  return static_cast<std::size_t>(limit);
}

struct TensorSpec {
  std::string name;
  std::vector<std::size_t> shape;
  bool decay;
};

std::vector<TensorSpec> tensor_specs(const Mamba2Config& c, const ModelShape& s) {
  const std::size_t D = c.d_model, di = c.d_inner(), H = c.heads(), C = c.conv_channels();
  std::vector<TensorSpec> t;
  t.push_back({"embed.weight", {D, s.features}, true});
  t.push_back({"embed.bias", {D}, false});
  for (std::size_t l = 0; l < c.n_layers; ++l) {
    const std::string pre = "layers." + std::to_string(l) + ".";
    t.push_back({pre + "norm.weight", {D}, false});
    t.push_back({pre + "mixer.in_proj.weight", {c.proj_width(), D}, true});
    t.push_back({pre + "mixer.conv1d.weight", {C, c.d_conv}, true});
    t.push_back({pre + "mixer.conv1d.bias", {C}, false});
    t.push_back({pre + "mixer.dt_bias", {H}, false});
    t.push_back({pre + "mixer.A_log", {H}, false});
    t.push_back({pre + "mixer.D", {H}, false});
    t.push_back({pre + "mixer.norm.weight", {di}, false});
    t.push_back({pre + "mixer.out_proj.weight", {D, di}, true});
  }
  t.push_back({"norm_f.weight", {D}, false});
  t.push_back({"head.weight", {s.outputs, D}, true});
  t.push_back({"head.bias", {s.outputs}, false});
  return t;
}

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Initial values of one tensor (contract in mamba2_model.h), drawn from `rng`.
std::vector<float> initial_values(const TensorSpec& t, const Mamba2Config& c,
                                  const ModelShape& s, std::mt19937_64& rng) {
  std::size_t n = 1;
  for (std::size_t v : t.shape) n *= v;
  std::vector<float> out(n);
  auto uniform = [&](double bound) {
    std::uniform_real_distribution<double> u(-bound, bound);
    for (float& v : out) v = static_cast<float>(u(rng));
  };
  if (ends_with(t.name, "norm.weight") || ends_with(t.name, "mixer.D") ||
      t.name == "norm_f.weight") {
    for (float& v : out) v = 1.0f;
  } else if (ends_with(t.name, "A_log")) {
    std::uniform_real_distribution<double> u(1.0, 16.0);
    for (float& v : out) v = static_cast<float>(std::log(u(rng)));
  } else if (ends_with(t.name, "dt_bias")) {
    std::uniform_real_distribution<double> u(std::log(1e-3), std::log(0.1));
    for (float& v : out) {
      const double dt = std::max(std::exp(u(rng)), 1e-4);
      v = static_cast<float>(dt + std::log(-std::expm1(-dt)));
    }
  } else if (t.name == "embed.weight" || t.name == "embed.bias") {
    uniform(1.0 / std::sqrt(static_cast<double>(s.features)));
  } else if (ends_with(t.name, "in_proj.weight") || t.name == "head.weight" ||
             t.name == "head.bias") {
    uniform(1.0 / std::sqrt(static_cast<double>(c.d_model)));
  } else if (ends_with(t.name, "conv1d.weight") || ends_with(t.name, "conv1d.bias")) {
    uniform(1.0 / std::sqrt(static_cast<double>(c.d_conv)));
  } else if (ends_with(t.name, "out_proj.weight")) {
    uniform(1.0 / std::sqrt(static_cast<double>(c.d_inner())));
  } else {
    throw Error("Mamba2Model", "no initializer", "tensor " + t.name, __FILE__, __LINE__);
  }
  return out;
}

}  // namespace

Mamba2Model::Mamba2Model(const Mamba2Config& config, const ModelShape& shape, std::uint64_t seed)
    : config_(config), shape_(shape) {
  validate_mamba2_config(config_, shape_, device_shared_limit());
  dims_ = Mamba2Dims::from(config_, shape_);
  km::ssd_configure_shared_memory(dims_.Q, dims_.P, dims_.N);

  const std::vector<TensorSpec> specs = tensor_specs(config_, shape_);
  for (const TensorSpec& t : specs) slab_.add(t.name, t.shape, t.decay);
  slab_.finalize();
  {
    Stream setup;
    std::mt19937_64 rng(seed);
    for (const TensorSpec& t : specs) {
      const std::vector<float> values = initial_values(t, config_, shape_, rng);
      slab_.upload(nn::SlabPart::Params, t.name, values, setup.get());
    }
    setup.synchronize();
  }

  auto p = [&](const std::string& name) -> const float* { return slab_.param(name); };
  auto g = [&](const std::string& name) { return slab_.grad(name); };
  params_.embed_w = p("embed.weight");
  params_.embed_b = p("embed.bias");
  params_.norm_f_w = p("norm_f.weight");
  params_.head_w = p("head.weight");
  params_.head_b = p("head.bias");
  params_.g_embed_w = g("embed.weight");
  params_.g_embed_b = g("embed.bias");
  params_.g_norm_f_w = g("norm_f.weight");
  params_.g_head_w = g("head.weight");
  params_.g_head_b = g("head.bias");
  for (std::size_t l = 0; l < config_.n_layers; ++l) {
    const std::string pre = "layers." + std::to_string(l) + ".";
    mamba2::LayerParams lp{};
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
    params_.layers.push_back(lp);
  }

  const std::size_t conv_scratch = kernels::causal_conv1d_backward_scratch_floats(
      shape_.max_batch, shape_.window, config_.conv_channels(), config_.d_conv);
  const std::size_t floats = mamba2::layout_buffers(dims_, conv_scratch, nullptr, nullptr);
  arena_ = DeviceBuffer<float>(floats);
  mamba2::layout_buffers(dims_, conv_scratch, arena_.data(), &buffers_);
}

std::string Mamba2Model::describe() const {
  return describe_mamba2_config(config_) + " window=" + std::to_string(shape_.window) +
         " features=" + std::to_string(shape_.features) +
         " outputs=" + std::to_string(shape_.outputs) +
         " params=" + std::to_string(slab_.total_elements());
}

void Mamba2Model::check_batch(const char* call, std::size_t batch) const {
  if (batch < 1 || batch > shape_.max_batch)
    throw Error(call, "invalid batch",
                "batch = " + std::to_string(batch) + ", allowed [1, " +
                    std::to_string(shape_.max_batch) + "]",
                __FILE__, __LINE__);
}

void Mamba2Model::forward(const StreamContext& context, const float* x, std::size_t batch,
                          float* prediction) {
  check_batch("Mamba2Model::forward", batch);
  NvtxRange range("mamba2::forward");
  GpuBackend backend(context);
  mamba2::forward_pass(backend, dims_, params_, buffers_, x, static_cast<int>(batch), prediction);
}

void Mamba2Model::backward(const StreamContext& context, const float* x,
                           const float* d_prediction, std::size_t batch) {
  check_batch("Mamba2Model::backward", batch);
  NvtxRange range("mamba2::backward");
  GpuBackend backend(context);
  mamba2::backward_pass(backend, dims_, params_, buffers_, x, d_prediction,
                        static_cast<int>(batch));
}

std::unique_ptr<SupervisedModel> make_mamba2(const ModelShape& shape, std::uint64_t seed) {
  return std::make_unique<Mamba2Model>(Mamba2Config{}, shape, seed);
}

}  // namespace resident::models
