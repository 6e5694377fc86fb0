// Whether the launchers that support it ask for programmatic dependent launch (sm_90): the
// kernel's blocks may be scheduled while the previous kernel of its stream finishes, and wait
// inside the kernel (kernels/core/programmatic_launch.cuh) for that kernel's results. On by
// default. Process-wide, read at each launch (a captured launch keeps the choice it was captured
// with); benchmarks turn it off for a side-by-side row.
#pragma once

#include <atomic>

namespace resident {

namespace detail {
inline std::atomic<bool> programmatic_launches{true};
}  // namespace detail

inline bool programmatic_launches_enabled() noexcept {
  return detail::programmatic_launches.load(std::memory_order_relaxed);
}
inline void set_programmatic_launches(bool enabled) noexcept {
  detail::programmatic_launches.store(enabled, std::memory_order_relaxed);
}

// Sets the switch for a scope (a benchmark row, a test) and puts the previous setting back.
class ProgrammaticLaunchScope {
 public:
  explicit ProgrammaticLaunchScope(bool enabled) noexcept
      : previous_(programmatic_launches_enabled()) {
    set_programmatic_launches(enabled);
  }
  ~ProgrammaticLaunchScope() { set_programmatic_launches(previous_); }
  ProgrammaticLaunchScope(const ProgrammaticLaunchScope&) = delete;
  ProgrammaticLaunchScope& operator=(const ProgrammaticLaunchScope&) = delete;

 private:
  bool previous_;
};

}  // namespace resident
