#include "tests/replay/gpu_replay_test_support.h"

#include "lib/core/error.h"

namespace resident::test {

namespace {
template <class T>
std::vector<T> copy_back(const T* device, std::size_t n) {
  std::vector<T> host(n);
  if (n > 0) RESIDENT_CUDA_CHECK(cudaMemcpy(host.data(), device, n * sizeof(T), cudaMemcpyDeviceToHost));
  return host;
}
}  // namespace

HostSample download(const DeviceSampledBatch& b, std::size_t dim) {
  RESIDENT_CUDA_CHECK(cudaDeviceSynchronize());
  HostSample s;
  s.indices = copy_back(b.indices, b.batch);
  s.generations = copy_back(b.generations, b.batch);
  s.weights = copy_back(b.is_weights, b.batch);
  s.states = copy_back(b.states, b.batch * dim);
  s.next_states = copy_back(b.next_states, b.batch * dim);
  s.actions = copy_back(b.actions, b.batch);
  s.rewards = copy_back(b.rewards, b.batch);
  s.dones = copy_back(b.dones, b.batch);
  return s;
}

}  // namespace resident::test
