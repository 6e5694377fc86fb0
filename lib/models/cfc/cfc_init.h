// Initial parameters of the Liquid CfC model (ncps' CfCCell.init_weights and torch.nn.Linear's
// defaults), made on the host in double from one seeded std::mt19937_64 and stored as float.
// Setup only. In this draw order:
//   backbone weight [U, F + H]   xavier_uniform (fan_in F + H, fan_out U), split by columns into
//                                backbone.input_weight [U, F] and backbone.recurrent_weight [U, H]
//   backbone.bias [U]            U(-1/sqrt(F + H), 1/sqrt(F + H))
//   heads.weight [heads * H, U]  each head's [H, U] block xavier_uniform (fan_in U, fan_out H), in
//                                the order ff1, ff2, time_a, time_b
//   heads.bias [heads * H]       U(-1/sqrt(U), 1/sqrt(U))
//   w_tau [H] = 0, A [H] = 1     (pure mode; no draws)
//   readout.weight [outputs, H]  U(-1/sqrt(H), 1/sqrt(H)) (kaiming_uniform(a = sqrt(5)))
//   readout.bias [outputs]       U(-1/sqrt(H), 1/sqrt(H))
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "lib/models/cfc/cfc_config.h"

namespace resident::models {

// The slab tensors' names, shapes and weight-decay flags, in slab order (2-D weights decay; the
// biases, w_tau and A do not).
struct CfcTensorSpec {
  std::string name;
  std::vector<std::size_t> shape;
  bool decay = false;
};
std::vector<CfcTensorSpec> cfc_tensor_specs(const CfcConfig& config, const ModelShape& shape);

// The initial values of every tensor of cfc_tensor_specs, in that order.
std::vector<std::vector<float>> cfc_initial_values(const CfcConfig& config,
                                                   const ModelShape& shape, std::uint64_t seed);

}  // namespace resident::models
