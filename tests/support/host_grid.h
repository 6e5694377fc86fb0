// emulate_host_grid<HostBlock>(blocks, threads, smem_floats, body): runs a block program (a
// kernel body written for DeviceBlock/HostBlock, kernels/models/mamba2/block_program.cuh) for
// every block of a grid on the host, one block after another, calling body(block, smem). The
// block's shared memory (smem_floats floats, at least one) is filled with NaN before each
// block, so a program that reads shared memory it has not written in this block gets NaN.
#pragma once

#include <algorithm>
#include <cstddef>
#include <limits>
#include <vector>

namespace resident::test {

template <class HostBlock, class Body>
void emulate_host_grid(long long blocks, int threads, long long smem_floats, Body body) {
  std::vector<float> smem(static_cast<std::size_t>(smem_floats > 0 ? smem_floats : 1));
  for (long long b = 0; b < blocks; ++b) {
    std::fill(smem.begin(), smem.end(), std::numeric_limits<float>::quiet_NaN());
    HostBlock block{static_cast<unsigned>(b), static_cast<unsigned>(threads)};
    body(block, smem.data());
  }
}

}  // namespace resident::test
