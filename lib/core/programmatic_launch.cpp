#include "lib/core/programmatic_launch.h"

#include <atomic>

namespace resident {

namespace {
std::atomic<bool> enabled{true};
}  // namespace

bool programmatic_launches_enabled() noexcept { return enabled.load(std::memory_order_relaxed); }

void set_programmatic_launches(bool on) noexcept { enabled.store(on, std::memory_order_relaxed); }

}  // namespace resident
