// The checkpoint file of a parameter slab (host only: ParamSlab::save/load do the device copies
// around these two calls). A file holds the layout (names, shapes, decay flags), the AdamW step
// and the params, m and v slabs, padding included; grads are not saved. Little-endian:
//
//   bytes        field
//   8            magic "RSDSLAB\0"
//   4            version (kSlabCheckpointVersion)
//   4            tensor count T
//   8            total elements N (the padded slab, as SlabLayout lays it out)
//   8            step (AdamW updates done)
//   T times      u32 name length, the name's bytes, u8 decay (0 or 1), u32 rank R, R x u64 extents
//   0..7         zero bytes up to a multiple of 8
//   3 x 4N       params, m, v (fp32)
//   8            checksum of every byte before it (64-bit multiply-xorshift over 8-byte words)
//
// The writer writes a temporary file beside `path`, fsyncs it and renames it over `path`, so a
// reader sees the old file or the new one, never a torn one. The reader validates everything
// (magic, version, structure, exact file size, checksum, then the layout against the one
// expected) before it returns, and throws resident::Error naming what is wrong.
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

#include "lib/nn/slab_layout.h"

namespace resident::nn {

inline constexpr std::uint32_t kSlabCheckpointVersion = 1;

// Host copy of what a checkpoint holds.
struct SlabState {
  std::uint64_t step = 0;     // AdamW updates done
  std::vector<float> params;  // [total_elements], padding included
  std::vector<float> m;       // [total_elements]
  std::vector<float> v;       // [total_elements]
};

// Throws resident::Error when a vector's size is not layout.total_elements() or on an I/O
// failure (nothing is left at `path` then, and an existing file there is untouched).
void write_slab_checkpoint(const std::filesystem::path& path, const SlabLayout& layout,
                           const SlabState& state);

// Reads `path`, which must hold exactly `expected`'s tensors (same order, names, shapes, decay
// flags). Throws resident::Error: "not a slab checkpoint", "unsupported checkpoint version",
// "corrupt checkpoint" (truncated, trailing bytes, malformed, checksum mismatch), "checkpoint
// mismatch" (naming the first tensor that differs and how), or an I/O error.
SlabState read_slab_checkpoint(const std::filesystem::path& path, const SlabLayout& expected);

}  // namespace resident::nn
