#include "lib/nn/slab_checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <array>
#include <bit>
#include <cerrno>
#include <cstddef>
#include <cstring>
#include <fstream>
#include <limits>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <utility>

#include "kernels/core/error.h"

namespace resident::nn {

static_assert(std::endian::native == std::endian::little,
              "slab checkpoints are written in the host's byte order, which must be little-endian");

namespace {

constexpr std::array<char, 8> kMagic = {'R', 'S', 'D', 'S', 'L', 'A', 'B', '\0'};
constexpr std::size_t kFixedHeaderBytes = 8 + 4 + 4 + 8 + 8;
constexpr std::uint32_t kMaxRank = 64;

// 64-bit multiply-xorshift over 8-byte words. For a fixed rest of the file, each step is a
// bijection of the running value, so any change confined to one word always changes the sum.
class Checksum {
 public:
  // `bytes` must be a multiple of 8 long (the format pads every part to 8 bytes).
  void update(std::span<const std::byte> bytes) {
    for (std::size_t i = 0; i + 8 <= bytes.size(); i += 8) {
      std::uint64_t word;
      std::memcpy(&word, bytes.data() + i, 8);
      hash_ ^= word;
      hash_ *= 0x9E3779B97F4A7C15ull;
      hash_ ^= hash_ >> 32;
    }
  }
  std::uint64_t value() const noexcept { return hash_; }

 private:
  std::uint64_t hash_ = 0x52534453'4C414231ull;
};

template <class T>
void append(std::vector<std::byte>& out, const T& value) {
  const auto* bytes = reinterpret_cast<const std::byte*>(&value);
  out.insert(out.end(), bytes, bytes + sizeof(T));
}

std::span<const std::byte> bytes_of(const std::vector<float>& values) {
  return std::as_bytes(std::span<const float>(values));
}

std::string quoted(const std::filesystem::path& path) { return "\"" + path.string() + "\""; }

std::string errno_text(int code) { return std::system_category().message(code); }

// ---------------------------------------------------------------------------------------------
// Writing.

class TempFile {
 public:
  explicit TempFile(std::filesystem::path path) : path_(std::move(path)) {
    fd_ = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd_ < 0) fail("open", errno);
  }
  ~TempFile() {
    if (fd_ >= 0) (void)::close(fd_);
    if (!committed_) (void)::unlink(path_.c_str());
  }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;

  void write(std::span<const std::byte> bytes) {
    while (!bytes.empty()) {
      const ssize_t written = ::write(fd_, bytes.data(), bytes.size());
      if (written < 0) {
        if (errno == EINTR) continue;
        fail("write", errno);
      }
      bytes = bytes.subspan(static_cast<std::size_t>(written));
    }
  }

  // fsync, close, rename over `target`, then fsync the directory (best effort).
  void commit(const std::filesystem::path& target) {
    if (::fsync(fd_) != 0) fail("fsync", errno);
    const int fd = fd_;
    fd_ = -1;
    if (::close(fd) != 0) fail("close", errno);
    if (::rename(path_.c_str(), target.c_str()) != 0) fail("rename to " + quoted(target), errno);
    committed_ = true;
    std::filesystem::path directory = target.parent_path();
    if (directory.empty()) directory = ".";
    const int dir_fd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir_fd >= 0) {
      (void)::fsync(dir_fd);
      (void)::close(dir_fd);
    }
  }

 private:
  [[noreturn]] void fail(const std::string& what, int code) const {
    throw Error("write_slab_checkpoint: " + what + " of " + quoted(path_), "I/O error",
                errno_text(code), __FILE__, __LINE__);
  }

  std::filesystem::path path_;
  int fd_ = -1;
  bool committed_ = false;
};

// ---------------------------------------------------------------------------------------------
// Reading.

class Reader {
 public:
  explicit Reader(const std::filesystem::path& path) : path_(path) {
    std::error_code error;
    const std::uintmax_t size = std::filesystem::file_size(path, error);
    if (error)
      throw Error("read_slab_checkpoint(" + quoted(path) + ")", "I/O error", error.message(),
                  __FILE__, __LINE__);
    file_bytes_ = static_cast<std::uint64_t>(size);
    in_.open(path, std::ios::binary);
    if (!in_)
      throw Error("read_slab_checkpoint(" + quoted(path) + ")", "I/O error",
                  "cannot open for reading", __FILE__, __LINE__);
  }

  std::uint64_t file_bytes() const noexcept { return file_bytes_; }
  std::uint64_t position() const noexcept { return position_; }
  std::uint64_t remaining() const noexcept { return file_bytes_ - position_; }

  // Reads `count` bytes (throws "corrupt checkpoint" when the file ends first). Header bytes are
  // also kept for the checksum.
  void read(void* out, std::size_t count, const char* what, bool header = true) {
    if (count > remaining())
      corrupt("truncated: " + std::string(what) + " needs " + std::to_string(count) +
                  " bytes at offset " + std::to_string(position_) + ", the file has " +
                  std::to_string(file_bytes_),
              __LINE__);
    in_.read(static_cast<char*>(out), static_cast<std::streamsize>(count));
    if (!in_)
      throw Error("read_slab_checkpoint(" + quoted(path_) + ")", "I/O error",
                  std::string("reading ") + what + " at offset " + std::to_string(position_),
                  __FILE__, __LINE__);
    if (header) {
      const auto* bytes = static_cast<const std::byte*>(out);
      header_.insert(header_.end(), bytes, bytes + count);
    }
    position_ += count;
  }
  template <class T>
  T read_value(const char* what) {
    T value;
    read(&value, sizeof value, what);
    return value;
  }

  std::span<const std::byte> header() const noexcept { return header_; }

  [[noreturn]] void corrupt(const std::string& detail, int line) const {
    throw Error("read_slab_checkpoint(" + quoted(path_) + ")", "corrupt checkpoint", detail,
                __FILE__, line);
  }

 private:
  std::filesystem::path path_;
  std::ifstream in_;
  std::uint64_t file_bytes_ = 0;
  std::uint64_t position_ = 0;
  std::vector<std::byte> header_;
};

[[noreturn]] void mismatch(const std::filesystem::path& path, const std::string& detail, int line) {
  throw Error("read_slab_checkpoint(" + quoted(path) + ")", "checkpoint mismatch", detail, __FILE__,
              line);
}

// Throws naming the first difference between the file's layout and the expected one.
void compare_layouts(const std::filesystem::path& path, const SlabLayout& file,
                     const SlabLayout& expected) {
  const auto in_file = file.tensors();
  const auto in_slab = expected.tensors();
  for (std::size_t i = 0; i < in_file.size() && i < in_slab.size(); ++i) {
    const SlabTensor& f = in_file[i];
    const SlabTensor& s = in_slab[i];
    const std::string where = "tensor " + std::to_string(i) + ": ";
    if (f.name != s.name)
      mismatch(path, where + "\"" + f.name + "\" in the file, \"" + s.name + "\" in the slab",
               __LINE__);
    if (f.shape != s.shape)
      mismatch(path,
               where + "\"" + f.name + "\" has shape " + format_shape(f.shape) + " in the file, " +
                   format_shape(s.shape) + " in the slab",
               __LINE__);
    if (f.decay != s.decay)
      mismatch(path,
               where + "\"" + f.name + "\" has weight decay " + (f.decay ? "on" : "off") +
                   " in the file, " + (s.decay ? "on" : "off") + " in the slab",
               __LINE__);
  }
  if (in_file.size() != in_slab.size()) {
    const bool file_longer = in_file.size() > in_slab.size();
    const SlabTensor& extra = file_longer ? in_file[in_slab.size()] : in_slab[in_file.size()];
    mismatch(path,
             "the file has " + std::to_string(in_file.size()) + " tensors, the slab " +
                 std::to_string(in_slab.size()) + "; first extra: \"" + extra.name + "\" " +
                 format_shape(extra.shape) + (file_longer ? " in the file" : " in the slab"),
             __LINE__);
  }
}

}  // namespace

void write_slab_checkpoint(const std::filesystem::path& path, const SlabLayout& layout,
                           const SlabState& state) {
  const std::size_t total = layout.total_elements();
  const std::array<std::pair<const char*, const std::vector<float>*>, 3> parts = {
      {{"params", &state.params}, {"m", &state.m}, {"v", &state.v}}};
  for (const auto& [part, values] : parts)
    if (values->size() != total)
      throw Error("write_slab_checkpoint(" + quoted(path) + ")", "size mismatch",
                  std::string(part) + " has " + std::to_string(values->size()) +
                      " elements, the layout " + std::to_string(total),
                  __FILE__, __LINE__);

  std::vector<std::byte> header;
  header.insert(header.end(), reinterpret_cast<const std::byte*>(kMagic.data()),
                reinterpret_cast<const std::byte*>(kMagic.data()) + kMagic.size());
  append(header, kSlabCheckpointVersion);
  append(header, static_cast<std::uint32_t>(layout.tensors().size()));
  append(header, static_cast<std::uint64_t>(total));
  append(header, state.step);
  for (const SlabTensor& t : layout.tensors()) {
    append(header, static_cast<std::uint32_t>(t.name.size()));
    const auto* name = reinterpret_cast<const std::byte*>(t.name.data());
    header.insert(header.end(), name, name + t.name.size());
    append(header, static_cast<std::uint8_t>(t.decay ? 1 : 0));
    append(header, static_cast<std::uint32_t>(t.shape.size()));
    for (const std::size_t extent : t.shape) append(header, static_cast<std::uint64_t>(extent));
  }
  header.resize((header.size() + 7) / 8 * 8, std::byte{0});

  Checksum checksum;
  checksum.update(header);
  for (const auto* values : {&state.params, &state.m, &state.v}) checksum.update(bytes_of(*values));
  const std::uint64_t sum = checksum.value();

  std::filesystem::path temp = path;
  temp += ".tmp." + std::to_string(::getpid());
  TempFile file(temp);
  file.write(header);
  for (const auto* values : {&state.params, &state.m, &state.v}) file.write(bytes_of(*values));
  file.write(std::as_bytes(std::span<const std::uint64_t>(&sum, 1)));
  file.commit(path);
}

SlabState read_slab_checkpoint(const std::filesystem::path& path, const SlabLayout& expected) {
  Reader reader(path);
  if (reader.file_bytes() < kFixedHeaderBytes)
    reader.corrupt("truncated: " + std::to_string(reader.file_bytes()) +
                       " bytes, the fixed header alone has " + std::to_string(kFixedHeaderBytes),
                   __LINE__);
  std::array<char, 8> magic{};
  reader.read(magic.data(), magic.size(), "magic");
  if (magic != kMagic)
    throw Error("read_slab_checkpoint(" + quoted(path) + ")", "not a slab checkpoint",
                "the file does not start with the magic \"RSDSLAB\"", __FILE__, __LINE__);
  const auto version = reader.read_value<std::uint32_t>("version");
  if (version != kSlabCheckpointVersion)
    throw Error("read_slab_checkpoint(" + quoted(path) + ")", "unsupported checkpoint version",
                "the file has version " + std::to_string(version) + ", this build reads " +
                    std::to_string(kSlabCheckpointVersion),
                __FILE__, __LINE__);
  const auto tensor_count = reader.read_value<std::uint32_t>("tensor count");
  const auto total = reader.read_value<std::uint64_t>("total elements");
  SlabState state;
  state.step = reader.read_value<std::uint64_t>("step");

  SlabLayout in_file;
  for (std::uint32_t i = 0; i < tensor_count; ++i) {
    const std::string what = "tensor " + std::to_string(i);
    const auto name_bytes = reader.read_value<std::uint32_t>("a tensor name's length");
    if (name_bytes == 0 || name_bytes > kMaxSlabNameLength)
      reader.corrupt(what + " has a name of " + std::to_string(name_bytes) + " bytes", __LINE__);
    std::string name(name_bytes, '\0');
    reader.read(name.data(), name.size(), "a tensor name");
    const auto decay = reader.read_value<std::uint8_t>("a decay flag");
    if (decay > 1)
      reader.corrupt(what + " (\"" + name + "\") has decay flag " + std::to_string(decay),
                     __LINE__);
    const auto rank = reader.read_value<std::uint32_t>("a tensor rank");
    if (rank == 0 || rank > kMaxRank)
      reader.corrupt(what + " (\"" + name + "\") has rank " + std::to_string(rank), __LINE__);
    std::vector<std::size_t> shape(rank);
    for (std::size_t& extent : shape) {
      const auto value = reader.read_value<std::uint64_t>("a tensor extent");
      if (value > std::numeric_limits<std::size_t>::max())
        reader.corrupt(what + " (\"" + name + "\") has an extent of " + std::to_string(value),
                       __LINE__);
      extent = static_cast<std::size_t>(value);
    }
    try {
      in_file.add(std::move(name), std::move(shape), decay != 0);
    } catch (const Error& error) {
      reader.corrupt(what + " is not a valid tensor: " + error.what(), __LINE__);
    }
  }
  if (total != in_file.total_elements())
    reader.corrupt("the header says " + std::to_string(total) + " elements, its tensors lay out " +
                       std::to_string(in_file.total_elements()),
                   __LINE__);
  std::array<std::byte, 8> padding{};
  const std::size_t padding_bytes = (8 - reader.position() % 8) % 8;
  reader.read(padding.data(), padding_bytes, "header padding");
  for (const std::byte b : padding)
    if (b != std::byte{0}) reader.corrupt("the header's padding is not zero", __LINE__);

  // Exact size before any large allocation: header, three slabs, checksum.
  const std::uint64_t remaining = reader.remaining();
  const std::uint64_t most_total = remaining < sizeof(std::uint64_t)
                                       ? 0
                                       : (remaining - sizeof(std::uint64_t)) / (3 * sizeof(float));
  if (total > most_total)
    reader.corrupt("truncated: the file has " + std::to_string(reader.file_bytes()) +
                       " bytes, too few for the " + std::to_string(total) +
                       " elements its header declares",
                   __LINE__);
  const std::uint64_t slab_bytes = total * sizeof(float);
  const std::uint64_t needed = reader.position() + 3 * slab_bytes + sizeof(std::uint64_t);
  if (reader.file_bytes() != needed)
    reader.corrupt(std::string(reader.file_bytes() < needed ? "truncated" : "trailing bytes") +
                       ": the file has " + std::to_string(reader.file_bytes()) +
                       " bytes, its header implies " + std::to_string(needed),
                   __LINE__);

  Checksum checksum;
  checksum.update(reader.header());
  const std::array<std::pair<std::vector<float>*, const char*>, 3> parts = {
      {{&state.params, "params"}, {&state.m, "m"}, {&state.v, "v"}}};
  for (const auto& [values, what] : parts) {
    values->resize(static_cast<std::size_t>(total));
    reader.read(values->data(), static_cast<std::size_t>(slab_bytes), what, /*header=*/false);
    checksum.update(bytes_of(*values));
  }
  std::uint64_t stored = 0;
  reader.read(&stored, sizeof stored, "checksum", /*header=*/false);
  if (stored != checksum.value())
    reader.corrupt("checksum mismatch: the file's contents changed after it was written", __LINE__);

  compare_layouts(path, in_file, expected);
  if (in_file.total_elements() != expected.total_elements())  // same tensors, same rule: defensive
    mismatch(path,
             "the file lays out " + std::to_string(in_file.total_elements()) +
                 " elements, the slab " + std::to_string(expected.total_elements()),
             __LINE__);
  return state;
}

}  // namespace resident::nn
