// SlabLayout: where each named tensor of a model lives in its parameter slab (host only; the
// device buffers are ParamSlab's). Tensors are placed in the order they are added, each at an
// offset that is a multiple of kSlabAlignment elements (64 floats = 256 bytes, so every view is
// aligned for float4 and starts a coalesced segment); the gaps between tensors and the tail up to
// total_elements() (also a multiple of kSlabAlignment) are padding, which a slab keeps at zero.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace resident::nn {

inline constexpr std::size_t kSlabAlignment = 64;        // elements (256 bytes of float)
inline constexpr std::size_t kMaxSlabNameLength = 1024;  // bytes

struct SlabTensor {
  std::string name;
  std::vector<std::size_t> shape;  // row-major extents, each >= 1
  bool decay = false;              // AdamW weight decay applies to this tensor
  std::size_t offset = 0;          // elements from the slab's start; multiple of kSlabAlignment
  std::size_t size = 0;            // elements: the product of shape
};

// "[4, 3]"
std::string format_shape(std::span<const std::size_t> shape);

class SlabLayout {
 public:
  // Appends a tensor after the last one. Throws resident::Error on an empty name, a name longer
  // than kMaxSlabNameLength, a duplicate name, a shape without dimensions (use {1} for a scalar),
  // an extent of 0, or a slab whose element count would overflow.
  const SlabTensor& add(std::string name, std::vector<std::size_t> shape, bool decay);

  // The tensor called `name`; throws resident::Error naming it when there is none.
  const SlabTensor& tensor(std::string_view name) const;
  // The tensor called `name`, or null.
  const SlabTensor* find(std::string_view name) const noexcept;

  std::span<const SlabTensor> tensors() const noexcept { return tensors_; }
  bool empty() const noexcept { return tensors_.empty(); }
  // Elements of the padded slab: a multiple of kSlabAlignment (0 when empty).
  std::size_t total_elements() const noexcept { return total_; }
  // Elements of the tensors alone (padding excluded).
  std::size_t parameter_count() const noexcept { return parameters_; }

  // [total_elements()]: 1 inside tensors with decay, 0 elsewhere (padding included).
  std::vector<std::uint8_t> decay_mask() const;

 private:
  std::vector<SlabTensor> tensors_;
  std::map<std::string, std::size_t, std::less<>> index_;
  std::size_t total_ = 0;
  std::size_t parameters_ = 0;
};

}  // namespace resident::nn
