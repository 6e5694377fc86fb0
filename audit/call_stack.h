// Host call stacks for the audit's call sites: captured cheaply as raw return addresses when
// a copy is issued, symbolized only when a report is built.
#pragma once

#include <vector>

#include "audit/report.h"

namespace resident::audit {

using RawStack = std::vector<void*>;

RawStack capture_stack();

// Innermost first. Frames inside the CUDA libraries (cudart, driver, CUPTI, cuBLAS) and the
// audit itself are dropped; at most `max_frames` are kept. Function names and file:line come
// from addr2line where debug info exists, else from the dynamic symbol table.
std::vector<StackFrame> symbolize(const RawStack& stack, std::size_t max_frames = 8);

}  // namespace resident::audit
