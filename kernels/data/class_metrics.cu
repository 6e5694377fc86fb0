// Classification epoch summary (contract in class_metrics.h).
#include <string>

#include "kernels/core/error.h"
#include "kernels/core/nvtx_range.h"
#include "kernels/data/class_metrics.h"

namespace resident::kernels::data {

namespace {

__global__ void class_epoch_summary(FloatPair* summary, const EpochCounters* counters,
                                    const unsigned long long* confusion, std::size_t classes) {
  if (counters != nullptr)
    summary[0] = {static_cast<float>(counters->train_mean),
                  static_cast<float>(counters->validation_mean)};
  unsigned long long total = 0, correct = 0;
  double f1 = 0.0;
  for (std::size_t c = 0; c < classes; ++c) {
    unsigned long long row = 0, col = 0;
    for (std::size_t j = 0; j < classes; ++j) {
      row += confusion[c * classes + j];
      col += confusion[j * classes + c];
    }
    const unsigned long long tp = confusion[c * classes + c];
    total += row;
    correct += tp;
    const double denom = static_cast<double>(row + col);
    f1 = __dadd_rn(f1, denom > 0.0 ? __ddiv_rn(2.0 * static_cast<double>(tp), denom) : 0.0);
  }
  const double nan = __longlong_as_double(0x7FF8000000000000ll);
  const double accuracy =
      total > 0 ? __ddiv_rn(static_cast<double>(correct), static_cast<double>(total)) : nan;
  summary[1] = {static_cast<float>(__ddiv_rn(f1, static_cast<double>(classes))),
                static_cast<float>(accuracy)};
}

}  // namespace

void launch_class_epoch_summary(FloatPair* summary, const EpochCounters* counters,
                                const unsigned long long* confusion, std::size_t classes,
                                cudaStream_t stream) {
  if (classes < 2 || classes > 1024)
    throw Error("launch_class_epoch_summary", "invalid argument",
                "classes = " + std::to_string(classes) + ", allowed [2, 1024]", __FILE__,
                __LINE__);
  const NvtxRange range("data/class_epoch_summary");
  class_epoch_summary<<<1, 1, 0, stream>>>(summary, counters, confusion, classes);
  RESIDENT_CHECK_LAUNCH("class_epoch_summary");
}

}  // namespace resident::kernels::data
