// ParamSlab and its SlabLayout: tensor placement and 256-byte alignment, the decay mask and the
// layout's argument checks (CPU, run everywhere); on a GPU: views as aligned slices of one buffer
// per part, the state finalize() leaves, zero_grads, the setup copies, and save/load through the
// device (round trip bit for bit, training resumes identically, and a mismatched or corrupt file
// throws and leaves the device untouched). The checkpoint format itself is tested without a GPU
// in slab_checkpoint_test.cpp.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "kernels/core/error.h"
#include "lib/core/scalar_readback.h"
#include "lib/core/stream.h"
#include "lib/nn/param_slab.h"
#include "tests/support/gpu.h"

namespace {

using namespace resident;
namespace fs = std::filesystem;

// ---------------------------------------------------------------------------------------------
// Layout (no GPU).

TEST(SlabLayout, PlacesTensorsInOrderAt256ByteOffsets) {
  nn::SlabLayout layout;
  layout.add("a", {3, 5}, true);     // 15 elements at 0
  layout.add("b", {64}, false);      // exactly one alignment unit, at 64
  layout.add("c", {1}, true);        // at 128
  layout.add("d", {5, 13}, false);   // 65 elements at 192, ending at 257
  layout.add("e", {2, 3, 4}, true);  // 24 elements at 320
  const std::vector<std::size_t> offsets = {0, 64, 128, 192, 320};
  const std::vector<std::size_t> sizes = {15, 64, 1, 65, 24};
  ASSERT_EQ(layout.tensors().size(), offsets.size());
  for (std::size_t i = 0; i < offsets.size(); ++i) {
    const nn::SlabTensor& t = layout.tensors()[i];
    EXPECT_EQ(t.offset, offsets[i]) << t.name;
    EXPECT_EQ(t.size, sizes[i]) << t.name;
    EXPECT_EQ(t.offset % nn::kSlabAlignment, 0u) << t.name;
    EXPECT_EQ(t.offset * sizeof(float) % 256, 0u) << t.name;
    EXPECT_EQ(&layout.tensor(t.name), &t);
  }
  EXPECT_EQ(layout.total_elements(), 384u);
  EXPECT_EQ(layout.parameter_count(), 15u + 64 + 1 + 65 + 24);
  EXPECT_EQ(layout.tensor("e").shape, (std::vector<std::size_t>{2, 3, 4}));
  EXPECT_EQ(layout.find("nope"), nullptr);

  const std::vector<std::uint8_t> mask = layout.decay_mask();
  ASSERT_EQ(mask.size(), 384u);
  for (std::size_t i = 0; i < mask.size(); ++i) {
    std::uint8_t want = 0;
    for (const nn::SlabTensor& t : layout.tensors())
      if (i >= t.offset && i < t.offset + t.size) want = t.decay ? 1 : 0;
    ASSERT_EQ(mask[i], want) << "element " << i;
  }
  EXPECT_EQ(nn::format_shape(layout.tensor("d").shape), "[5, 13]");
}

TEST(SlabLayout, RejectsBadTensorsAndStaysUnchanged) {
  nn::SlabLayout layout;
  layout.add("w", {4, 3}, true);
  EXPECT_THROW(layout.add("w", {2}, false), Error);     // duplicate
  EXPECT_THROW(layout.add("", {2}, false), Error);      // empty name
  EXPECT_THROW(layout.add("x", {}, false), Error);      // no dimensions
  EXPECT_THROW(layout.add("x", {3, 0}, false), Error);  // zero extent
  EXPECT_THROW(layout.add(std::string(nn::kMaxSlabNameLength + 1, 'n'), {1}, false), Error);
  EXPECT_THROW(layout.add("x", {std::size_t{1} << 40, std::size_t{1} << 40}, false), Error);
  EXPECT_THROW(layout.tensor("x"), Error);
  EXPECT_EQ(layout.tensors().size(), 1u);
  EXPECT_EQ(layout.total_elements(), 64u);
  try {
    layout.add("w", {2}, false);
  } catch (const Error& error) {
    EXPECT_NE(std::string(error.what()).find("\"w\""), std::string::npos) << error.what();
  }
}

TEST(ParamSlab, ViewsAndHotPathRefuseAnUnfinalizedSlab) {
  nn::ParamSlab slab;
  slab.add("w", {2, 2}, true);
  EXPECT_FALSE(slab.finalized());
  EXPECT_THROW((void)slab.param("w"), Error);
  EXPECT_THROW((void)slab.grad("w"), Error);
  EXPECT_THROW(slab.zero_grads(nullptr), Error);
  EXPECT_THROW(slab.global_grad_norm_and_clip(1.0f, nullptr), Error);
  EXPECT_THROW(slab.adamw_step({}, nullptr), Error);
  EXPECT_THROW(slab.save("unused", nullptr), Error);
  nn::ParamSlab empty;
  EXPECT_THROW(empty.finalize(), Error);
}

// ---------------------------------------------------------------------------------------------
// On the device.

void declare_tensors(nn::ParamSlab& slab) {
  slab.add("fc1.weight", {33, 17}, true);
  slab.add("fc1.bias", {33}, false);
  slab.add("fc2.weight", {3, 33}, true);
  slab.add("fc2.bias", {3}, false);
}

std::vector<float> random_slab(const nn::SlabLayout& layout, std::mt19937_64& rng) {
  std::uniform_real_distribution<float> value(-1.0f, 1.0f);
  std::vector<float> v(layout.total_elements(), 0.0f);
  for (const nn::SlabTensor& t : layout.tensors())
    for (std::size_t i = 0; i < t.size; ++i) v[t.offset + i] = value(rng);
  return v;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

constexpr nn::SlabPart kParts[] = {nn::SlabPart::Params, nn::SlabPart::Grads, nn::SlabPart::AdamM,
                                   nn::SlabPart::AdamV};

struct Snapshot {
  std::vector<float> parts[4];
  std::uint64_t step = 0;
};

Snapshot snapshot(const nn::ParamSlab& slab, cudaStream_t stream) {
  Snapshot s;
  for (std::size_t i = 0; i < 4; ++i) s.parts[i] = slab.download(kParts[i], stream);
  s.step = slab.read_step(stream);
  return s;
}

void expect_same(const Snapshot& a, const Snapshot& b, const char* when) {
  const char* names[] = {"params", "grads", "m", "v"};
  for (std::size_t i = 0; i < 4; ++i)
    EXPECT_TRUE(same_bits(a.parts[i], b.parts[i])) << names[i] << " differ " << when;
  EXPECT_EQ(a.step, b.step) << when;
}

// A scratch directory removed at the end of the test.
class TempDir {
 public:
  TempDir()
      : path_(fs::path(::testing::TempDir()) /
              ("param_slab_test_" + std::to_string(::getpid()) + "_" +
               ::testing::UnitTest::GetInstance()->current_test_info()->name())) {
    fs::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ignored;
    fs::remove_all(path_, ignored);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

TEST(ParamSlab, ViewsAreAlignedSlicesOfOneBufferPerPart) {
  RESIDENT_REQUIRE_GPU();
  nn::ParamSlab slab;
  declare_tensors(slab);
  slab.finalize();
  EXPECT_THROW(slab.add("late", {1}, false), Error);
  EXPECT_THROW(slab.finalize(), Error);
  EXPECT_THROW((void)slab.param("missing"), Error);
  const nn::ParamSlab& read_only = slab;
  for (const nn::SlabTensor& t : slab.layout().tensors()) {
    EXPECT_EQ(slab.param(t.name), slab.params() + t.offset) << t.name;
    EXPECT_EQ(slab.grad(t.name), slab.grads() + t.offset) << t.name;
    EXPECT_EQ(read_only.param(t.name), read_only.params() + t.offset) << t.name;
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(slab.param(t.name)) % 256, 0u) << t.name;
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(slab.grad(t.name)) % 256, 0u) << t.name;
    EXPECT_EQ(slab.size(t.name), t.size);
    EXPECT_EQ(slab.shape(t.name), t.shape);
  }
  for (const void* base :
       {static_cast<const void*>(slab.params()), static_cast<const void*>(slab.grads()),
        static_cast<const void*>(slab.adam_m()), static_cast<const void*>(slab.adam_v())})
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(base) % 256, 0u);
  EXPECT_EQ(slab.total_elements(), slab.layout().total_elements());
}

TEST(ParamSlab, FinalizeZeroesTheStateAndUploadsTheMask) {
  RESIDENT_REQUIRE_GPU();
  nn::ParamSlab slab;
  declare_tensors(slab);
  slab.finalize();
  const Stream stream;
  const std::vector<float> zeros(slab.total_elements(), 0.0f);
  for (const nn::SlabPart part : kParts)
    EXPECT_TRUE(same_bits(slab.download(part, stream.get()), zeros));
  EXPECT_EQ(slab.read_step(stream.get()), 0u);
  ScalarReadback<float> scale;
  scale.enqueue(slab.clip_scale(), stream.get());
  EXPECT_EQ(scale.wait(), 1.0f);
  std::vector<std::uint8_t> mask(slab.total_elements());
  ASSERT_EQ(cudaMemcpy(mask.data(), slab.decay_mask(), mask.size(), cudaMemcpyDeviceToHost),
            cudaSuccess);
  EXPECT_EQ(mask, slab.layout().decay_mask());
}

TEST(ParamSlab, ZeroGradsClearsTheGradsOnly) {
  RESIDENT_REQUIRE_GPU();
  nn::ParamSlab slab;
  declare_tensors(slab);
  slab.finalize();
  const Stream stream;
  std::mt19937_64 rng(0x2E20);
  const std::vector<float> p = random_slab(slab.layout(), rng), g = random_slab(slab.layout(), rng);
  slab.upload(nn::SlabPart::Params, p, stream.get());
  slab.upload(nn::SlabPart::Grads, g, stream.get());
  EXPECT_TRUE(same_bits(slab.download(nn::SlabPart::Grads, stream.get()), g));
  slab.zero_grads(stream.get());
  EXPECT_TRUE(same_bits(slab.download(nn::SlabPart::Grads, stream.get()),
                        std::vector<float>(slab.total_elements(), 0.0f)));
  EXPECT_TRUE(same_bits(slab.download(nn::SlabPart::Params, stream.get()), p));
}

TEST(ParamSlab, UploadsCheckSizesAndPadding) {
  RESIDENT_REQUIRE_GPU();
  nn::ParamSlab slab;
  declare_tensors(slab);
  slab.finalize();
  const Stream stream;
  std::vector<float> values(slab.total_elements(), 0.0f);
  values[slab.layout().tensor("fc1.bias").offset + 33] = 1.0f;  // first padding element after it
  EXPECT_THROW(slab.upload(nn::SlabPart::Params, values, stream.get()), Error);
  values.pop_back();
  EXPECT_THROW(slab.upload(nn::SlabPart::Params, values, stream.get()), Error);
  const std::vector<float> bias = {1.0f, 2.0f, 3.0f};
  slab.upload(nn::SlabPart::AdamM, "fc2.bias", bias, stream.get());
  const std::vector<float> m = slab.download(nn::SlabPart::AdamM, stream.get());
  const std::size_t at = slab.layout().tensor("fc2.bias").offset;
  EXPECT_EQ(std::vector<float>(m.begin() + static_cast<std::ptrdiff_t>(at),
                               m.begin() + static_cast<std::ptrdiff_t>(at + 3)),
            bias);
  EXPECT_THROW(
      slab.upload(nn::SlabPart::AdamM, "fc2.bias", std::vector<float>(4, 0.0f), stream.get()),
      Error);
  EXPECT_THROW(slab.upload(nn::SlabPart::AdamM, "nope", bias, stream.get()), Error);
}

// Trains `slab` for `steps` AdamW steps on grads drawn from `rng`.
void train(nn::ParamSlab& slab, std::size_t steps, std::mt19937_64& rng, cudaStream_t stream) {
  const nn::AdamWConfig config{.lr = 1e-2, .weight_decay = 0.1};
  for (std::size_t i = 0; i < steps; ++i) {
    slab.upload(nn::SlabPart::Grads, random_slab(slab.layout(), rng), stream);
    slab.global_grad_norm_and_clip(2.0f, stream);
    slab.adamw_step(config, stream);
  }
}

TEST(ParamSlab, SaveLoadRoundTripsAndTrainingResumesIdentically) {
  RESIDENT_REQUIRE_GPU();
  const TempDir dir;
  const fs::path file = dir.path() / "slab.ckpt";
  const Stream stream;
  nn::ParamSlab trained, restored;
  declare_tensors(trained);
  declare_tensors(restored);
  trained.finalize();
  restored.finalize();
  std::mt19937_64 rng(0x5A7E);
  trained.upload(nn::SlabPart::Params, random_slab(trained.layout(), rng), stream.get());
  train(trained, 3, rng, stream.get());
  trained.save(file, stream.get());
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 1)
      << "the temporary file must be gone";

  restored.load(file, stream.get());
  Snapshot a = snapshot(trained, stream.get()), b = snapshot(restored, stream.get());
  EXPECT_EQ(b.step, 3u);
  b.parts[1] = a.parts[1];  // grads are not part of a checkpoint
  expect_same(a, b, "after load");

  // Both continue on the same grads: the step (bias correction) came back too.
  std::mt19937_64 rng_a(0xC0), rng_b(0xC0);
  train(trained, 2, rng_a, stream.get());
  train(restored, 2, rng_b, stream.get());
  expect_same(snapshot(trained, stream.get()), snapshot(restored, stream.get()),
              "after two more steps");

  // Saving over an existing checkpoint replaces it.
  trained.save(file, stream.get());
  restored.load(file, stream.get());
  EXPECT_EQ(restored.read_step(stream.get()), 5u);
}

TEST(ParamSlab, LoadOfAMismatchedOrCorruptFileThrowsAndChangesNothing) {
  RESIDENT_REQUIRE_GPU();
  const TempDir dir;
  const Stream stream;
  std::mt19937_64 rng(0xBAD);

  nn::ParamSlab source;
  declare_tensors(source);
  source.finalize();
  source.upload(nn::SlabPart::Params, random_slab(source.layout(), rng), stream.get());
  train(source, 1, rng, stream.get());
  const fs::path good = dir.path() / "good.ckpt";
  source.save(good, stream.get());

  // The victim: a slab with its own state, which no failed load may touch.
  auto expect_load_fails = [&](nn::ParamSlab& victim, const fs::path& file, const char* needle) {
    const Snapshot before = snapshot(victim, stream.get());
    try {
      victim.load(file, stream.get());
      ADD_FAILURE() << "loading " << file << " did not throw";
    } catch (const Error& error) {
      EXPECT_NE(std::string(error.what()).find(needle), std::string::npos)
          << "message lacks \"" << needle << "\": " << error.what();
      std::printf("  %s\n", error.what());
    }
    expect_same(snapshot(victim, stream.get()), before, "after a failed load");
  };
  auto make_victim = [&](nn::ParamSlab& victim) {
    victim.finalize();
    victim.upload(nn::SlabPart::Params, random_slab(victim.layout(), rng), stream.get());
    train(victim, 2, rng, stream.get());
  };

  {  // Another shape of one tensor.
    nn::ParamSlab victim;
    victim.add("fc1.weight", {33, 18}, true);
    victim.add("fc1.bias", {33}, false);
    victim.add("fc2.weight", {3, 33}, true);
    victim.add("fc2.bias", {3}, false);
    make_victim(victim);
    expect_load_fails(victim, good, "fc1.weight");
  }
  {  // Another name, another decay flag, a missing tensor.
    nn::ParamSlab renamed, flag, shorter;
    renamed.add("fc1.weight", {33, 17}, true);
    renamed.add("fc1.b", {33}, false);
    renamed.add("fc2.weight", {3, 33}, true);
    renamed.add("fc2.bias", {3}, false);
    flag.add("fc1.weight", {33, 17}, true);
    flag.add("fc1.bias", {33}, true);
    flag.add("fc2.weight", {3, 33}, true);
    flag.add("fc2.bias", {3}, false);
    shorter.add("fc1.weight", {33, 17}, true);
    shorter.add("fc1.bias", {33}, false);
    shorter.add("fc2.weight", {3, 33}, true);
    make_victim(renamed);
    make_victim(flag);
    make_victim(shorter);
    expect_load_fails(renamed, good, "fc1.b");
    expect_load_fails(flag, good, "decay");
    expect_load_fails(shorter, good, "fc2.bias");
  }
  nn::ParamSlab victim;
  declare_tensors(victim);
  make_victim(victim);
  std::vector<char> bytes;
  {
    std::ifstream in(good, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  }
  auto write = [&](const char* name, const std::vector<char>& content) {
    const fs::path path = dir.path() / name;
    std::ofstream(path, std::ios::binary)
        .write(content.data(), static_cast<std::streamsize>(content.size()));
    return path;
  };
  {
    std::vector<char> flipped = bytes;
    flipped[flipped.size() / 2] ^= 0x10;  // inside the params
    expect_load_fails(victim, write("flipped.ckpt", flipped), "checksum");
  }
  {
    std::vector<char> truncated(bytes.begin(), bytes.end() - 5);
    expect_load_fails(victim, write("truncated.ckpt", truncated), "truncated");
  }
  {
    std::vector<char> foreign = bytes;
    foreign[0] = 'X';
    expect_load_fails(victim, write("foreign.ckpt", foreign), "not a checkpoint");
  }
  expect_load_fails(victim, dir.path() / "missing.ckpt", "I/O error");
  // The good file still loads.
  victim.load(good, stream.get());
  Snapshot a = snapshot(source, stream.get()), b = snapshot(victim, stream.get());
  b.parts[1] = a.parts[1];
  expect_same(a, b, "after loading the good file");
}

}  // namespace
