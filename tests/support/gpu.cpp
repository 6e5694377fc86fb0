#include "tests/support/gpu.h"

#include <cstdlib>
#include <cstring>

#include "lib/core/device_info.h"

namespace resident::test {

bool gpu_available(std::string* reason) {
  static std::string cached_reason;
  static const bool available = probe_device(&cached_reason).has_value();
  if (!available && reason != nullptr) *reason = cached_reason;
  return available;
}

bool gpu_required() {
  const char* value = std::getenv("RESIDENT_REQUIRE_GPU");
  return value != nullptr && value[0] != '\0' && std::strcmp(value, "0") != 0;
}

}  // namespace resident::test
