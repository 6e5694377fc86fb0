// The fused MLP train step (contract in mlp_train_step_fused.h). One cooperative kernel of
// kThreads-thread blocks; every phase hands its tiles to the blocks round robin (tile t to block
// t mod grid) and ends at a grid barrier, after which its outputs (global memory, L2-resident at
// these sizes) are visible to every block. Each buffer is written in one phase and read only in
// later ones. Phases, for L layers:
//   forward l = 1 .. L-1  z_l, a_l in 32 x 32 tiles (tile_product: K = widths[l-1])
//   head                  8-row tiles, one warp per row: y (lane-strided dot products reduced by
//                         a shuffle tree), dy, the tile's loss partial, dz_{L-1} = (dy W_L) f'(z)
//   backward l = L-1 .. 1 dW_l (K = batch; bias gradient as the A operand's row sums in the
//                         tiles of column 0) and, for l > 1, dz_{l-1}; the last one also dW_L,
//                         db_L. Each thread adds the squares of the gradients it wrote (fp64) to
//                         its sum; the block's sum (cub::BlockReduce) is its norm partial.
//   optimizer             every block reduces the partials in the order of
//                         global_norm_finish.cuh to the norm and clip scale, then updates its
//                         grid-stride share of the slab (adamw_element.cuh); block 0 writes the
//                         loss (its partials in tile order), the norm, the step + 1 and scale 1.
// The step counter is read by every block before the first barrier and written after the last,
// so no block can read the advanced value. A tile's product (32 x 32 outputs): four groups of
// 64 threads each sum a quarter of every 64-k shared-memory chunk (both operands stored k-major,
// rows padded to 36 floats) into 4 x 4 blocks, then the groups' sums are added in a fixed order;
// chunks are loaded through registers so that a chunk's loads are all in flight together and the
// next chunk's overlap the products.
#include <cooperative_groups.h>

#include <algorithm>
#include <cstdint>
#include <string>

#include "kernels/nn/fused_step_phases.cuh"
#include "kernels/nn/mlp_train_step_fused.h"
#include "kernels/core/error.h"
#include "kernels/core/nvtx_range.h"

namespace resident::kernels {

namespace {

namespace cg = cooperative_groups;
using namespace fused_step;

struct Args {
  float* loss;
  FusedStepMlp mlp;
  FusedStepScratch scratch;
  FusedStepOptimizer opt;
  const float* x;
  const float* target;
  int batch;
  float d_scale;     // 2 / (batch * out)
  double divisor;    // batch * out
};

// The MSE head for rows [8 t, 8 t + 8), one warp per row: y = a_{L-1} W_L^T + b_L (lane o holds
// output o, with its bias and target loaded before the sums), dy = d_scale (y - target), the
// tile's loss partial (the rows' squared errors, o ascending, rows in order), then
// dz_{L-1} = (dy W_L) * f'(z_{L-1}).
template <ActivationKind Kind>
__device__ void head_tile(const Args& p, int t, float (*head_dy)[kMaxOut], float* head_loss) {
  constexpr unsigned kAll = 0xffffffffu;
  const int L = static_cast<int>(p.mlp.layers);
  const int in = static_cast<int>(p.mlp.widths[L - 1]), out = static_cast<int>(p.mlp.widths[L]);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int row = t * kHeadRows + warp;
  const float* w = p.mlp.weights[L - 1];
  float row_loss = 0.0f;
  if (row < p.batch) {
    const std::size_t out_base = static_cast<std::size_t>(row) * out;
    float bias = 0.0f, target = 0.0f, square_error = 0.0f;
    if (lane < out) {
      bias = p.mlp.biases[L - 1][lane];
      target = p.target[out_base + lane];
    }
    const float dot = warp_output_dots(
        p.scratch.activations[L - 2] + static_cast<std::size_t>(row) * in, w, in, out);
    if (lane < out) {
      const float d = (dot + bias) - target;
      const float g = p.d_scale * d;
      p.scratch.d_pre_activations[L - 1][out_base + lane] = g;
      head_dy[warp][lane] = g;
      square_error = d * d;
    }
    for (int o = 0; o < out; ++o) row_loss += __shfl_sync(kAll, square_error, o);
    __syncwarp();
    const std::size_t base = static_cast<std::size_t>(row) * in;
    warp_head_backward<Kind>(p.scratch.d_pre_activations[L - 2] + base, head_dy[warp], w,
                             p.scratch.pre_activations[L - 2] + base, in, out,
                             p.mlp.hidden_activation);
  }
  finish_head_tile(row_loss, head_loss, p.scratch.loss_partials, t);  // then head_dy is free
}

template <ActivationKind Kind>
__global__ void __launch_bounds__(kThreads, 1) mlp_train_step_fused(const __grid_constant__ Args p) {
  begin_after_prior_kernel();
  __shared__ Chunks chunks;
  __shared__ float head_dy[kHeadRows][kMaxOut];
  __shared__ float head_loss[kHeadRows];
  __shared__ BlockSum::TempStorage reduce_temp;
  __shared__ adamw_detail::StepFactors factors;
  cg::grid_group grid = cg::this_grid();
  const Pass pass{&p.mlp, &p.scratch, p.x, p.batch};
  const int L = static_cast<int>(p.mlp.layers);
  const std::uint64_t step = *p.opt.step;  // before the first barrier; block 0 writes it last
  if (threadIdx.x == 0) factors = adamw_detail::step_factors(p.opt.constants, step, 1.0f);
  PhaseClock clock{p.scratch.phase_times};
  clock.mark();

  for (int l = 1; l < L; ++l) {
    const int tiles = forward_tiles(pass, l);
    for (int t = blockIdx.x; t < tiles; t += gridDim.x) forward_tile<Kind>(chunks, pass, l, t);
    grid.sync();
    clock.mark();
  }
  const int head_tiles = (p.batch + kHeadRows - 1) / kHeadRows;
  for (int t = blockIdx.x; t < head_tiles; t += gridDim.x) head_tile<Kind>(p, t, head_dy, head_loss);
  grid.sync();
  clock.mark();

  FirstGroup first;
  const float norm = backward_and_optimizer<Kind>(chunks, grid, pass, p.opt, p.scratch.norm_partials,
                                                  reduce_temp, factors, clock, first);
  finish_step(p.scratch, p.loss, p.divisor, head_tiles, p.opt, step, norm, clock);
}

// The most tiles any phase hands out.
std::size_t max_phase_tiles(std::span<const std::size_t> w, std::size_t batch) {
  std::size_t most = std::max(head_tiles_on_host(batch), most_backward_tiles(w, batch));
  for (std::size_t l = 1; l + 1 < w.size(); ++l) most = std::max(most, tiles_on_host(batch, w[l]));
  return most;
}

template <typename Launch>
void with_kernel(const Activation& activation, const char* op, Launch&& launch) {
  activation_math::dispatch(activation, op, [&](auto kind) {
    launch(&mlp_train_step_fused<decltype(kind)::value>);
  });
}

}  // namespace

bool fused_step_device_ok() {
  int device = 0, cooperative = 0;
  RESIDENT_CUDA_CHECK(cudaGetDevice(&device));
  RESIDENT_CUDA_CHECK(cudaDeviceGetAttribute(&cooperative, cudaDevAttrCooperativeLaunch, device));
  return cooperative != 0;
}

bool fused_step_supports(std::span<const std::size_t> widths) noexcept {
  if (widths.size() < 3 || widths.size() > kFusedStepMaxLayers + 1) return false;
  if (widths.back() > kFusedStepMaxOut) return false;
  for (const std::size_t w : widths)
    if (w == 0 || w > (1u << 20)) return false;
  return true;
}

std::size_t fused_step_split_tiles(std::span<const std::size_t> widths) noexcept {
  return last_backward_weight_tiles(widths);
}

std::size_t fused_step_split_partials(std::span<const std::size_t> widths) noexcept {
  return last_backward_weight_tiles(widths) * (kFusedStepMaxSplits - 1) * kSplitPartialFloats;
}

std::size_t fused_step_loss_partials(std::size_t batch) noexcept {
  return head_tiles_on_host(batch);
}

void check_fused_network(const char* op, const FusedStepMlp& mlp, const FusedStepScratch& scratch,
                         bool with_grads) {
  const auto fail = [op](const std::string& detail, int line) {
    throw Error(op, "invalid argument", detail, __FILE__, line);
  };
  if (mlp.layers < 2 || mlp.layers > kFusedStepMaxLayers)
    fail("layers = " + std::to_string(mlp.layers) + ", allowed 2 to " +
             std::to_string(kFusedStepMaxLayers), __LINE__);
  if (!fused_step_supports(std::span<const std::size_t>(mlp.widths, mlp.layers + 1)))
    fail("output width = " + std::to_string(mlp.widths[mlp.layers]) + ", allowed 1 to " +
             std::to_string(kFusedStepMaxOut) + " (and every width >= 1)", __LINE__);
  for (std::size_t l = 0; l < mlp.layers; ++l) {
    if (mlp.weights[l] == nullptr || mlp.biases[l] == nullptr ||
        (with_grads && (mlp.weight_grads[l] == nullptr || mlp.bias_grads[l] == nullptr)))
      fail("layer " + std::to_string(l) + ": a weight or bias view" +
               (with_grads ? " or their gradient" : "") + " is null", __LINE__);
    if (l + 1 < mlp.layers && (scratch.pre_activations[l] == nullptr || scratch.activations[l] == nullptr))
      fail("hidden layer " + std::to_string(l) + ": a z or a scratch view is null", __LINE__);
  }
}

void check_fused_step_views(const char* op, const FusedStepMlp& mlp,
                            const FusedStepScratch& scratch, const FusedStepOptimizer& optimizer,
                            std::size_t batch, unsigned grid) {
  const auto fail = [op](const std::string& detail, int line) {
    throw Error(op, "invalid argument", detail, __FILE__, line);
  };
  check_fused_network(op, mlp, scratch, /*with_grads=*/true);
  if (batch == 0 || batch > (1u << 24))
    fail("batch = " + std::to_string(batch) + ", allowed 1 to 2^24", __LINE__);
  if (grid == 0) fail("grid = 0 (use the step's grid function)", __LINE__);
  for (std::size_t l = 0; l < mlp.layers; ++l)
    if (scratch.d_pre_activations[l] == nullptr)
      fail("layer " + std::to_string(l) + ": the dz view is null", __LINE__);
  if (scratch.loss_partials == nullptr || scratch.norm_partials == nullptr)
    fail("the loss or norm partials are null", __LINE__);
  if ((scratch.split_partials == nullptr) != (scratch.split_counters == nullptr))
    fail(std::string("split_") + (scratch.split_partials == nullptr ? "partials" : "counters") +
             " is null and the other is not (both set: split-K on; both null: off)",
         __LINE__);
  if (optimizer.params == nullptr || optimizer.m == nullptr || optimizer.v == nullptr ||
      optimizer.grads == nullptr || optimizer.decay_mask == nullptr || optimizer.step == nullptr ||
      optimizer.norm == nullptr)
    fail("an optimizer view is null", __LINE__);
  for (const void* p : {static_cast<const void*>(optimizer.params), static_cast<const void*>(optimizer.m),
                        static_cast<const void*>(optimizer.v), static_cast<const void*>(optimizer.grads)})
    if (reinterpret_cast<std::uintptr_t>(p) % 16 != 0) fail("an optimizer array is not 16-byte aligned", __LINE__);
  if (reinterpret_cast<std::uintptr_t>(optimizer.decay_mask) % 4 != 0)
    fail("decay_mask is not 4-byte aligned", __LINE__);
  if (!(optimizer.max_norm > 0.0f))
    fail("max_norm = " + std::to_string(optimizer.max_norm) + ", must be > 0", __LINE__);
}

unsigned fused_step_grid(std::span<const std::size_t> widths, std::size_t batch,
                         const Activation& hidden_activation) {
  const char* op = "fused_step_grid";
  require_supported(op, widths, batch);
  unsigned grid = 0;
  with_kernel(hidden_activation, op, [&](auto kernel) {
    grid = cooperative_grid(kernel, max_phase_tiles(widths, batch), op);
  });
  return grid;
}

void launch_mlp_train_step_fused(float* loss, const FusedStepMlp& mlp,
                                 const FusedStepScratch& scratch,
                                 const FusedStepOptimizer& optimizer, const float* x,
                                 const float* target, std::size_t batch, unsigned grid,
                                 cudaStream_t stream) {
  const char* op = "launch_mlp_train_step_fused";
  const NvtxRange range("nn/mlp_train_step_fused");
  check_fused_step_views(op, mlp, scratch, optimizer, batch, grid);
  if (loss == nullptr || x == nullptr || target == nullptr)
    throw Error(op, "invalid argument",
                std::string(loss == nullptr ? "loss" : x == nullptr ? "x" : "target") + " is null",
                __FILE__, __LINE__);
  const double divisor = static_cast<double>(batch) * static_cast<double>(mlp.widths[mlp.layers]);
  const Args args{loss,   mlp,    scratch, optimizer, x, target, static_cast<int>(batch),
                  static_cast<float>(2.0 / divisor), divisor};
  with_kernel(mlp.hidden_activation, op,
              [&](auto kernel) { launch_cooperative(kernel, grid, args, stream); });
}

}  // namespace resident::kernels
