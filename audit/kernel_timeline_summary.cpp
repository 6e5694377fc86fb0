#include "audit/kernel_timeline_summary.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "audit/tracer.h"

namespace resident::audit {

namespace {

bool earlier(const KernelRecord& a, const KernelRecord& b) {
  return std::tie(a.start_ns, a.end_ns, a.stream_id) < std::tie(b.start_ns, b.end_ns, b.stream_id);
}

std::vector<KernelRecord> sorted_by_start(std::vector<KernelRecord> kernels) {
  std::stable_sort(kernels.begin(), kernels.end(), earlier);
  return kernels;
}

// b - a in microseconds, signed.
double us_between(std::uint64_t a, std::uint64_t b) {
  return static_cast<double>(static_cast<std::int64_t>(b - a)) / 1000.0;
}

using Position = std::pair<std::string, std::size_t>;  // (name, occurrence)

// One step's kernels, sorted, with each kernel's position and gaps.
struct StepView {
  std::vector<KernelRecord> kernels;
  std::vector<Position> positions;        // per kernel
  std::vector<std::optional<double>> gap_same_stream;
  std::vector<std::optional<double>> gap_critical_path;
  std::vector<Position> position_set;     // sorted: the step's signature
  std::uint64_t first_start = 0;
  std::uint64_t last_end = 0;
  std::uint64_t busy_ns = 0;
};

StepView view_of(const std::vector<KernelRecord>& step) {
  StepView v;
  v.kernels = sorted_by_start(step);
  std::map<std::string, std::size_t> seen;
  std::unordered_map<std::uint32_t, std::size_t> last_on_stream;  // index into kernels
  std::optional<std::uint64_t> latest_end;
  std::uint64_t union_end = 0;
  v.first_start = v.kernels.front().start_ns;
  for (std::size_t i = 0; i < v.kernels.size(); ++i) {
    const KernelRecord& k = v.kernels[i];
    v.positions.emplace_back(k.name, seen[k.name]++);
    const auto on_stream = last_on_stream.find(k.stream_id);
    v.gap_same_stream.push_back(on_stream == last_on_stream.end()
                                    ? std::nullopt
                                    : std::optional<double>(us_between(
                                          v.kernels[on_stream->second].end_ns, k.start_ns)));
    last_on_stream[k.stream_id] = i;
    v.gap_critical_path.push_back(latest_end ? std::optional<double>(us_between(*latest_end, k.start_ns))
                                             : std::nullopt);
    latest_end = std::max(latest_end.value_or(0), k.end_ns);
    // Busy time: the union of [start, end) in start order.
    if (i == 0 || k.start_ns >= union_end) {
      v.busy_ns += k.duration_ns();
      union_end = k.end_ns;
    } else if (k.end_ns > union_end) {
      v.busy_ns += k.end_ns - union_end;
      union_end = k.end_ns;
    }
  }
  v.last_end = *latest_end;
  v.position_set = v.positions;
  std::sort(v.position_set.begin(), v.position_set.end());
  return v;
}

std::string fixed(double value, int decimals = 2) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, value);
  return buf;
}

std::string fixed_or_dash(const std::optional<double>& value) { return value ? fixed(*value) : "-"; }

Json optional_json(const std::optional<double>& value) { return value ? Json(*value) : Json(); }

std::string dims(const std::array<std::int32_t, 3>& d) {
  return std::to_string(d[0]) + "x" + std::to_string(d[1]) + "x" + std::to_string(d[2]);
}

Json dims_json(const std::array<std::int32_t, 3>& d) {
  return Json(Json::Array{Json(d[0]), Json(d[1]), Json(d[2])});
}

// Markdown cells must not contain '|'.
std::string cell(std::string text) {
  std::replace(text.begin(), text.end(), '|', '/');
  return text;
}

}  // namespace

double median(std::vector<double> values) {
  if (values.empty()) throw AuditError("audit: median of no values");
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2.0;
}

std::string kernel_base_name(std::string_view name) {
  std::string s(name);
  // "(anonymous namespace)" is the one parenthesis a qualified name holds before its parameters.
  for (std::size_t at; (at = s.find("(anonymous namespace)")) != std::string::npos;)
    s.replace(at, 21, "anonymous");
  const auto strip_trailing = [&s](char open, char close) {
    if (s.empty() || s.back() != close) return;
    int depth = 0;
    for (std::size_t i = s.size(); i-- > 0;) {
      if (s[i] == close) ++depth;
      if (s[i] == open && --depth == 0) {
        s.erase(i);
        return;
      }
    }
  };
  while (!s.empty() && s.back() == ' ') s.pop_back();
  strip_trailing('(', ')');  // parameters
  strip_trailing('<', '>');  // template arguments
  // Return type and namespaces: after the last space and the last "::" outside template brackets.
  int depth = 0;
  std::size_t begin = 0;
  for (std::size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '<') ++depth;
    if (s[i] == '>') --depth;
    if (depth != 0) continue;
    if (s[i] == ' ') begin = i + 1;
    if (s[i] == ':' && i + 1 < s.size() && s[i + 1] == ':') begin = i + 2;
  }
  s.erase(0, begin);
  return s.empty() ? std::string(name) : s;
}

KernelSteps split_by_marker(const std::vector<KernelRecord>& kernels, std::string_view marker,
                            std::vector<KernelRecord>* outside) {
  KernelSteps steps;
  for (KernelRecord& k : sorted_by_start(kernels)) {
    if (kernel_base_name(k.name) == marker) steps.emplace_back();
    if (!steps.empty())
      steps.back().push_back(std::move(k));
    else if (outside != nullptr)
      outside->push_back(std::move(k));
  }
  return steps;
}

KernelSteps split_by_launch(const std::vector<KernelRecord>& kernels, std::size_t min_kernels,
                            std::vector<KernelRecord>* outside) {
  std::unordered_map<std::uint32_t, std::size_t> group_of;  // correlation id -> group
  KernelSteps groups;
  for (KernelRecord& k : sorted_by_start(kernels)) {
    const auto [it, inserted] = group_of.try_emplace(k.correlation_id, groups.size());
    if (inserted) groups.emplace_back();
    groups[it->second].push_back(std::move(k));  // groups are in order of their first start
  }
  KernelSteps steps;
  for (std::vector<KernelRecord>& group : groups) {
    if (group.size() >= min_kernels)
      steps.push_back(std::move(group));
    else if (outside != nullptr)
      outside->insert(outside->end(), group.begin(), group.end());
  }
  if (outside != nullptr) *outside = sorted_by_start(std::move(*outside));
  return steps;
}

KernelSteps split_by_count(const std::vector<KernelRecord>& kernels, std::size_t kernels_per_step,
                           std::vector<KernelRecord>* outside) {
  if (kernels_per_step == 0) throw AuditError("audit: split_by_count: kernels_per_step = 0, allowed >= 1");
  KernelSteps steps;
  std::vector<KernelRecord> sorted = sorted_by_start(kernels);
  const std::size_t whole = sorted.size() / kernels_per_step * kernels_per_step;
  for (std::size_t i = 0; i < whole; i += kernels_per_step)
    steps.emplace_back(sorted.begin() + static_cast<std::ptrdiff_t>(i),
                       sorted.begin() + static_cast<std::ptrdiff_t>(i + kernels_per_step));
  if (outside != nullptr) outside->insert(outside->end(), sorted.begin() + static_cast<std::ptrdiff_t>(whole), sorted.end());
  return steps;
}

StepTimelineSummary summarize_steps(const KernelSteps& steps) {
  std::vector<std::optional<StepView>> views;  // per input step; none when empty
  for (const std::vector<KernelRecord>& step : steps)
    views.push_back(step.empty() ? std::nullopt : std::optional<StepView>(view_of(step)));

  // The most common signature; a tie goes to the one seen first.
  std::map<std::vector<Position>, std::pair<std::size_t, std::size_t>> signatures;  // -> (count, first)
  for (std::size_t i = 0; i < views.size(); ++i)
    if (views[i]) signatures.try_emplace(views[i]->position_set, 0, i).first->second.first++;
  if (signatures.empty()) throw AuditError("audit: summarize_steps: no step holds a kernel");
  const std::vector<Position>* modal = nullptr;
  std::pair<std::size_t, std::size_t> best{0, 0};
  for (const auto& [signature, seen] : signatures)
    if (modal == nullptr || seen.first > best.first || (seen.first == best.first && seen.second < best.second)) {
      modal = &signature;
      best = seen;
    }

  StepTimelineSummary summary;
  summary.steps_total = steps.size();
  std::vector<std::size_t> included;
  for (std::size_t i = 0; i < views.size(); ++i)
    if (views[i] && views[i]->position_set == *modal) included.push_back(i);
  summary.steps_summarized = included.size();
  summary.steps_excluded = steps.size() - included.size();

  struct Samples {
    std::vector<double> start_offset, duration, gap_same_stream, gap_critical_path;
  };
  std::map<Position, Samples> samples;
  std::vector<double> spans, busy, periods, idles;
  for (std::size_t n = 0; n < included.size(); ++n) {
    const StepView& v = *views[included[n]];
    for (std::size_t i = 0; i < v.kernels.size(); ++i) {
      Samples& s = samples[v.positions[i]];
      s.start_offset.push_back(us_between(v.first_start, v.kernels[i].start_ns));
      s.duration.push_back(static_cast<double>(v.kernels[i].duration_ns()) / 1000.0);
      if (v.gap_same_stream[i]) s.gap_same_stream.push_back(*v.gap_same_stream[i]);
      if (v.gap_critical_path[i]) s.gap_critical_path.push_back(*v.gap_critical_path[i]);
    }
    spans.push_back(us_between(v.first_start, v.last_end));
    busy.push_back(static_cast<double>(v.busy_ns) / 1000.0);
    if (n + 1 < included.size() && included[n + 1] == included[n] + 1) {
      const StepView& next = *views[included[n + 1]];
      periods.push_back(us_between(v.first_start, next.first_start));
      idles.push_back(us_between(v.last_end, next.first_start));
    }
  }
  const StepView& first = *views[included.front()];
  for (std::size_t i = 0; i < first.kernels.size(); ++i) {
    const KernelRecord& k = first.kernels[i];
    const Samples& s = samples[first.positions[i]];
    KernelPositionSummary p;
    p.name = k.name;
    p.base_name = kernel_base_name(k.name);
    p.occurrence = first.positions[i].second;
    p.stream_id = k.stream_id;
    p.grid = k.grid;
    p.block = k.block;
    p.median_start_offset_us = median(s.start_offset);
    p.median_duration_us = median(s.duration);
    if (!s.gap_same_stream.empty()) p.median_gap_same_stream_us = median(s.gap_same_stream);
    if (!s.gap_critical_path.empty()) p.median_gap_critical_path_us = median(s.gap_critical_path);
    summary.kernels.push_back(std::move(p));
  }
  std::stable_sort(summary.kernels.begin(), summary.kernels.end(),
                   [](const KernelPositionSummary& a, const KernelPositionSummary& b) {
                     return std::tie(a.median_start_offset_us, a.name, a.occurrence) <
                            std::tie(b.median_start_offset_us, b.name, b.occurrence);
                   });
  summary.median_span_us = median(spans);
  summary.median_busy_us = median(busy);
  if (!periods.empty()) {
    summary.median_period_us = median(periods);
    summary.median_idle_between_steps_us = median(idles);
  }
  return summary;
}

std::string format_step_summary(const StepTimelineSummary& summary) {
  std::string out =
      "| # | kernel | stream | grid | block | start (us) | duration (us) | gap same stream (us) | "
      "gap critical path (us) |\n"
      "|---:|---|---:|---|---|---:|---:|---:|---:|\n";
  double total_duration = 0;
  for (std::size_t i = 0; i < summary.kernels.size(); ++i) {
    const KernelPositionSummary& k = summary.kernels[i];
    total_duration += k.median_duration_us;
    std::string name = k.base_name;
    if (k.occurrence > 0) name += " (#" + std::to_string(k.occurrence + 1) + ")";
    out += "| " + std::to_string(i + 1) + " | " + cell(name) + " | " + std::to_string(k.stream_id) +
           " | " + dims(k.grid) + " | " + dims(k.block) + " | " + fixed(k.median_start_offset_us) +
           " | " + fixed(k.median_duration_us) + " | " + fixed_or_dash(k.median_gap_same_stream_us) +
           " | " + fixed_or_dash(k.median_gap_critical_path_us) + " |\n";
  }
  out += "\nMedians over " + std::to_string(summary.steps_summarized) + " of " +
         std::to_string(summary.steps_total) + " steps (" + std::to_string(summary.steps_excluded) +
         " with a different set of kernels left out). Gaps: start minus the end of the previous "
         "kernel on the same stream, and minus the latest end of any earlier kernel of the step "
         "(negative: overlap).\n\n";
  out += "- step span (first start to last end): " + fixed(summary.median_span_us) + " us\n";
  out += "- step busy (union of kernel intervals): " + fixed(summary.median_busy_us) + " us\n";
  out += "- sum of the median kernel durations: " + fixed(total_duration) + " us\n";
  out += "- period (first start to next step's first start): " +
         (summary.median_period_us ? fixed(*summary.median_period_us) + " us" : std::string("-")) + "\n";
  out += "- idle between steps (last end to next step's first start): " +
         (summary.median_idle_between_steps_us ? fixed(*summary.median_idle_between_steps_us) + " us"
                                               : std::string("-")) +
         "\n";
  return out;
}

Json step_summary_json(const StepTimelineSummary& summary) {
  Json::Array kernels;
  for (const KernelPositionSummary& k : summary.kernels) {
    kernels.push_back(Json(Json::Object{
        {"name", Json(k.name)},
        {"kernel", Json(k.base_name)},
        {"occurrence", Json(static_cast<unsigned long long>(k.occurrence))},
        {"stream_id", Json(static_cast<unsigned long long>(k.stream_id))},
        {"grid", dims_json(k.grid)},
        {"block", dims_json(k.block)},
        {"median_start_offset_us", Json(k.median_start_offset_us)},
        {"median_duration_us", Json(k.median_duration_us)},
        {"median_gap_same_stream_us", optional_json(k.median_gap_same_stream_us)},
        {"median_gap_critical_path_us", optional_json(k.median_gap_critical_path_us)},
    }));
  }
  return Json(Json::Object{
      {"steps_total", Json(static_cast<unsigned long long>(summary.steps_total))},
      {"steps_summarized", Json(static_cast<unsigned long long>(summary.steps_summarized))},
      {"steps_excluded", Json(static_cast<unsigned long long>(summary.steps_excluded))},
      {"median_span_us", Json(summary.median_span_us)},
      {"median_busy_us", Json(summary.median_busy_us)},
      {"median_period_us", optional_json(summary.median_period_us)},
      {"median_idle_between_steps_us", optional_json(summary.median_idle_between_steps_us)},
      {"kernels", Json(std::move(kernels))},
  });
}

std::vector<KernelNameSummary> summarize_by_name(const std::vector<KernelRecord>& kernels) {
  std::map<std::string, std::vector<double>> durations;
  for (const KernelRecord& k : kernels)
    durations[k.name].push_back(static_cast<double>(k.duration_ns()) / 1000.0);
  std::vector<KernelNameSummary> summary;
  for (auto& [name, values] : durations) {
    KernelNameSummary s;
    s.name = name;
    s.base_name = kernel_base_name(name);
    s.count = values.size();
    for (const double v : values) s.total_duration_us += v;
    s.median_duration_us = median(std::move(values));
    summary.push_back(std::move(s));
  }
  std::stable_sort(summary.begin(), summary.end(),
                   [](const KernelNameSummary& a, const KernelNameSummary& b) {
                     return a.total_duration_us > b.total_duration_us;
                   });
  return summary;
}

std::string format_name_summary(const std::vector<KernelNameSummary>& summary) {
  std::string out =
      "| kernel | count | median duration (us) | total duration (us) |\n|---|---:|---:|---:|\n";
  for (const KernelNameSummary& s : summary)
    out += "| " + cell(s.base_name) + " | " + std::to_string(s.count) + " | " +
           fixed(s.median_duration_us) + " | " + fixed(s.total_duration_us) + " |\n";
  return out;
}

Json name_summary_json(const std::vector<KernelNameSummary>& summary) {
  Json::Array out;
  for (const KernelNameSummary& s : summary)
    out.push_back(Json(Json::Object{
        {"name", Json(s.name)},
        {"kernel", Json(s.base_name)},
        {"count", Json(static_cast<unsigned long long>(s.count))},
        {"median_duration_us", Json(s.median_duration_us)},
        {"total_duration_us", Json(s.total_duration_us)},
    }));
  return Json(std::move(out));
}

}  // namespace resident::audit
