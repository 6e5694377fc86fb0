// ScratchCarver: a model's scratch sized and then taken by one walk over its buffers, so the
// plan and the layout cannot drift apart:
//   const auto walk = [&](ScratchCarver& carve) { a = carve(n); b = carve(m); ... };
//   ScratchCarver plan(nullptr);  walk(plan);           // counts only: every piece is nullptr
//   arena = std::make_unique<ScratchArena>(plan.bytes());
//   ScratchCarver take(arena.get());  walk(take);       // the same pieces, 256-byte aligned
// Pieces taken from an arena are filled with NaN bits (0xFF bytes) at setup (a synchronous
// cudaMemset), so a kernel that reads scratch it never wrote fails its test instead of reading
// zeros. Setup only: never on a hot path.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "kernels/core/error.h"
#include "lib/core/scratch_arena.h"

namespace resident {

class ScratchCarver {
 public:
  explicit ScratchCarver(ScratchArena* arena) : arena_(arena) {}
  float* operator()(std::size_t count) {
    if (arena_ == nullptr) {
      plan_.add<float>(count);
      return nullptr;
    }
    float* p = arena_->take<float>(count);
    if (p != nullptr) RESIDENT_CUDA_CHECK(cudaMemset(p, 0xFF, count * sizeof(float)));
    return p;
  }
  // Bytes the walk asked for (plan mode).
  std::size_t bytes() const { return plan_.bytes(); }

 private:
  ScratchArena* arena_;
  ScratchPlan plan_;
};

}  // namespace resident
