#include "tests/support/gpu.h"

#include <cstdlib>
#include <cstring>

#include "lib/core/gpu_presence.h"

namespace resident::test {

bool gpu_available(std::string* reason) {
  const std::string& absence = gpu_absence_reason();
  if (!absence.empty() && reason != nullptr) *reason = absence;
  return absence.empty();
}

bool gpu_required() {
  const char* value = std::getenv("RESIDENT_REQUIRE_GPU");
  return value != nullptr && value[0] != '\0' && std::strcmp(value, "0") != 0;
}

}  // namespace resident::test
