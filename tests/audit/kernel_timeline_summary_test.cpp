// The kernel timeline's step summary on synthetic records (CPU): medians, gaps measured from the
// right kernel (the previous one on the same stream; the latest end of any earlier one), step
// span, busy time, period and idle, steps with another kernel set left out, the splitters, the
// base names, and the markdown and JSON outputs.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "audit/json.h"
#include "audit/kernel_timeline_summary.h"
#include "audit/tracer.h"

namespace {

using namespace resident::audit;

// Times in microseconds, stored in ns as CUPTI does.
KernelRecord kernel(const std::string& name, std::uint32_t stream, double start_us, double end_us,
                    std::uint32_t correlation) {
  KernelRecord k;
  k.name = name;
  k.stream_id = stream;
  k.start_ns = static_cast<std::uint64_t>(start_us * 1000.0);
  k.end_ns = static_cast<std::uint64_t>(end_us * 1000.0);
  k.correlation_id = correlation;
  k.grid = {4, 1, 1};
  k.block = {128, 1, 1};
  return k;
}

const std::string kA = "void ns::(anonymous namespace)::a(int)";
const std::string kB = "void ns::b<2>(float*)";
const std::string kC = "void ns::c()";
const std::string kD = "void ns::d()";
const std::string kE = "void ns::e()";

// One step at `base` (us), C starting at `c_start`: (stream, start, end)
//   A 1 [0,10]   B 2 [1,30]   C 1 [c_start,20]   E 2 [22,25]   D 1 [35,40]
// In start order A B C E D. The kernel before D by start is E (stream 2, end 25), the previous
// one on D's stream is C (end 20), the latest end before D is B's (30): D's gaps are 15 (same
// stream) and 5 (critical path); from the wrong kernel they would read 10. E's are -8 and -8
// (after B), and would read 2 from C.
std::vector<KernelRecord> step_at(double base, double c_start, std::uint32_t correlation) {
  return {kernel(kA, 1, base + 0, base + 10, correlation), kernel(kB, 2, base + 1, base + 30, correlation),
          kernel(kC, 1, base + c_start, base + 20, correlation),
          kernel(kE, 2, base + 22, base + 25, correlation), kernel(kD, 1, base + 35, base + 40, correlation)};
}

const KernelPositionSummary& position(const StepTimelineSummary& s, const std::string& name) {
  const auto it = std::find_if(s.kernels.begin(), s.kernels.end(),
                               [&](const KernelPositionSummary& k) { return k.name == name; });
  EXPECT_NE(it, s.kernels.end()) << name;
  return *it;
}

TEST(KernelTimelineSummary, MediansAndGapsFromTheRightKernel) {
  // Three steps 100 us apart; C starts at 14, 16, 12 us.
  std::vector<KernelRecord> records;
  const double c_starts[] = {14, 16, 12};
  for (int i = 0; i < 3; ++i) {
    const auto step = step_at(100.0 * i, c_starts[i], 1000 + i);
    records.insert(records.end(), step.begin(), step.end());
  }
  records.push_back(kernel("void ns::eager()", 1, 400, 401, 7));  // a launch of its own
  std::shuffle(records.begin(), records.end(), std::mt19937(3));   // input order must not matter

  std::vector<KernelRecord> outside;
  const KernelSteps steps = split_by_launch(records, 2, &outside);
  ASSERT_EQ(steps.size(), 3u);
  ASSERT_EQ(outside.size(), 1u);
  EXPECT_EQ(outside[0].name, "void ns::eager()");

  const StepTimelineSummary s = summarize_steps(steps);
  std::printf("%s", format_step_summary(s).c_str());
  EXPECT_EQ(s.steps_total, 3u);
  EXPECT_EQ(s.steps_summarized, 3u);
  EXPECT_EQ(s.steps_excluded, 0u);
  ASSERT_EQ(s.kernels.size(), 5u);
  // Listed by median start offset: A 0, B 1, C 14, E 22, D 35.
  const char* order[] = {"a", "b", "c", "e", "d"};
  for (std::size_t i = 0; i < 5; ++i) EXPECT_EQ(s.kernels[i].base_name, order[i]) << i;

  const KernelPositionSummary& a = position(s, kA);
  EXPECT_DOUBLE_EQ(a.median_start_offset_us, 0.0);
  EXPECT_DOUBLE_EQ(a.median_duration_us, 10.0);
  EXPECT_FALSE(a.median_gap_same_stream_us.has_value());   // first on stream 1
  EXPECT_FALSE(a.median_gap_critical_path_us.has_value()); // first of the step
  EXPECT_EQ(a.stream_id, 1u);
  EXPECT_EQ(a.grid[0], 4);
  EXPECT_EQ(a.block[0], 128);

  const KernelPositionSummary& b = position(s, kB);
  EXPECT_FALSE(b.median_gap_same_stream_us.has_value());  // first on stream 2
  EXPECT_DOUBLE_EQ(*b.median_gap_critical_path_us, -9.0);   // 1 - 10: overlaps A

  // C: offsets {14, 16, 12} -> 14; durations {6, 4, 8} -> 6; after A on stream 1: {4, 6, 2} -> 4;
  // critical path after B's end 30: {-16, -14, -18} -> -16.
  const KernelPositionSummary& c = position(s, kC);
  EXPECT_DOUBLE_EQ(c.median_start_offset_us, 14.0);
  EXPECT_DOUBLE_EQ(c.median_duration_us, 6.0);
  EXPECT_DOUBLE_EQ(*c.median_gap_same_stream_us, 4.0);
  EXPECT_DOUBLE_EQ(*c.median_gap_critical_path_us, -16.0);

  const KernelPositionSummary& e = position(s, kE);
  EXPECT_DOUBLE_EQ(*e.median_gap_same_stream_us, -8.0);     // after B (end 30), not C (20)
  EXPECT_DOUBLE_EQ(*e.median_gap_critical_path_us, -8.0);   // latest end: B's 30

  const KernelPositionSummary& d = position(s, kD);
  EXPECT_DOUBLE_EQ(d.median_start_offset_us, 35.0);
  EXPECT_DOUBLE_EQ(*d.median_gap_same_stream_us, 15.0);     // after C (end 20), not E (25)
  EXPECT_DOUBLE_EQ(*d.median_gap_critical_path_us, 5.0);    // after B (end 30), not E (25)

  EXPECT_DOUBLE_EQ(s.median_span_us, 40.0);
  EXPECT_DOUBLE_EQ(s.median_busy_us, 35.0);  // [0, 30] and [35, 40]
  ASSERT_TRUE(s.median_period_us.has_value());
  EXPECT_DOUBLE_EQ(*s.median_period_us, 100.0);
  EXPECT_DOUBLE_EQ(*s.median_idle_between_steps_us, 60.0);
}

TEST(KernelTimelineSummary, StepsWithAnotherKernelSetAreLeftOut) {
  // Steps at 0, 100, 200, 300; the one at 100 has an extra kernel, the one at 300 starts C later.
  KernelSteps steps{step_at(0, 14, 1), step_at(100, 14, 2), step_at(200, 14, 3), step_at(300, 18, 4)};
  steps[1].push_back(kernel("void ns::extra()", 3, 150, 160, 2));
  const StepTimelineSummary s = summarize_steps(steps);
  EXPECT_EQ(s.steps_total, 4u);
  EXPECT_EQ(s.steps_summarized, 3u);
  EXPECT_EQ(s.steps_excluded, 1u);
  EXPECT_EQ(s.kernels.size(), 5u);
  // C's offsets {14, 14, 18}: median 14 (the excluded step does not count).
  EXPECT_DOUBLE_EQ(position(s, kC).median_start_offset_us, 14.0);
  // Periods only between summarized steps adjacent in the input: 200 -> 300.
  ASSERT_TRUE(s.median_period_us.has_value());
  EXPECT_DOUBLE_EQ(*s.median_period_us, 100.0);
  EXPECT_DOUBLE_EQ(*s.median_idle_between_steps_us, 60.0);
}

TEST(KernelTimelineSummary, RepeatedKernelNamesArePositionsByOccurrence) {
  // Each step: k [0,5], k [10,12] on one stream; even count of steps: medians of two.
  KernelSteps steps;
  for (int i = 0; i < 2; ++i) {
    const double base = 50.0 * i;
    steps.push_back({kernel("k", 1, base + 10 + i, base + 12 + i, 1 + i), kernel("k", 1, base, base + 5, 1 + i)});
  }
  const StepTimelineSummary s = summarize_steps(steps);
  ASSERT_EQ(s.kernels.size(), 2u);
  EXPECT_EQ(s.kernels[0].occurrence, 0u);
  EXPECT_EQ(s.kernels[1].occurrence, 1u);
  EXPECT_DOUBLE_EQ(s.kernels[1].median_start_offset_us, 10.5);  // {10, 11}
  EXPECT_DOUBLE_EQ(*s.kernels[1].median_gap_same_stream_us, 5.5);  // {5, 6}
  EXPECT_NE(format_step_summary(s).find("| 2 | k (#2) |"), std::string::npos) << format_step_summary(s);
}

TEST(KernelTimelineSummary, SplitByMarkerAndByCount) {
  std::vector<KernelRecord> records{
      kernel("void x::setup()", 1, 0, 1, 1),
      kernel("void x::act(int)", 1, 10, 12, 2), kernel("void x::env()", 1, 13, 15, 3),
      kernel("void x::act(int)", 1, 20, 22, 4), kernel("void x::env()", 1, 23, 25, 5),
  };
  std::vector<KernelRecord> outside;
  const KernelSteps by_marker = split_by_marker(records, "act", &outside);
  ASSERT_EQ(by_marker.size(), 2u);
  EXPECT_EQ(by_marker[0].size(), 2u);
  EXPECT_EQ(by_marker[1][1].name, "void x::env()");
  ASSERT_EQ(outside.size(), 1u);
  EXPECT_EQ(outside[0].name, "void x::setup()");

  outside.clear();
  const KernelSteps by_count = split_by_count(records, 2, &outside);
  ASSERT_EQ(by_count.size(), 2u);
  EXPECT_EQ(by_count[0][0].name, "void x::setup()");
  EXPECT_EQ(outside.size(), 1u);
  EXPECT_THROW((void)split_by_count(records, 0), AuditError);
  EXPECT_THROW((void)summarize_steps({}), AuditError);
  EXPECT_THROW((void)summarize_steps({{}}), AuditError);
}

TEST(KernelTimelineSummary, BaseNames) {
  EXPECT_EQ(kernel_base_name("void resident::kernels::(anonymous namespace)::spin<(int)3>(long long, int*)"),
            "spin");
  EXPECT_EQ(kernel_base_name("resident::kernels::dqn::(anonymous namespace)::dqn_act_fused("
                             "resident::kernels::dqn::ActArgs)"),
            "dqn_act_fused");
  EXPECT_EQ(kernel_base_name("void cub::DeviceRadixSortKernel<cub::Policy<int, (bool)1>, true>(int const*, int*)"),
            "DeviceRadixSortKernel");
  EXPECT_EQ(kernel_base_name("void foo<void (*)(int)>(int)"), "foo");
  EXPECT_EQ(kernel_base_name("plain_c_kernel"), "plain_c_kernel");
}

TEST(KernelTimelineSummary, MedianAndNameSummary) {
  EXPECT_DOUBLE_EQ(median({3, 1, 2}), 2.0);
  EXPECT_DOUBLE_EQ(median({4, 1, 3, 2}), 2.5);
  EXPECT_THROW((void)median({}), AuditError);
  const std::vector<KernelNameSummary> names = summarize_by_name(
      {kernel("void s()", 1, 0, 2, 1), kernel("void t()", 1, 0, 10, 2), kernel("void s()", 1, 5, 9, 3),
       kernel("void s()", 1, 20, 23, 4)});
  ASSERT_EQ(names.size(), 2u);
  EXPECT_EQ(names[0].base_name, "t");  // total 10 > 9
  EXPECT_EQ(names[1].count, 3u);
  EXPECT_DOUBLE_EQ(names[1].median_duration_us, 3.0);
  EXPECT_DOUBLE_EQ(names[1].total_duration_us, 9.0);
  const Json json = Json::parse(name_summary_json(names).dump());
  EXPECT_EQ(json.as_array()[1].find("count")->as_number(), 3.0);
  EXPECT_NE(format_name_summary(names).find("| s | 3 | 3.00 | 9.00 |"), std::string::npos);
}

TEST(KernelTimelineSummary, JsonRoundTrip) {
  const StepTimelineSummary s = summarize_steps({step_at(0, 14, 1), step_at(100, 14, 2)});
  const Json json = Json::parse(step_summary_json(s).dump());
  EXPECT_EQ(json.find("steps_summarized")->as_number(), 2.0);
  EXPECT_EQ(json.find("median_period_us")->as_number(), 100.0);
  const Json::Array& kernels = json.find("kernels")->as_array();
  ASSERT_EQ(kernels.size(), 5u);
  EXPECT_EQ(kernels[0].find("kernel")->as_string(), "a");
  EXPECT_EQ(kernels[0].find("name")->as_string(), kA);
  EXPECT_TRUE(kernels[0].find("median_gap_critical_path_us")->is_null());
  EXPECT_EQ(kernels[4].find("median_gap_same_stream_us")->as_number(), 15.0);
  EXPECT_EQ(kernels[4].find("grid")->as_array()[0].as_number(), 4.0);

  const StepTimelineSummary single = summarize_steps({step_at(0, 14, 1)});
  EXPECT_FALSE(single.median_period_us.has_value());
  EXPECT_TRUE(Json::parse(step_summary_json(single).dump()).find("median_period_us")->is_null());
}

}  // namespace
