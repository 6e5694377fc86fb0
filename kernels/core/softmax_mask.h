// Which columns of a row a softmax sees (tests/reference/nn_reference.h defines the same rule).
//   None:   every column.
//   Causal: x [rows, cols] is a stack of [T, T] score matrices with T = cols (rows a multiple of
//           cols); row r sees columns c <= r % T. Masked outputs are exactly 0 (softmax) or
//           -infinity (log-softmax); masked inputs are never read and get a gradient of exactly 0.
#pragma once

namespace resident::nn {

enum class SoftmaxMask { None, Causal };

}  // namespace resident::nn
