#include "lib/rl/ppo/ppo_checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>

#include "kernels/core/error.h"

namespace resident::ppo {

namespace {

constexpr char kMagic[8] = {'R', 'S', 'D', 'P', 'P', 'O', '\0', '\0'};
constexpr std::uint64_t kMaxSection = std::uint64_t{1} << 40;

std::uint64_t fnv1a(const std::byte* data, std::size_t n) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (std::size_t i = 0; i < n; ++i) h = (h ^ static_cast<std::uint8_t>(data[i])) * 0x100000001b3ull;
  return h;
}

class Writer {
 public:
  void u64(std::uint64_t v) { raw(&v, sizeof v); }
  void raw(const void* p, std::size_t n) {
    const auto* b = static_cast<const std::byte*>(p);
    bytes.insert(bytes.end(), b, b + n);
  }
  void section(const void* p, std::size_t n) {
    u64(n);
    raw(p, n);
    bytes.resize((bytes.size() + 7) / 8 * 8, std::byte{0});
  }
  std::vector<std::byte> bytes;
};

[[noreturn]] void corrupt(const std::filesystem::path& path, const std::string& what, int line) {
  throw Error("read_ppo_checkpoint(" + path.string() + ")", "corrupt checkpoint", what, __FILE__,
              line);
}

class Reader {
 public:
  Reader(const std::vector<std::byte>& b, std::size_t end, const std::filesystem::path& path)
      : bytes_(b), end_(end), path_(path) {}
  std::uint64_t u64() {
    std::uint64_t v = 0;
    need(sizeof v, "a field");
    std::memcpy(&v, bytes_.data() + at_, sizeof v);
    at_ += sizeof v;
    return v;
  }
  std::vector<std::byte> section(const char* name) {
    const std::uint64_t n = u64();
    if (n > kMaxSection) corrupt(path_, std::string(name) + " length " + std::to_string(n), __LINE__);
    need(static_cast<std::size_t>(n), name);
    std::vector<std::byte> out(bytes_.begin() + static_cast<std::ptrdiff_t>(at_),
                               bytes_.begin() + static_cast<std::ptrdiff_t>(at_ + n));
    at_ = (at_ + static_cast<std::size_t>(n) + 7) / 8 * 8;
    if (at_ > end_) corrupt(path_, std::string(name) + " runs past the end", __LINE__);
    return out;
  }
  std::size_t at() const { return at_; }

 private:
  void need(std::size_t n, const char* what) {
    if (end_ - at_ < n) corrupt(path_, std::string("truncated at ") + what, __LINE__);
  }
  const std::vector<std::byte>& bytes_;
  std::size_t end_;
  std::size_t at_ = 16;  // after magic and version
  const std::filesystem::path& path_;
};

}  // namespace

std::vector<std::byte> read_file_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in)
    throw Error("read(" + path.string() + ")", "I/O error", std::strerror(errno), __FILE__, __LINE__);
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  in.seekg(0, std::ios::beg);
  std::vector<std::byte> bytes(static_cast<std::size_t>(size < 0 ? 0 : size));
  if (!bytes.empty() && !in.read(reinterpret_cast<char*>(bytes.data()), size))
    throw Error("read(" + path.string() + ")", "I/O error", "short read", __FILE__, __LINE__);
  return bytes;
}

void write_file_atomically(const std::filesystem::path& path, const std::vector<std::byte>& bytes) {
  const std::filesystem::path temp =
      path.string() + ".tmp." + std::to_string(static_cast<long>(::getpid()));
  const int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    throw Error("open(" + temp.string() + ")", "I/O error", std::strerror(errno), __FILE__, __LINE__);
  std::size_t done = 0;
  bool ok = true;
  while (ok && done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    ok = n > 0;
    if (ok) done += static_cast<std::size_t>(n);
  }
  const std::string failure = ok ? "" : std::strerror(errno);
  ok = ok && ::fsync(fd) == 0;
  ok = (::close(fd) == 0) && ok;
  if (!ok || std::rename(temp.c_str(), path.c_str()) != 0) {
    const std::string reason = failure.empty() ? std::strerror(errno) : failure;
    std::remove(temp.c_str());
    throw Error("write(" + path.string() + ")", "I/O error", reason, __FILE__, __LINE__);
  }
}

void write_ppo_checkpoint(const std::filesystem::path& path, const PpoCheckpointData& data) {
  Writer w;
  w.raw(kMagic, sizeof kMagic);
  w.u64(kPpoCheckpointVersion);
  w.u64(data.config_hash);
  w.u64(data.updates_done);
  w.u64(data.device_counters.size());
  for (std::uint64_t c : data.device_counters) w.u64(c);
  w.section(data.host_rng.data(), data.host_rng.size());
  w.section(data.slab_file.data(), data.slab_file.size());
  w.section(data.env_state.data(), data.env_state.size());
  w.u64(fnv1a(w.bytes.data(), w.bytes.size()));
  write_file_atomically(path, w.bytes);
}

PpoCheckpointData read_ppo_checkpoint(const std::filesystem::path& path,
                                      std::uint64_t expected_config_hash) {
  const std::vector<std::byte> bytes = read_file_bytes(path);
  const std::string call = "read_ppo_checkpoint(" + path.string() + ")";
  if (bytes.size() < 16 || std::memcmp(bytes.data(), kMagic, sizeof kMagic) != 0)
    throw Error(call, "not a PPO checkpoint", "the file does not start with RSDPPO", __FILE__,
                __LINE__);
  std::uint64_t version = 0;
  std::memcpy(&version, bytes.data() + 8, sizeof version);
  if (version != kPpoCheckpointVersion)
    throw Error(call, "unsupported checkpoint version",
                "version " + std::to_string(version) + ", this build reads " +
                    std::to_string(kPpoCheckpointVersion),
                __FILE__, __LINE__);
  if (bytes.size() % 8 != 0 || bytes.size() < 24) corrupt(path, "size " + std::to_string(bytes.size()), __LINE__);
  const std::size_t end = bytes.size() - 8;
  std::uint64_t stored = 0;
  std::memcpy(&stored, bytes.data() + end, sizeof stored);
  if (stored != fnv1a(bytes.data(), end)) corrupt(path, "checksum mismatch", __LINE__);
  Reader r(bytes, end, path);
  PpoCheckpointData d;
  d.config_hash = r.u64();
  d.updates_done = r.u64();
  const std::uint64_t counters = r.u64();
  if (counters > 64) corrupt(path, std::to_string(counters) + " device counters", __LINE__);
  for (std::uint64_t i = 0; i < counters; ++i) d.device_counters.push_back(r.u64());
  const std::vector<std::byte> rng = r.section("host RNG");
  d.host_rng.assign(reinterpret_cast<const char*>(rng.data()), rng.size());
  d.slab_file = r.section("slab");
  d.env_state = r.section("env state");
  if (r.at() != end) corrupt(path, "trailing bytes", __LINE__);
  if (d.config_hash != expected_config_hash)
    throw Error(call, "checkpoint mismatch",
                "config hash " + std::to_string(d.config_hash) + ", this trainer's is " +
                    std::to_string(expected_config_hash) + " (another configuration)",
                __FILE__, __LINE__);
  return d;
}

}  // namespace resident::ppo
