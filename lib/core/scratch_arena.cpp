#include "lib/core/scratch_arena.h"

#include <string>

namespace resident {

ScratchArena::ScratchArena(std::size_t capacity_bytes) : storage_(align_up(capacity_bytes)) {}

void* ScratchArena::take_bytes(std::size_t bytes) {
  if (bytes == 0) return nullptr;
  const std::size_t need = align_up(bytes);
  if (need > capacity() - used_) {
    throw Error("ScratchArena::take_bytes(" + std::to_string(bytes) + ")", "arena exhausted",
                std::to_string(capacity() - used_) + " of " + std::to_string(capacity()) +
                    " bytes left; size the arena with a ScratchPlan at construction",
                __FILE__, __LINE__);
  }
  void* region = storage_.data() + used_;
  used_ += need;
  return region;
}

}  // namespace resident
