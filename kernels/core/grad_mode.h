// Whether a backward overwrites its gradient outputs or adds into them (DESIGN.md: an enum,
// not a comment). Overwrite never reads the output buffer.
#pragma once

namespace resident::nn {

enum class GradMode { Overwrite, Accumulate };

}  // namespace resident::nn
