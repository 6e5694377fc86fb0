// ScalarReadback returns a value computed on the device, for 4- and 8-byte types, and can be
// reused; the host slot is poisoned before each read so a missing copy shows.
#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

#include "lib/core/device_buffer.h"
#include "lib/core/scalar_readback.h"
#include "lib/core/stream.h"
#include "tests/support/gpu.h"

namespace {

// Single-thread sum in index order: deterministic, so the CPU sum in the same order matches.
template <class T>
__global__ void ordered_sum(T* out, const T* in, int n) {
  T acc = 0;
  for (int i = 0; i < n; ++i) acc += in[i];
  *out = acc;
}

template <class T>
void check_readback_of_sum(std::uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> dist(-1000, 1000);
  resident::Stream stream;
  resident::ScalarReadback<T> readback;
  for (int n : {1, 17, 4096}) {
    std::vector<T> host(static_cast<std::size_t>(n));
    T expected = 0;
    for (T& x : host) {
      x = static_cast<T>(dist(rng)) / static_cast<T>(8);
      expected += x;
    }
    resident::DeviceBuffer<T> in(host.size());
    resident::DeviceBuffer<T> out(1);
    in.upload(host);
    ordered_sum<<<1, 1, 0, stream.get()>>>(out.data(), in.data(), n);
    ASSERT_EQ(cudaGetLastError(), cudaSuccess);
    readback.enqueue(out.data(), stream.get());
    EXPECT_EQ(readback.wait(), expected) << "n=" << n;
  }
}

TEST(ScalarReadback, ReturnsDeviceComputedFloat) {
  RESIDENT_REQUIRE_GPU();
  check_readback_of_sum<float>(7);
}

TEST(ScalarReadback, ReturnsDeviceComputedDouble) {
  RESIDENT_REQUIRE_GPU();
  check_readback_of_sum<double>(8);
}

TEST(ScalarReadback, ReturnsDeviceComputedInt64) {
  RESIDENT_REQUIRE_GPU();
  check_readback_of_sum<std::int64_t>(9);
}

}  // namespace
