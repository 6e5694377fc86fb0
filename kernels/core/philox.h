// Philox seed/offset bookkeeping on the host. A random stream is keyed by (seed, stream id);
// each launch that draws random numbers takes the next offset, so the same seed, the same
// stream ids and the same sequence of launches reproduce every draw bit for bit.
// Device code initializes its cuRAND Philox state with kernels/core/philox.cuh:
//   subsequence = element index, offset = PhiloxKey::offset, seed = PhiloxKey::seed.
#pragma once

#include <cstdint>

namespace resident {

struct PhiloxKey {
  std::uint64_t seed = 0;    // already mixed with the stream id
  std::uint64_t offset = 0;  // first 32-bit draw of this launch within each subsequence
};

// splitmix64 finalizer: a bijective mix used to derive per-stream seeds.
constexpr std::uint64_t mix_seed(std::uint64_t seed, std::uint64_t stream_id) noexcept {
  std::uint64_t z = seed + 0x9E3779B97F4A7C15ull * (stream_id + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

class PhiloxStream {
 public:
  PhiloxStream(std::uint64_t seed, std::uint64_t stream_id) noexcept
      : seed_(mix_seed(seed, stream_id)) {}

  // The key for the next launch, which draws at most `draws_per_element` 32-bit values per
  // element; offsets are rounded up to whole Philox blocks of four.
  PhiloxKey next(std::uint64_t draws_per_element) noexcept {
    const PhiloxKey key{seed_, offset_};
    offset_ += (draws_per_element + 3) / 4 * 4;
    return key;
  }
  std::uint64_t offset() const noexcept { return offset_; }
  // Restores a position saved in a checkpoint.
  void set_offset(std::uint64_t offset) noexcept { offset_ = offset; }

 private:
  std::uint64_t seed_;
  std::uint64_t offset_ = 0;
};

}  // namespace resident
