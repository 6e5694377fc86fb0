// Host-side values and copies shared by the model GPU tests (tests/models/<model>/*_test.cu).
// Contracts:
//   - random_values(n, low, high, rng): n doubles, each one std::uniform_real_distribution<double>
//     (low, high) draw from rng, in order (the draw sequence every model test's seeds rely on);
//   - to_float / to_double: element-wise conversions (float rounding to nearest);
//   - device_copy(host): a device buffer of host.size() elements holding host (a blocking upload,
//     so the buffer is ready on any stream when it returns).
#pragma once

#include <cstddef>
#include <random>
#include <vector>

#include "lib/core/device_buffer.h"

namespace resident::test {

inline std::vector<double> random_values(std::size_t n, double low, double high,
                                         std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(low, high);
  std::vector<double> v(n);
  for (double& x : v) x = u(rng);
  return v;
}

inline std::vector<float> to_float(const std::vector<double>& v) { return {v.begin(), v.end()}; }
inline std::vector<double> to_double(const std::vector<float>& v) { return {v.begin(), v.end()}; }

template <class T>
DeviceBuffer<T> device_copy(const std::vector<T>& host) {
  DeviceBuffer<T> b(host.size());
  b.upload(host);
  return b;
}

}  // namespace resident::test
