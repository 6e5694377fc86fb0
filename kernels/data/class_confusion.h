// Confusion counts of class logits against integer labels (kernels/data/class_confusion.cu): the
// validation bookkeeping of the supervised trainer's classification path.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace resident::kernels::data {

// confusion [classes, classes] (ACCUMULATED: the caller zeroes it before the first batch):
// confusion[label * classes + predicted] += 1 per row, predicted = the argmax of logits[r]
// (the first maximum on ties; a NaN logit is never a maximum, so a row of NaNs predicts 0);
// logits [rows, classes], labels [rows]; a row whose label is outside [0, classes) is not
// counted. Integer atomics: the counts are exact and order-free, so deterministic. Nothing
// allocated or synchronized (capturable). Throws resident::Error for rows == 0 or classes outside
// [2, 1024].
void launch_class_confusion(unsigned long long* confusion, const float* logits,
                            const std::int32_t* labels, std::size_t rows, std::size_t classes,
                            cudaStream_t stream);

}  // namespace resident::kernels::data
