#include "lib/models/kan/kan_model.h"

#include <cuda_runtime_api.h>

#include <string>

#include "kernels/core/error.h"
#include "kernels/core/nvtx_range.h"
#include "kernels/models/kan/kan_combined_weight.h"
#include "kernels/models/kan/kan_input_grad.h"
#include "kernels/models/kan/kan_operand.h"
#include "kernels/models/kan/kan_weight_grad_split.h"
#include "lib/core/library_checks.h"
#include "lib/models/kan/kan_init.h"

namespace resident::models {

static_assert(kKanMaxLayers == static_cast<std::size_t>(kernels::kan::kMaxLayers));
static_assert(kKanMaxSplineOrder == static_cast<std::size_t>(kernels::kan::kMaxSplineOrder));
static_assert(kKanMaxGridSize == static_cast<std::size_t>(kernels::kan::kMaxGridSize));

namespace {

const ModelShape& validated(const ModelShape& shape, const KanConfig& config) {
  validate_kan_config(config, shape);
  return shape;
}

kernels::kan::Grid make_grid(const KanConfig& c) {
  kernels::kan::Grid g;
  g.grid_min = static_cast<float>(c.grid_min);
  g.inv_h = static_cast<float>(static_cast<double>(c.grid_size) / (c.grid_max - c.grid_min));
  g.mid = static_cast<float>(0.5 * (c.grid_min + c.grid_max));
  g.half = static_cast<float>(0.5 * (c.grid_max - c.grid_min));
  g.grid_size = static_cast<int>(c.grid_size);
  g.order = static_cast<int>(c.spline_order);
  return g;
}

// Scratch elements of each buffer of one layer (0: not needed), in Layer's field order.
struct LayerSizes {
  std::size_t operand, saved_input, partials, combined, d_combined, d_operand, d_input;
};

LayerSizes layer_sizes(std::size_t l, std::size_t layers, std::size_t in, std::size_t out,
                       std::size_t k_width, std::size_t splits, std::size_t max_batch) {
  const bool first = l == 0, last = l + 1 == layers;
  return {max_batch * k_width,
          first ? 0 : max_batch * in,
          last ? 0 : splits * max_batch * out,
          out * k_width,
          out * k_width,
          first ? 0 : max_batch * k_width,
          first ? 0 : max_batch * in};
}

std::size_t scratch_bytes(const KanConfig& config, const ModelShape& shape) {
  const std::vector<std::size_t> widths = kan_layer_widths(config, shape);
  const std::size_t per_input = 1 + config.grid_size + config.spline_order;
  const std::size_t layers = widths.size() - 1;
  ScratchPlan plan;
  for (std::size_t l = 0; l < layers; ++l) {
    const std::size_t k_width = widths[l] * per_input;
    const LayerSizes s =
        layer_sizes(l, layers, widths[l], widths[l + 1], k_width,
                    kan_k_splits(config, k_width, l + 1 < layers), shape.max_batch);
    for (std::size_t n : {s.operand, s.saved_input, s.partials, s.combined, s.d_combined,
                          s.d_operand, s.d_input})
      plan.add<float>(n);
  }
  return plan.bytes();
}

int as_int(std::size_t n) { return static_cast<int>(n); }  // validated to fit

// A poisoned scratch region: every float NaN (all bits set), so unwritten reads show.
float* take_poisoned(ScratchArena& arena, std::size_t count) {
  float* p = arena.take<float>(count);
  if (p != nullptr) RESIDENT_CUDA_CHECK(cudaMemset(p, 0xFF, count * sizeof(float)));
  return p;
}

}  // namespace

std::string KanModel::tensor_name(std::size_t layer, KanTensor tensor) {
  const char* suffix = tensor == KanTensor::BaseWeight     ? "base_weight"
                       : tensor == KanTensor::SplineWeight ? "spline_weight"
                                                           : "spline_scaler";
  return "layer" + std::to_string(layer) + "." + suffix;
}

KanModel::KanModel(const ModelShape& shape, const KanConfig& config, std::uint64_t seed)
    : shape_(validated(shape, config)),
      config_(config),
      widths_(kan_layer_widths(config, shape)),
      grid_(make_grid(config)),
      arena_(scratch_bytes(config, shape)) {
  const std::size_t nb = config_.grid_size + config_.spline_order;
  const std::size_t count = widths_.size() - 1;
  for (std::size_t l = 0; l < count; ++l) {
    const std::size_t in = widths_[l], out = widths_[l + 1];
    slab_.add(tensor_name(l, KanTensor::BaseWeight), {out, in}, /*decay=*/true);
    slab_.add(tensor_name(l, KanTensor::SplineWeight), {out, in, nb}, /*decay=*/true);
    slab_.add(tensor_name(l, KanTensor::SplineScaler), {out, in}, /*decay=*/false);
  }
  slab_.finalize();
  const std::vector<KanLayerInit> init = kan_initial_values(config_, widths_, seed);
  for (std::size_t l = 0; l < count; ++l) {
    slab_.upload(nn::SlabPart::Params, tensor_name(l, KanTensor::BaseWeight), init[l].base_weight,
                 nullptr);
    slab_.upload(nn::SlabPart::Params, tensor_name(l, KanTensor::SplineWeight),
                 init[l].spline_weight, nullptr);
    slab_.upload(nn::SlabPart::Params, tensor_name(l, KanTensor::SplineScaler),
                 init[l].spline_scaler, nullptr);
  }

  table_.count = static_cast<int>(count);
  for (std::size_t l = 0; l < count; ++l) {
    Layer layer;
    layer.in = widths_[l];
    layer.out = widths_[l + 1];
    layer.k_width = layer.in * (1 + nb);
    layer.splits = kan_k_splits(config_, layer.k_width, l + 1 < count);
    const LayerSizes s = layer_sizes(l, count, layer.in, layer.out, layer.k_width, layer.splits,
                                     shape_.max_batch);
    layer.operand = take_poisoned(arena_, s.operand);
    layer.saved_input = take_poisoned(arena_, s.saved_input);
    layer.partials = take_poisoned(arena_, s.partials);
    layer.combined = take_poisoned(arena_, s.combined);
    layer.d_combined = take_poisoned(arena_, s.d_combined);
    layer.d_operand = take_poisoned(arena_, s.d_operand);
    layer.d_input = take_poisoned(arena_, s.d_input);
    layers_.push_back(layer);

    kernels::kan::LayerTensors& t = table_.layer[l];
    t.base_weight = slab_.param(tensor_name(l, KanTensor::BaseWeight));
    t.spline_weight = slab_.param(tensor_name(l, KanTensor::SplineWeight));
    t.spline_scaler = slab_.param(tensor_name(l, KanTensor::SplineScaler));
    t.d_base_weight = slab_.grad(tensor_name(l, KanTensor::BaseWeight));
    t.d_spline_weight = slab_.grad(tensor_name(l, KanTensor::SplineWeight));
    t.d_spline_scaler = slab_.grad(tensor_name(l, KanTensor::SplineScaler));
    t.combined = layer.combined;
    t.d_combined = layer.d_combined;
    t.in = as_int(layer.in);
    t.out = as_int(layer.out);
  }
  RESIDENT_CUDA_CHECK(cudaDeviceSynchronize());  // setup: the poisoning memsets are done
}

void KanModel::forward(const StreamContext& context, const float* x, std::size_t batch,
                       float* prediction) {
  if (batch < 1 || batch > shape_.max_batch)
    throw Error("KanModel::forward", "invalid argument",
                "batch = " + std::to_string(batch) + ", allowed [1, " +
                    std::to_string(shape_.max_batch) + "]",
                __FILE__, __LINE__);
  const NvtxRange range("kan/forward");
  const cudaStream_t stream = context.stream();
  const int nb = grid_.basis_count();
  kernels::kan::launch_kan_combined_weight(table_, nb, stream);
  RESIDENT_CUBLAS_CHECK(cublasSetPointerMode(context.cublas(), CUBLAS_POINTER_MODE_HOST));
  const float one = 1.0f, zero = 0.0f;
  const int rows = as_int(batch);
  for (std::size_t l = 0; l < layers_.size(); ++l) {
    const Layer& layer = layers_[l];
    const bool first = l == 0, last = l + 1 == layers_.size();
    const float* parts = first ? x : layers_[l - 1].partials;
    const std::size_t part_count = first ? 1 : layers_[l - 1].splits;
    kernels::kan::launch_kan_operand(layer.operand, first ? nullptr : layer.saved_input, parts,
                                     part_count, batch * layer.in, batch, layer.in, grid_, stream);
    // Row-major A [r, c] is the column-major [c, r] with leading dimension c:
    // y^T [out, batch] = combined [out, K] operand^T [K, batch].
    float* y = last ? prediction : layer.partials;
    const int out = as_int(layer.out), k_width = as_int(layer.k_width);
    if (layer.splits == 1) {
      RESIDENT_CUBLAS_CHECK(cublasSgemm(context.cublas(), CUBLAS_OP_T, CUBLAS_OP_N, out, rows,
                                        k_width, &one, layer.combined, k_width, layer.operand,
                                        k_width, &zero, y, out));
    } else {
      // Chunk s of K: partials[s] [batch, out] = operand[:, chunk s] combined[:, chunk s]^T.
      const int chunk = as_int(layer.k_width / layer.splits);
      RESIDENT_CUBLAS_CHECK(cublasSgemmStridedBatched(
          context.cublas(), CUBLAS_OP_T, CUBLAS_OP_N, out, rows, chunk, &one, layer.combined,
          k_width, chunk, layer.operand, k_width, chunk, &zero, y, out,
          static_cast<long long>(batch * layer.out), as_int(layer.splits)));
    }
  }
  last_batch_ = batch;
}

void KanModel::backward(const StreamContext& context, const float* x, const float* d_prediction,
                        std::size_t batch) {
  (void)x;  // the forward saved the operands; the first layer's input needs no gradient
  if (last_batch_ == 0 || batch != last_batch_)
    throw Error("KanModel::backward", "invalid argument",
                "batch = " + std::to_string(batch) + ", the last forward's batch is " +
                    (last_batch_ == 0 ? std::string("none (no forward ran)")
                                      : std::to_string(last_batch_)),
                __FILE__, __LINE__);
  const NvtxRange range("kan/backward");
  const cudaStream_t stream = context.stream();
  RESIDENT_CUBLAS_CHECK(cublasSetPointerMode(context.cublas(), CUBLAS_POINTER_MODE_HOST));
  const float one = 1.0f, zero = 0.0f;
  const int rows = as_int(batch);
  const float* dy = d_prediction;
  for (std::size_t l = layers_.size(); l-- > 0;) {
    const Layer& layer = layers_[l];
    const int out = as_int(layer.out), k_width = as_int(layer.k_width);
    // d_combined^T [K, out] = operand^T [K, batch] dy [batch, out]
    RESIDENT_CUBLAS_CHECK(cublasSgemm(context.cublas(), CUBLAS_OP_N, CUBLAS_OP_T, k_width, out,
                                      rows, &one, layer.operand, k_width, dy, out, &zero,
                                      layer.d_combined, k_width));
    if (l == 0) break;
    // d_operand^T [K, batch] = combined^T [K, out] dy^T [out, batch]
    RESIDENT_CUBLAS_CHECK(cublasSgemm(context.cublas(), CUBLAS_OP_N, CUBLAS_OP_N, k_width, rows,
                                      out, &one, layer.combined, k_width, dy, out, &zero,
                                      layer.d_operand, k_width));
    kernels::kan::launch_kan_input_grad(layer.d_input, layer.d_operand, layer.saved_input, batch,
                                        layer.in, grid_, stream);
    dy = layer.d_input;
  }
  kernels::kan::launch_kan_weight_grad_split(table_, grid_.basis_count(), stream);
}

std::unique_ptr<SupervisedModel> make_kan_model(const ModelShape& shape, std::uint64_t seed) {
  return std::make_unique<KanModel>(shape, KanConfig{}, seed);
}

}  // namespace resident::models
