// Host side of a kernel's phase clock (kernels/core/phase_clock.cuh): the readings of one launch
// turned into per-phase durations, and their medians printed by name.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace resident::test::phase_clock {

// Appends one launch's phase durations (us) from its PhaseClock readings `t` (durations.size() +
// 1 of them) to `durations`; returns "" when the readings rise, else which one does not.
inline std::string add_phase_durations(const std::vector<std::uint64_t>& t,
                                       std::vector<std::vector<double>>& durations) {
  if (t.size() != durations.size() + 1) return "expected " + std::to_string(durations.size() + 1) +
                                                 " readings, got " + std::to_string(t.size());
  for (std::size_t i = 1; i < t.size(); ++i)
    if (t[i] < t[i - 1]) return "reading " + std::to_string(i) + " precedes the one before it";
  if (t.back() <= t.front()) return "no time passed";
  for (std::size_t i = 1; i < t.size(); ++i)
    durations[i - 1].push_back(static_cast<double>(t[i] - t[i - 1]) * 1e-3);
  return "";
}

// Prints the median of each phase's durations (us; the phase clock's differences) under its name,
// then the medians' total: the in-kernel time from block 0's first reading to its last.
inline void print_phase_medians(std::vector<std::vector<double>> durations,
                                const std::vector<std::string>& names) {
  double total = 0.0;
  for (std::size_t i = 0; i < durations.size() && i < names.size(); ++i) {
    std::vector<double>& d = durations[i];
    if (d.empty()) continue;
    std::sort(d.begin(), d.end());
    const double median = d[d.size() / 2];
    total += median;
    std::printf("  phase %-34s median %6.2f us\n", names[i].c_str(), median);
  }
  std::printf("  in-kernel total (block 0, start to end) %.2f us\n", total);
}

}  // namespace resident::test::phase_clock
