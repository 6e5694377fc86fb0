// The model's parameters as the double reference's, for the model GPU tests: the reference must
// see the float values the GPU uses (its init, or random values rounded to float on upload).
// Contract: read_reference_params(slab, stream, params, tensors) downloads the slab's Params
// (blocking) and, for every (name, tensor) in tensors(params), sets the tensor's tensor.size()
// elements to the slab tensor `name`'s, from its offset; returns params. tensors(params) may
// yield the tensors by pointer (cfc_named_tensors, mamba2_named_tensors, ...) or by reference
// (XlstmParams::tensors); params comes in with every tensor sized (the reference's zero params).
//
// Contract: set_or_read_params(params, slab, random_parameters, rng, stream), for a vector of
// {name, values} tensors (TftTensor, TlobTensor) sized as the reference's zero params: with
// random_parameters, each tensor in order gets values U(0.7, 1.3) when its name holds "gamma"
// (LayerNorm scales near 1), else U(-0.5, 0.5) (harness_values.h's random_values, one draw per
// element), rounded to float, uploaded into the slab's Params under its name, and kept as the
// rounded values; without, each tensor gets the slab's own (init) values.
#pragma once

#include <cstddef>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "lib/nn/param_slab.h"
#include "tests/models/support/harness_values.h"

namespace resident::test {

inline std::vector<double>& reference_tensor(std::vector<double>& t) { return t; }
inline std::vector<double>& reference_tensor(std::vector<double>* t) { return *t; }

template <class Params, class Tensors>
Params read_reference_params(const nn::ParamSlab& slab, cudaStream_t stream, Params params,
                             Tensors&& tensors) {
  const std::vector<float> flat = slab.download(nn::SlabPart::Params, stream);
  for (auto& [name, tensor] : tensors(params)) {
    std::vector<double>& t = reference_tensor(tensor);
    const std::size_t offset = slab.layout().tensor(name).offset;
    for (std::size_t i = 0; i < t.size(); ++i) t[i] = flat[offset + i];
  }
  return params;
}

template <class Tensor>
void set_or_read_params(std::vector<Tensor>& params, nn::ParamSlab& slab, bool random_parameters,
                        std::mt19937_64& rng, cudaStream_t stream) {
  const std::vector<float> flat0 = slab.download(nn::SlabPart::Params, stream);
  for (Tensor& t : params) {
    if (random_parameters) {
      const bool gamma = t.name.find("gamma") != std::string::npos;
      t.values = gamma ? random_values(t.values.size(), 0.7, 1.3, rng)
                       : random_values(t.values.size(), -0.5, 0.5, rng);
      const std::vector<float> f = to_float(t.values);
      t.values.assign(f.begin(), f.end());
      slab.upload(nn::SlabPart::Params, t.name, f, stream);
    } else {
      const std::size_t offset = slab.layout().tensor(t.name).offset;
      for (std::size_t i = 0; i < t.values.size(); ++i) t.values[i] = flat0[offset + i];
    }
  }
}

}  // namespace resident::test
