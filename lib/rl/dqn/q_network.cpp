#include "lib/rl/dqn/q_network.h"

#include <string>
#include <utility>

#include "kernels/rl/dqn/dueling_head.h"
#include "kernels/core/error.h"

namespace resident::dqn {

namespace {

nn::MlpConfig mlp_config(const QNetworkShape& shape) {
  if (shape.observation_size == 0 || shape.action_count == 0)
    throw Error("QNetwork", "invalid shape", "observation_size and action_count must be >= 1",
                __FILE__, __LINE__);
  std::vector<std::size_t> widths;
  widths.push_back(shape.observation_size);
  widths.insert(widths.end(), shape.hidden.begin(), shape.hidden.end());
  widths.push_back(shape.action_count + (shape.dueling ? 1 : 0));
  return nn::MlpConfig{.widths = std::move(widths), .name = std::string(1, 'q')};
}

}  // namespace

QNetwork::QNetwork(const QNetworkShape& shape, std::size_t max_batch, nn::ParamSlab& slab)
    : shape_(shape), max_batch_(max_batch), mlp_(mlp_config(shape), max_batch, slab) {
  if (shape_.dueling) {
    q_ = DeviceBuffer<float>(max_batch * shape_.action_count);
    d_head_ = DeviceBuffer<float>(max_batch * (shape_.action_count + 1));
  }
}

void QNetwork::bind(std::uint64_t seed, cudaStream_t stream) {
  if (arena_ != nullptr)
    throw Error("QNetwork::bind", "already bound", "bind() is called once", __FILE__, __LINE__);
  ScratchPlan plan;
  mlp_.plan(plan);
  arena_ = std::make_unique<ScratchArena>(plan.bytes());
  mlp_.bind(*arena_);
  mlp_.init_parameters(seed, stream);
}

const float* QNetwork::forward(const StreamContext& context, const float* x, std::size_t batch) {
  const float* head = mlp_.forward(context, x, batch);
  if (!shape_.dueling) return head;
  kernels::dqn::launch_dueling_forward(q_.data(), head, batch, shape_.action_count,
                                       context.stream());
  return q_.data();
}

void QNetwork::backward(const StreamContext& context, const float* x, const float* d_values,
                        std::size_t batch, nn::GradMode mode) {
  const float* dy = d_values;
  if (shape_.dueling) {
    kernels::dqn::launch_dueling_backward(d_head_.data(), d_values, batch, shape_.action_count,
                                          context.stream());
    dy = d_head_.data();
  }
  mlp_.backward(context, x, dy, nullptr, batch, mode);
}

}  // namespace resident::dqn
