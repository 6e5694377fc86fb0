// A tiny SupervisedModel for the trainer's tests: a linear map of the flattened window,
//   prediction[b, o] = bias[o] + sum_k weight[o, k] x[b, k],   k over L * F,
// with plain deterministic kernels (one thread per output in forward, one per weight in
// backward, sums in index order). Parameters from a seeded uniform(-1/sqrt(K), 1/sqrt(K)).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "lib/models/supervised_model.h"

namespace resident::test {

// `name` lets a test build a model of another name with the same shape (checkpoint mismatch).
std::unique_ptr<models::SupervisedModel> make_linear_window_model(const models::ModelShape& shape,
                                                                  std::uint64_t seed,
                                                                  std::string name = "test-linear");

}  // namespace resident::test
