#include "lib/nn/slab_layout.h"

#include <algorithm>
#include <limits>
#include <utility>

#include "kernels/core/error.h"

namespace resident::nn {

namespace {

[[noreturn]] void invalid_tensor(const std::string& name, const std::string& detail, int line) {
  throw Error("SlabLayout::add(\"" + name + "\")", "invalid tensor", detail, __FILE__, line);
}

}  // namespace

std::string format_shape(std::span<const std::size_t> shape) {
  std::string text = "[";
  for (std::size_t d = 0; d < shape.size(); ++d) {
    if (d > 0) text += ", ";
    text += std::to_string(shape[d]);
  }
  return text + "]";
}

const SlabTensor& SlabLayout::add(std::string name, std::vector<std::size_t> shape, bool decay) {
  constexpr std::size_t kMax = std::numeric_limits<std::size_t>::max();
  if (name.empty()) invalid_tensor(name, "the name is empty", __LINE__);
  if (name.size() > kMaxSlabNameLength)
    invalid_tensor(name.substr(0, 32) + "...",
                   "the name has " + std::to_string(name.size()) + " bytes, at most " +
                       std::to_string(kMaxSlabNameLength) + " allowed",
                   __LINE__);
  if (index_.contains(name)) invalid_tensor(name, "a tensor of this name exists already", __LINE__);
  if (shape.empty())
    invalid_tensor(name, "the shape has no dimensions (use {1} for a scalar)", __LINE__);
  std::size_t size = 1;
  for (const std::size_t extent : shape) {
    if (extent == 0)
      invalid_tensor(name, "shape " + format_shape(shape) + " has an extent of 0", __LINE__);
    if (size > kMax / extent)
      invalid_tensor(name, "shape " + format_shape(shape) + " overflows the element count",
                     __LINE__);
    size *= extent;
  }
  const std::size_t offset = total_;
  if (size > kMax - offset - (kSlabAlignment - 1))
    invalid_tensor(name, "the slab's element count would overflow", __LINE__);
  const std::size_t end = offset + size;
  total_ = (end + kSlabAlignment - 1) / kSlabAlignment * kSlabAlignment;
  parameters_ += size;
  index_.emplace(name, tensors_.size());
  tensors_.push_back(SlabTensor{std::move(name), std::move(shape), decay, offset, size});
  return tensors_.back();
}

const SlabTensor* SlabLayout::find(std::string_view name) const noexcept {
  const auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

const SlabTensor& SlabLayout::tensor(std::string_view name) const {
  const SlabTensor* found = find(name);
  if (found == nullptr)
    throw Error("SlabLayout::tensor(\"" + std::string(name) + "\")", "unknown tensor",
                "the slab has " + std::to_string(tensors_.size()) + " tensors, none of this name",
                __FILE__, __LINE__);
  return *found;
}

std::vector<std::uint8_t> SlabLayout::decay_mask() const {
  std::vector<std::uint8_t> mask(total_, 0);
  for (const SlabTensor& t : tensors_)
    if (t.decay)
      std::fill(mask.begin() + static_cast<std::ptrdiff_t>(t.offset),
                mask.begin() + static_cast<std::ptrdiff_t>(t.offset + t.size), std::uint8_t{1});
  return mask;
}

}  // namespace resident::nn
