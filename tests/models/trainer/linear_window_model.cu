#include "tests/models/trainer/linear_window_model.h"

#include <cmath>
#include <random>
#include <vector>

#include "kernels/core/error.h"

namespace resident::test {

namespace {

__global__ void linear_forward(float* prediction, const float* x, const float* weight,
                               const float* bias, std::size_t batch, std::size_t k_count,
                               std::size_t outputs) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= batch * outputs) return;
  const std::size_t b = i / outputs, o = i % outputs;
  float sum = bias[o];
  for (std::size_t k = 0; k < k_count; ++k) sum += weight[o * k_count + k] * x[b * k_count + k];
  prediction[i] = sum;
}

// Thread (o, k) with k == k_count is the bias of output o. Accumulates into the grads.
__global__ void linear_backward(float* d_weight, float* d_bias, const float* x,
                                const float* d_prediction, std::size_t batch, std::size_t k_count,
                                std::size_t outputs) {
  const std::size_t i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= outputs * (k_count + 1)) return;
  const std::size_t o = i / (k_count + 1), k = i % (k_count + 1);
  float sum = 0.0f;
  for (std::size_t b = 0; b < batch; ++b)
    sum += d_prediction[b * outputs + o] * (k == k_count ? 1.0f : x[b * k_count + k]);
  if (k == k_count)
    d_bias[o] += sum;
  else
    d_weight[o * k_count + k] += sum;
}

unsigned blocks(std::size_t n) { return static_cast<unsigned>((n + 255) / 256); }

class LinearWindowModel final : public models::SupervisedModel {
 public:
  LinearWindowModel(const models::ModelShape& shape, std::uint64_t seed, std::string name)
      : shape_(shape), name_(std::move(name)), k_(shape.window * shape.features) {
    slab_.add("weight", {shape.outputs, k_}, true);
    slab_.add("bias", {shape.outputs}, false);
    slab_.finalize();
    std::mt19937_64 rng(seed);
    const double bound = 1.0 / std::sqrt(static_cast<double>(k_));
    std::uniform_real_distribution<double> u(-bound, bound);
    std::vector<float> w(shape.outputs * k_), b(shape.outputs);
    for (float& v : w) v = static_cast<float>(u(rng));
    for (float& v : b) v = static_cast<float>(u(rng));
    slab_.upload(nn::SlabPart::Params, "weight", w, nullptr);
    slab_.upload(nn::SlabPart::Params, "bias", b, nullptr);
  }

  std::string_view name() const noexcept override { return name_; }
  const models::ModelShape& shape() const noexcept override { return shape_; }
  std::string describe() const override {
    return "linear " + std::to_string(k_) + " -> " + std::to_string(shape_.outputs);
  }
  nn::ParamSlab& slab() noexcept override { return slab_; }

  void forward(const StreamContext& context, const float* x, std::size_t batch,
               float* prediction) override {
    check_batch(batch, "LinearWindowModel::forward");
    linear_forward<<<blocks(batch * shape_.outputs), 256, 0, context.stream()>>>(
        prediction, x, slab_.param("weight"), slab_.param("bias"), batch, k_, shape_.outputs);
    RESIDENT_CHECK_LAUNCH("linear_forward");
  }
  void backward(const StreamContext& context, const float* x, const float* d_prediction,
                std::size_t batch) override {
    check_batch(batch, "LinearWindowModel::backward");
    linear_backward<<<blocks(shape_.outputs * (k_ + 1)), 256, 0, context.stream()>>>(
        slab_.grad("weight"), slab_.grad("bias"), x, d_prediction, batch, k_, shape_.outputs);
    RESIDENT_CHECK_LAUNCH("linear_backward");
  }

 private:
  void check_batch(std::size_t batch, const char* call) const {
    if (batch == 0 || batch > shape_.max_batch)
      throw Error(call, "invalid argument",
                  "batch = " + std::to_string(batch) + ", allowed [1, " +
                      std::to_string(shape_.max_batch) + "]",
                  __FILE__, __LINE__);
  }

  models::ModelShape shape_;
  std::string name_;
  std::size_t k_;
  nn::ParamSlab slab_;
};

}  // namespace

std::unique_ptr<models::SupervisedModel> make_linear_window_model(const models::ModelShape& shape,
                                                                  std::uint64_t seed,
                                                                  std::string name) {
  return std::make_unique<LinearWindowModel>(shape, seed, std::move(name));
}

}  // namespace resident::test
