// Diagnostics for a kernel's phases: block 0's thread 0 writes %globaltimer (ns) to
// times[slot++] at each mark() when times is set; null (the default in every launcher) turns it
// off at the cost of one uniform branch per mark. Readings of one launch: the caller's buffer
// holds one per mark the kernel makes (its launcher's comment says how many).
#pragma once

#include <cstdint>

namespace resident::kernels {

struct PhaseClock {
  std::uint64_t* times;
  int slot = 0;

  __device__ __forceinline__ void mark() {
    if (times != nullptr && blockIdx.x == 0 && threadIdx.x == 0) {
      std::uint64_t now;
      asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
      times[slot] = now;
    }
    ++slot;
  }
};

}  // namespace resident::kernels
