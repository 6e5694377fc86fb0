// Bitwise comparison of host vectors for GPU tests (NaN payloads and signed zeros included), and
// a plain blocking download of device memory into a host vector.
#pragma once

#include <cuda_runtime_api.h>
#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

namespace resident::test {

// Equal bits element for element; the failure names `what`, the first differing index, both
// values and the size.
template <class T>
::testing::AssertionResult same_bits(const std::vector<T>& got, const std::vector<T>& want,
                                     const std::string& what) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << what << ": size " << got.size() << " vs "
                                         << want.size();
  for (std::size_t i = 0; i < got.size(); ++i)
    if (std::memcmp(&got[i], &want[i], sizeof(T)) != 0)
      return ::testing::AssertionFailure() << what << "[" << i << "]: " << +got[i] << " vs "
                                           << +want[i] << " (" << got.size() << " elements)";
  return ::testing::AssertionSuccess();
}

// count elements at `device` (blocking cudaMemcpy; throws std::runtime_error on failure).
template <class T>
std::vector<T> download(const T* device, std::size_t count) {
  std::vector<T> host(count);
  if (count != 0 &&
      cudaMemcpy(host.data(), device, count * sizeof(T), cudaMemcpyDeviceToHost) != cudaSuccess)
    throw std::runtime_error("download of " + std::to_string(count) + " elements failed");
  return host;
}

}  // namespace resident::test
