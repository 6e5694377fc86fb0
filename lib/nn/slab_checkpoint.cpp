#include "lib/nn/slab_checkpoint.h"

#include <array>
#include <cstddef>
#include <limits>
#include <span>
#include <string>
#include <utility>

#include "kernels/core/error.h"

namespace resident::nn {

namespace {

constexpr std::uint64_t kMaxRank = 64;
// The fewest bytes a tensor takes in a section: an empty name's count, the decay flag, an empty
// extents array's count. Bounds a tensor count read from a file before anything loops over it.
constexpr std::size_t kMinTensorBytes = 8 + 1 + 8;

void check_sizes(const char* call, const SlabLayout& layout, const SlabState& state) {
  const std::size_t total = layout.total_elements();
  const std::array<std::pair<const char*, const std::vector<float>*>, 3> parts = {
      {{"params", &state.params}, {"m", &state.m}, {"v", &state.v}}};
  for (const auto& [part, values] : parts)
    if (values->size() != total)
      throw Error(call, "size mismatch",
                  std::string(part) + " has " + std::to_string(values->size()) +
                      " elements, the layout " + std::to_string(total),
                  __FILE__, __LINE__);
}

// Throws naming the first difference between the file's layout and the expected one.
void compare_layouts(const SectionReader& reader, const SlabLayout& file,
                     const SlabLayout& expected) {
  const auto in_file = file.tensors();
  const auto in_slab = expected.tensors();
  for (std::size_t i = 0; i < in_file.size() && i < in_slab.size(); ++i) {
    const SlabTensor& f = in_file[i];
    const SlabTensor& s = in_slab[i];
    const std::string where = "tensor " + std::to_string(i) + ": ";
    if (f.name != s.name)
      reader.mismatch(where + "\"" + f.name + "\" in the file, \"" + s.name + "\" in the slab");
    if (f.shape != s.shape)
      reader.mismatch(where + "\"" + f.name + "\" has shape " + format_shape(f.shape) +
                      " in the file, " + format_shape(s.shape) + " in the slab");
    if (f.decay != s.decay)
      reader.mismatch(where + "\"" + f.name + "\" has weight decay " + (f.decay ? "on" : "off") +
                      " in the file, " + (s.decay ? "on" : "off") + " in the slab");
  }
  if (in_file.size() != in_slab.size()) {
    const bool file_longer = in_file.size() > in_slab.size();
    const SlabTensor& extra = file_longer ? in_file[in_slab.size()] : in_slab[in_file.size()];
    reader.mismatch("the file has " + std::to_string(in_file.size()) + " tensors, the slab " +
                    std::to_string(in_slab.size()) + "; first extra: \"" + extra.name + "\" " +
                    format_shape(extra.shape) + (file_longer ? " in the file" : " in the slab"));
  }
}

}  // namespace

std::vector<std::byte> slab_section(const SlabLayout& layout, const SlabState& state) {
  check_sizes("slab_section", layout, state);
  SectionWriter out;
  out.put<std::uint64_t>(layout.tensors().size());
  for (const SlabTensor& t : layout.tensors()) {
    std::vector<std::uint64_t> extents(t.shape.begin(), t.shape.end());
    out.put_string(t.name)
        .put<std::uint8_t>(t.decay ? 1 : 0)
        .put_array<std::uint64_t>(extents);
  }
  out.put<std::uint64_t>(state.step)
      .put_array<float>(state.params)
      .put_array<float>(state.m)
      .put_array<float>(state.v);
  return out.take();
}

SlabState read_slab_section(const CheckpointFile& file, std::string_view name,
                            const SlabLayout& expected) {
  SectionReader r = file.reader(name);
  const auto tensor_count = r.get<std::uint64_t>("tensor count");
  if (tensor_count > r.remaining() / kMinTensorBytes)
    r.corrupt(std::to_string(tensor_count) + " tensors in " + std::to_string(r.remaining()) +
              " bytes");
  SlabLayout in_file;
  for (std::uint64_t i = 0; i < tensor_count; ++i) {
    const std::string what = "tensor " + std::to_string(i);
    std::string tensor_name = r.get_string("tensor name");
    const auto decay = r.get<std::uint8_t>("decay flag");
    if (decay > 1)
      r.corrupt(what + " (\"" + tensor_name + "\") has decay flag " + std::to_string(decay));
    const std::vector<std::uint64_t> extents = r.get_array<std::uint64_t>("tensor extents");
    if (extents.empty() || extents.size() > kMaxRank)
      r.corrupt(what + " (\"" + tensor_name + "\") has rank " + std::to_string(extents.size()));
    std::vector<std::size_t> shape;
    for (const std::uint64_t extent : extents) {
      if (extent > std::numeric_limits<std::size_t>::max())
        r.corrupt(what + " (\"" + tensor_name + "\") has an extent of " + std::to_string(extent));
      shape.push_back(static_cast<std::size_t>(extent));
    }
    try {
      in_file.add(std::move(tensor_name), std::move(shape), decay != 0);
    } catch (const Error& error) {
      r.corrupt(what + " is not a valid tensor: " + error.what());
    }
  }
  SlabState state;
  state.step = r.get<std::uint64_t>("step");
  compare_layouts(r, in_file, expected);
  // Same tensors, same layout rule: another count here is a file no writer produced.
  const std::size_t total = expected.total_elements();
  state.params = r.get_array<float>("params", total);
  state.m = r.get_array<float>("m", total);
  state.v = r.get_array<float>("v", total);
  r.finish();
  return state;
}

void write_slab_checkpoint(const std::filesystem::path& path, const SlabLayout& layout,
                           const SlabState& state) {
  check_sizes(("write_slab_checkpoint(\"" + path.string() + "\")").c_str(), layout, state);
  CheckpointWriter out(kSlabCheckpointKind);
  out.add(kSlabSection, slab_section(layout, state));
  out.write(path);
}

SlabState read_slab_checkpoint(const std::filesystem::path& path, const SlabLayout& expected) {
  return read_slab_section(CheckpointFile::read(path, kSlabCheckpointKind), kSlabSection,
                           expected);
}

SlabState download_slab_state(const ParamSlab& slab, cudaStream_t stream) {
  SlabState state;
  state.params = slab.download(SlabPart::Params, stream);
  state.m = slab.download(SlabPart::AdamM, stream);
  state.v = slab.download(SlabPart::AdamV, stream);
  state.step = slab.read_step(stream);
  return state;
}

void upload_slab_state(ParamSlab& slab, const SlabState& state, cudaStream_t stream) {
  check_sizes("upload_slab_state", slab.layout(), state);
  const ParamSlab::OptimizerViews views = slab.optimizer_views();
  const std::size_t bytes = views.n * sizeof(float);
  const float one = 1.0f;
  RESIDENT_CUDA_CHECK(
      cudaMemcpyAsync(views.params, state.params.data(), bytes, cudaMemcpyHostToDevice, stream));
  RESIDENT_CUDA_CHECK(
      cudaMemcpyAsync(views.m, state.m.data(), bytes, cudaMemcpyHostToDevice, stream));
  RESIDENT_CUDA_CHECK(
      cudaMemcpyAsync(views.v, state.v.data(), bytes, cudaMemcpyHostToDevice, stream));
  RESIDENT_CUDA_CHECK(cudaMemcpyAsync(views.step, &state.step, sizeof state.step,
                                      cudaMemcpyHostToDevice, stream));
  RESIDENT_CUDA_CHECK(
      cudaMemcpyAsync(views.clip_scale, &one, sizeof one, cudaMemcpyHostToDevice, stream));
  RESIDENT_CUDA_CHECK(cudaStreamSynchronize(stream));  // the host sources must outlive the copies
}

}  // namespace resident::nn
