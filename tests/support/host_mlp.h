// HostMlp: a trained lib/nn Mlp evaluated on the host, for tests that play a policy on data the
// GPU never saw (tests/support/trading_policy_eval.h). download_mlp() copies the layers of an Mlp
// called `name` out of its ParamSlab (test phase: blocking).
#pragma once

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/core/error.h"
#include "lib/nn/param_slab.h"

namespace resident::test {

// y = W x + b per layer (weights [out, in] row-major, as lib/nn's Mlp), the hidden activation
// after every layer but the last; greedy action = the first maximum of the output (logits or
// Q-values). Float math in the obvious order: it may differ from the GPU's GEMMs in the last
// bits, so a near tie can pick another action than the GPU would.
struct HostMlp {
  enum class Hidden { Tanh, Relu };  // the Mlp's hidden_activation (PPO: tanh; DQN: ReLU)

  Hidden hidden = Hidden::Tanh;
  std::vector<std::size_t> widths;          // {in, hidden..., out}
  std::vector<std::vector<float>> weights;  // [layers][out * in]
  std::vector<std::vector<float>> biases;   // [layers][out]

  std::int32_t greedy(const float* x) const {
    std::vector<float> in(x, x + widths.front()), out;
    for (std::size_t l = 0; l + 1 < widths.size(); ++l) {
      const std::size_t n_in = widths[l], n_out = widths[l + 1];
      out.assign(n_out, 0.0f);
      for (std::size_t o = 0; o < n_out; ++o) {
        float acc = biases[l][o];
        for (std::size_t i = 0; i < n_in; ++i) acc += weights[l][o * n_in + i] * in[i];
        if (l + 2 < widths.size())
          acc = hidden == Hidden::Tanh ? std::tanh(acc) : std::max(acc, 0.0f);
        out[o] = acc;
      }
      in.swap(out);
    }
    return static_cast<std::int32_t>(std::max_element(in.begin(), in.end()) - in.begin());
  }
};

// The layers "<name>.0.weight", "<name>.0.bias", "<name>.1.weight", ... of `slab` (as many as it
// holds; widths from the weight shapes; zero biases where it has none), after the work queued on
// `stream`. Throws
// resident::Error when the slab has no "<name>.0.weight" or a copy fails.
inline HostMlp download_mlp(const nn::ParamSlab& slab, const std::string& name,
                            HostMlp::Hidden hidden, cudaStream_t stream) {
  HostMlp net;
  net.hidden = hidden;
  RESIDENT_CUDA_CHECK(cudaStreamSynchronize(stream));
  const auto fetch = [&](const std::string& tensor) {
    std::vector<float> host(slab.size(tensor));
    RESIDENT_CUDA_CHECK(cudaMemcpy(host.data(), slab.param(tensor), host.size() * sizeof(float),
                                   cudaMemcpyDeviceToHost));
    return host;
  };
  for (std::size_t l = 0;; ++l) {
    const std::string prefix = name + "." + std::to_string(l);
    const nn::SlabTensor* w = slab.layout().find(prefix + ".weight");
    if (w == nullptr) break;
    if (l == 0) net.widths.push_back(w->shape.at(1));
    net.widths.push_back(w->shape.at(0));
    net.weights.push_back(fetch(prefix + ".weight"));
    net.biases.push_back(slab.layout().find(prefix + ".bias") != nullptr
                             ? fetch(prefix + ".bias")
                             : std::vector<float>(w->shape.at(0), 0.0f));  // an Mlp without bias
  }
  if (net.weights.empty())
    throw Error("download_mlp", "no such network", "the slab has no tensor " + name + ".0.weight",
                __FILE__, __LINE__);
  return net;
}

}  // namespace resident::test
