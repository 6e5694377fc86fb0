#include "tests/replay/gpu_replay_test_support.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <sstream>

#include "kernels/core/error.h"

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

namespace {

struct NodeTriple {
  double sum, min_positive, max;
};

// The node `levels` binary levels above the stored nodes below it, combined as CpuSumTree::pull.
NodeTriple combine_down(const std::vector<double>& sum, const std::vector<double>& min_positive,
                        const std::vector<double>& max, std::size_t node, int levels) {
  if (levels == 0) return {sum[node], min_positive[node], max[node]};
  const NodeTriple l = combine_down(sum, min_positive, max, 2 * node, levels - 1);
  const NodeTriple r = combine_down(sum, min_positive, max, 2 * node + 1, levels - 1);
  return {l.sum + r.sum, std::fmin(l.min_positive, r.min_positive), std::fmax(l.max, r.max)};
}

}  // namespace

std::string kept_levels_mismatch(const std::vector<double>& sum,
                                 const std::vector<double>& min_positive,
                                 const std::vector<double>& max) {
  const std::size_t leaves = sum.size() / 2;
  if (min_positive.size() != sum.size() || max.size() != sum.size() || leaves == 0 ||
      (leaves & (leaves - 1)) != 0)
    return "tree arrays of " + std::to_string(sum.size()) + ", " +
           std::to_string(min_positive.size()) + " and " + std::to_string(max.size()) +
           " nodes; expected three of 2P, P a power of two";
  const int depth = std::countr_zero(leaves);
  constexpr int kStride = 5;  // kernels/replay/replay_tree.cuh's kKeptLevelStride
  for (int below = 0; below < depth;) {
    const int step = std::min(kStride, depth - below);
    const int height = below + step;
    for (std::size_t node = leaves >> height; node < (2 * leaves) >> height; ++node) {
      const NodeTriple want = combine_down(sum, min_positive, max, node, step);
      const auto describe = [&](const char* tree, double have, double expected) {
        std::ostringstream out;
        out.precision(17);
        out << tree << " tree node " << node << " (height " << height << "): " << have
            << ", its descendants at height " << below << " combine to " << expected;
        return out.str();
      };
      if (sum[node] != want.sum) return describe("sum", sum[node], want.sum);
      if (min_positive[node] != want.min_positive)
        return describe("min", min_positive[node], want.min_positive);
      if (max[node] != want.max) return describe("max", max[node], want.max);
    }
    below = height;
  }
  return "";
}

}  // namespace resident::test
