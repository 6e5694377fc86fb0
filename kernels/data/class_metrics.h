// The classification epoch's summary on the device (kernels/data/class_metrics.cu): the two
// 8-byte values the supervised trainer reads back per epoch when its model classifies.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "kernels/data/epoch_metrics.h"

namespace resident::kernels::data {

// Two floats in one 8-byte readback slot.
struct FloatPair {
  float first;
  float second;
};

// One thread, after launch_finish_epoch:
//   summary[0] = {float(counters->train_mean), float(counters->validation_mean)}
//   summary[1] = {macro F1, accuracy} of confusion [classes, classes] (row = label, column =
//                prediction): F1_c = 2 tp / (2 tp + fp + fn) (0 for a class with no label and
//                no prediction), macro F1 = their mean, accuracy = trace / total (NaN for no
//                rows); formed in fp64 in class order, then rounded to float.
// counters may be null (then summary[0] is not written). Overwrites summary; capturable. Throws
// resident::Error for classes outside [2, 1024].
void launch_class_epoch_summary(FloatPair* summary, const EpochCounters* counters,
                                const unsigned long long* confusion, std::size_t classes,
                                cudaStream_t stream);

}  // namespace resident::kernels::data
