// The per-step summary of a kernel timeline (pure CPU; audit/kernel_timeline.h records it).
//
//   const auto steps = split_by_launch(result.kernels, &outside);   // or split_by_marker, ...
//   const StepTimelineSummary summary = summarize_steps(steps);
//   std::cout << format_step_summary(summary);   // markdown; step_summary_json(summary) for JSON
//
// Contract of summarize_steps, for R steps (each a list of kernel records in any order):
// - A kernel's position in a step is (name, occurrence): the k-th kernel of that name by start
//   time. Only steps with the most common set of positions (ties: the earliest such step) are
//   summarized; the others are counted in steps_excluded. Positions are listed by median start
//   offset.
// - Per position, medians over the summarized steps (the mean of the middle two for an even
//   count) of:
//     start offset   start - the step's first start;
//     duration       end - start;
//     same-stream gap   start - end of the latest-starting kernel of the step on the same stream
//                    that started before it (none for a step's first kernel on a stream);
//     critical-path gap start - the latest end among the step's kernels that started before it
//                    (none for the step's first kernel); negative: it started while an earlier
//                    kernel still ran.
//   A gap with no value in some steps takes its median over the steps that have one.
// - Per step: span (last end - first start) and busy time (the length of the union of its
//   kernels' intervals); between consecutive summarized steps that were adjacent in the input:
//   period (first start to first start) and idle (next first start - latest end). Each reported
//   as a median.
// - Kernels tie-break by (start, end, stream id), so the result does not depend on input order.
// Times are in microseconds.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "audit/json.h"
#include "audit/kernel_timeline.h"

namespace resident::audit {

using KernelSteps = std::vector<std::vector<KernelRecord>>;

// A kernel's function name without return type, namespaces, template arguments and parameters:
// "void resident::kernels::(anonymous namespace)::spin<3>(long long, int*)" -> "spin".
std::string kernel_base_name(std::string_view name);

// Steps that each begin with a kernel whose base name (kernel_base_name) equals `marker`: a step
// holds the kernels starting from one marker's start up to the next marker's start (sorted by
// start). Kernels before the first marker go to `outside` (when not null).
KernelSteps split_by_marker(const std::vector<KernelRecord>& kernels, std::string_view marker,
                            std::vector<KernelRecord>* outside = nullptr);
// One step per launch: kernels grouped by correlation id (all kernels of one CUDA graph replay
// share it), steps ordered by their first start. Groups of fewer than `min_kernels` kernels (an
// eagerly launched kernel is a group of one) go to `outside` instead.
KernelSteps split_by_launch(const std::vector<KernelRecord>& kernels, std::size_t min_kernels = 2,
                            std::vector<KernelRecord>* outside = nullptr);
// Consecutive groups of `kernels_per_step` kernels by start; a last partial group goes to
// `outside`. Throws AuditError when kernels_per_step is 0.
KernelSteps split_by_count(const std::vector<KernelRecord>& kernels, std::size_t kernels_per_step,
                           std::vector<KernelRecord>* outside = nullptr);

struct KernelPositionSummary {
  std::string name;         // as recorded (demangled)
  std::string base_name;    // kernel_base_name(name)
  std::size_t occurrence = 0;  // 0: the first kernel of this name in a step
  std::uint32_t stream_id = 0;  // in the first summarized step
  std::array<std::int32_t, 3> grid{};
  std::array<std::int32_t, 3> block{};
  double median_start_offset_us = 0;
  double median_duration_us = 0;
  std::optional<double> median_gap_same_stream_us;
  std::optional<double> median_gap_critical_path_us;
};

struct StepTimelineSummary {
  std::size_t steps_total = 0;
  std::size_t steps_summarized = 0;
  std::size_t steps_excluded = 0;  // a different set of kernel positions
  std::vector<KernelPositionSummary> kernels;  // by median start offset
  double median_span_us = 0;
  double median_busy_us = 0;
  std::optional<double> median_period_us;  // none with fewer than two adjacent summarized steps
  std::optional<double> median_idle_between_steps_us;
};

// Throws AuditError when `steps` holds no non-empty step.
StepTimelineSummary summarize_steps(const KernelSteps& steps);

// A markdown table (one row per position) and the step lines below it.
std::string format_step_summary(const StepTimelineSummary& summary);
Json step_summary_json(const StepTimelineSummary& summary);

// Kernels outside the steps, by name: count, median and total duration.
struct KernelNameSummary {
  std::string name;
  std::string base_name;
  std::size_t count = 0;
  double median_duration_us = 0;
  double total_duration_us = 0;
};
// Sorted by total duration, largest first (then by name).
std::vector<KernelNameSummary> summarize_by_name(const std::vector<KernelRecord>& kernels);
std::string format_name_summary(const std::vector<KernelNameSummary>& summary);
Json name_summary_json(const std::vector<KernelNameSummary>& summary);

// The median of `values` (the mean of the middle two for an even count). Throws AuditError when
// empty.
double median(std::vector<double> values);

}  // namespace resident::audit
