// A parameter slab in the checkpoint container (lib/core/checkpoint_file.h): the layout (names,
// shapes, decay flags), the AdamW step and the params, m and v slabs, padding included; grads
// are not saved. A slab is one section; a trainer puts each of its slabs into its own file under
// its own section name, and a slab alone is a file of kind "param-slab" with the section "slab"
// (ParamSlab::save / load). The section's fields (SectionWriter encoding):
//
//   u64            tensor count T
//   T times        string name, u8 decay (0 or 1), u64 array of extents (rank 1 .. 64)
//   u64            step (AdamW updates done)
//   3 x f32 array  params, m, v ([total_elements] each, as SlabLayout lays the tensors out)
//
// Integrity (checksum, exact size, structure) and the atomic write are the container's. Reading
// checks the layout against the expected one before it reads the slabs and throws
// resident::Error naming the file, the section and the first difference.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "lib/core/checkpoint_file.h"
#include "lib/nn/param_slab.h"
#include "lib/nn/slab_layout.h"

namespace resident::nn {

inline constexpr const char* kSlabCheckpointKind = "param-slab";
inline constexpr const char* kSlabSection = "slab";

// Host copy of what a checkpoint holds.
struct SlabState {
  std::uint64_t step = 0;     // AdamW updates done
  std::vector<float> params;  // [total_elements], padding included
  std::vector<float> m;       // [total_elements]
  std::vector<float> v;       // [total_elements]
};

// The section bytes of `state` laid out by `layout`. Throws resident::Error "size mismatch" when a
// vector's size is not layout.total_elements().
std::vector<std::byte> slab_section(const SlabLayout& layout, const SlabState& state);

// Reads section `name` of `file`, which must hold exactly `expected`'s tensors (same order,
// names, shapes, decay flags). Throws resident::Error: "missing section", "corrupt checkpoint"
// (fields no writer produces), "checkpoint mismatch" (naming the first tensor that differs and
// how).
SlabState read_slab_section(const CheckpointFile& file, std::string_view name,
                            const SlabLayout& expected);

// A file of kind kSlabCheckpointKind with the one section kSlabSection, written atomically (an
// I/O failure leaves nothing at `path`, and an existing file there untouched).
void write_slab_checkpoint(const std::filesystem::path& path, const SlabLayout& layout,
                           const SlabState& state);
// Reads and validates such a file (the container's errors, then read_slab_section's).
SlabState read_slab_checkpoint(const std::filesystem::path& path, const SlabLayout& expected);

// Checkpoint phase (blocking: ordered after the work on `stream`, then synchronized).
// The slab's params, m, v and step.
SlabState download_slab_state(const ParamSlab& slab, cudaStream_t stream);
// Replaces params, m, v and the step (and sets clip_scale to 1); grads are not touched. Throws
// resident::Error "size mismatch" before any copy when a vector's size is not the slab's.
void upload_slab_state(ParamSlab& slab, const SlabState& state, cudaStream_t stream);

}  // namespace resident::nn
