// Fused AdamW over the slab. adamw_update<kClip>: kClip first has every block reduce the global
// norm's fp64 partials itself (global_norm_finish.cuh: the order of launch_global_norm's finish
// pass, so every block derives the same bits) to the norm and the clip scale. Then thread 0 of
// each block reads the device step once and forms, in fp64 and rounded once to fp32, the bias
// corrections 1 - beta^t, lr_t (adamw_lr_at) and the decay factor 1 - lr_t * weight_decay (the
// product rounded before the subtraction, as the host rounds it: no contraction into an FMA).
// The update: grid-stride over float4 groups (params, m, v, grads as float4, the mask as uchar4),
// then the n % 4 tail elements by the first threads of the grid. Last, thread 0 of each block
// takes a ticket (atomicInc on the done counter, wrapping to 0 on the last ticket); the block with
// the last ticket, when every block has read the step and the scale, writes step + 1 (the value
// it read, plus one), the clip scale 1 and, with kClip, the norm. One thread per element, no
// float reductions across blocks, and the ticket only picks who writes values that every block
// computed alike: bit-for-bit reproducible.
#include <algorithm>
#include <cstdint>
#include <string>

#include "kernels/nn/adamw.h"
#include "kernels/nn/adamw_element.cuh"
#include "kernels/nn/global_norm.h"
#include "kernels/nn/global_norm_finish.cuh"
#include "kernels/core/error.h"
#include "kernels/core/nvtx_range.h"

namespace resident::kernels {

namespace {

constexpr unsigned kBlock = 256;
constexpr unsigned kMaxGrid = 2048;  // grid-stride beyond ~2 waves of an H200
static_assert(kBlock == global_norm_detail::kFinishThreads,
              "the clip's partial reduction needs the finish pass's block size");

struct BlockFactors {
  adamw_detail::StepFactors step;
  float norm;                // kClip only
  std::uint64_t step_count;  // as read before the advance
};

// The clip inputs of adamw_update<true> (unused by <false>).
struct ClipArgs {
  float* norm = nullptr;
  const double* partials = nullptr;
  unsigned count = 0;
  float max_norm = 0.0f;
};

template <bool kClip>
__global__ void __launch_bounds__(kBlock)
    adamw_update(float* __restrict__ params, float* __restrict__ m, float* __restrict__ v,
                 std::uint64_t* step, float* grad_scale, unsigned int* done_counter,
                 ClipArgs clip, const float* __restrict__ grads,
                 const std::uint8_t* __restrict__ decay_mask, std::size_t n, AdamWConstants c) {
  __shared__ BlockFactors shared;
  global_norm_detail::NormAndScale clipped{0.0f, 1.0f};
  if constexpr (kClip) {
    __shared__ global_norm_detail::FinishSum::TempStorage temp;
    clipped = global_norm_detail::finish(clip.partials, clip.count, clip.max_norm, temp);
  }
  if (threadIdx.x == 0) {
    const std::uint64_t s = *step;
    float scale;
    if constexpr (kClip)
      scale = clipped.scale;
    else
      scale = grad_scale != nullptr ? *grad_scale : 1.0f;
    shared.step = adamw_detail::step_factors(c, s, scale);
    shared.norm = clipped.norm;
    shared.step_count = s;
  }
  __syncthreads();
  const BlockFactors f = shared;
  adamw_detail::update_range(params, m, v, grads, decay_mask, n,
                             blockIdx.x * std::size_t{blockDim.x} + threadIdx.x,
                             std::size_t{gridDim.x} * blockDim.x, c, f.step);

  if (threadIdx.x == 0) {
    __threadfence();  // this block's reads of *step and *grad_scale come before its ticket
    if (atomicInc(done_counter, gridDim.x - 1) == gridDim.x - 1) {  // wraps *done_counter to 0
      __threadfence();  // every other block's ticket, and so its reads, come before these writes
      *step = f.step_count + 1;
      if (grad_scale != nullptr) *grad_scale = 1.0f;
      if constexpr (kClip) *clip.norm = f.norm;
    }
  }
}

void require(bool condition, const char* op, const char* error, const std::string& detail,
             int line) {
  if (!condition) throw Error(op, error, detail, __FILE__, line);
}

void require_aligned(const void* ptr, std::size_t alignment, const char* op, const char* name) {
  require(reinterpret_cast<std::uintptr_t>(ptr) % alignment == 0, op, "misaligned argument",
          std::string(name) + " must be " + std::to_string(alignment) + "-byte aligned", __LINE__);
}

// Checks the arguments shared by both launchers; returns the grid.
unsigned update_grid(const float* params, const float* m, const float* v,
                     const std::uint64_t* step, const unsigned int* done_counter,
                     const float* grads, const std::uint8_t* decay_mask, std::size_t n,
                     const char* op) {
  require(step != nullptr && done_counter != nullptr, op, "invalid argument",
          std::string(step == nullptr ? "step" : "done_counter") + " is null", __LINE__);
  if (n > 0) {
    require_aligned(params, 16, op, "params");
    require_aligned(m, 16, op, "m");
    require_aligned(v, 16, op, "v");
    require_aligned(grads, 16, op, "grads");
    require_aligned(decay_mask, 4, op, "decay_mask");
  }
  const std::size_t threads = std::max<std::size_t>(n / 4, 1);
  return static_cast<unsigned>(std::min<std::size_t>((threads + kBlock - 1) / kBlock, kMaxGrid));
}

}  // namespace

void launch_adamw(float* params, float* m, float* v, std::uint64_t* step, float* grad_scale,
                  unsigned int* done_counter, const float* grads, const std::uint8_t* decay_mask,
                  std::size_t n, const AdamWConstants& constants, cudaStream_t stream) {
  const NvtxRange range("nn/adamw");
  const unsigned grid =
      update_grid(params, m, v, step, done_counter, grads, decay_mask, n, "launch_adamw");
  adamw_update<false><<<grid, kBlock, 0, stream>>>(params, m, v, step, grad_scale, done_counter,
                                                   ClipArgs{}, grads, decay_mask, n, constants);
  RESIDENT_CHECK_LAUNCH("adamw_update");
}

void launch_clip_adamw(float* params, float* m, float* v, std::uint64_t* step, float* norm,
                       float* grad_scale, double* norm_partials, unsigned int* done_counter,
                       const float* grads, const std::uint8_t* decay_mask, std::size_t n,
                       float max_norm, const AdamWConstants& constants, cudaStream_t stream) {
  const NvtxRange range("nn/clip_adamw");
  const unsigned grid =
      update_grid(params, m, v, step, done_counter, grads, decay_mask, n, "launch_clip_adamw");
  require(norm != nullptr && norm_partials != nullptr, "launch_clip_adamw", "invalid argument",
          std::string(norm == nullptr ? "norm" : "norm_partials") + " is null", __LINE__);
  require(max_norm > 0.0f, "launch_clip_adamw", "invalid argument",
          "max_norm = " + std::to_string(max_norm) + ", must be > 0", __LINE__);
  launch_global_norm_partials(norm_partials, grads, n, stream);
  const ClipArgs clip{norm, norm_partials, static_cast<unsigned>(global_norm_partial_count(n)),
                      max_norm};
  adamw_update<true><<<grid, kBlock, 0, stream>>>(params, m, v, step, grad_scale, done_counter,
                                                  clip, grads, decay_mask, n, constants);
  RESIDENT_CHECK_LAUNCH("adamw_update");
}

}  // namespace resident::kernels
