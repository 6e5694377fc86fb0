#include "lib/rl/dqn/dqn_checkpoint.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>
#include <system_error>

#include "kernels/core/error.h"

namespace resident::rl {

namespace {

constexpr char kMagic[8] = {'R', 'S', 'D', 'D', 'Q', 'N', 'C', 'K'};
constexpr std::size_t kHeaderBytes = 32;

std::uint64_t fnv1a(const std::uint8_t* data, std::size_t n) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (std::size_t i = 0; i < n; ++i) h = (h ^ data[i]) * 0x100000001b3ull;
  return h;
}

template <class T>
void put(std::vector<std::uint8_t>& out, T value) {
  const std::size_t at = out.size();
  out.resize(at + sizeof(T));
  std::memcpy(out.data() + at, &value, sizeof(T));
}

template <class T>
T get(const std::vector<std::uint8_t>& in, std::size_t at) {
  T value;
  std::memcpy(&value, in.data() + at, sizeof(T));
  return value;
}

[[noreturn]] void fail(const std::filesystem::path& path, const char* what, const std::string& why,
                       int line) {
  throw Error("DqnCheckpoint", what, path.string() + ": " + why, __FILE__, line);
}

}  // namespace

std::vector<std::uint8_t> read_file_bytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(path, "cannot open file", std::strerror(errno), __LINE__);
  std::vector<std::uint8_t> bytes((std::istreambuf_iterator<char>(in)),
                                  std::istreambuf_iterator<char>());
  if (in.bad()) fail(path, "read error", "reading failed", __LINE__);
  return bytes;
}

void write_file_bytes(const std::filesystem::path& path, const std::vector<std::uint8_t>& bytes) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) fail(path, "cannot create file", std::strerror(errno), __LINE__);
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t w = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (w < 0) {
      if (errno == EINTR) continue;
      const int e = errno;
      ::close(fd);
      fail(path, "write error", std::strerror(e), __LINE__);
    }
    done += static_cast<std::size_t>(w);
  }
  if (::fsync(fd) != 0) {
    const int e = errno;
    ::close(fd);
    fail(path, "fsync error", std::strerror(e), __LINE__);
  }
  if (::close(fd) != 0) fail(path, "close error", std::strerror(errno), __LINE__);
}

void write_dqn_checkpoint(const std::filesystem::path& path, std::uint64_t config_hash,
                          const CheckpointSections& sections) {
  std::vector<std::uint8_t> payload;
  for (const auto& [tag, bytes] : sections) {
    put<std::uint32_t>(payload, tag);
    put<std::uint32_t>(payload, 0);
    put<std::uint64_t>(payload, bytes.size());
    payload.insert(payload.end(), bytes.begin(), bytes.end());
    payload.resize((payload.size() + 7) / 8 * 8, 0);
  }
  std::vector<std::uint8_t> file(kMagic, kMagic + 8);
  put<std::uint32_t>(file, kDqnCheckpointVersion);
  put<std::uint32_t>(file, 0);
  put<std::uint64_t>(file, config_hash);
  put<std::uint64_t>(file, payload.size());
  file.insert(file.end(), payload.begin(), payload.end());
  put<std::uint64_t>(file, fnv1a(file.data(), file.size()));

  std::filesystem::path temp = path;
  temp += ".tmp";
  try {
    write_file_bytes(temp, file);
  } catch (...) {
    std::error_code ignored;
    std::filesystem::remove(temp, ignored);
    throw;
  }
  std::error_code ec;
  std::filesystem::rename(temp, path, ec);
  if (ec) {
    std::error_code ignored;
    std::filesystem::remove(temp, ignored);
    fail(path, "cannot rename", ec.message(), __LINE__);
  }
}

CheckpointSections read_dqn_checkpoint(const std::filesystem::path& path,
                                       std::uint64_t expected_config_hash) {
  const std::vector<std::uint8_t> file = read_file_bytes(path);
  if (file.size() < kHeaderBytes + 8 || std::memcmp(file.data(), kMagic, 8) != 0)
    fail(path, "not a DQN checkpoint", "bad magic or shorter than a header", __LINE__);
  const auto version = get<std::uint32_t>(file, 8);
  if (version != kDqnCheckpointVersion)
    fail(path, "unsupported checkpoint version",
         "version " + std::to_string(version) + ", this build reads " +
             std::to_string(kDqnCheckpointVersion),
         __LINE__);
  const auto payload = get<std::uint64_t>(file, 24);
  if (payload > file.size() || file.size() != kHeaderBytes + payload + 8)
    fail(path, "corrupt checkpoint",
         "file has " + std::to_string(file.size()) + " bytes, header says " +
             std::to_string(payload) + " bytes of payload",
         __LINE__);
  const auto stored = get<std::uint64_t>(file, file.size() - 8);
  if (stored != fnv1a(file.data(), file.size() - 8))
    fail(path, "corrupt checkpoint", "checksum mismatch", __LINE__);
  const auto hash = get<std::uint64_t>(file, 16);
  if (hash != expected_config_hash)
    fail(path, "checkpoint mismatch",
         "written under another config (hash " + std::to_string(hash) + ", this trainer's " +
             std::to_string(expected_config_hash) + ")",
         __LINE__);
  CheckpointSections sections;
  std::size_t at = kHeaderBytes;
  const std::size_t end = kHeaderBytes + payload;
  while (at < end) {
    if (end - at < 16) fail(path, "corrupt checkpoint", "truncated section header", __LINE__);
    const auto tag = get<std::uint32_t>(file, at);
    const auto length = get<std::uint64_t>(file, at + 8);
    at += 16;
    if (length > end - at) fail(path, "corrupt checkpoint", "section overruns the file", __LINE__);
    if (!sections.emplace(tag, std::vector<std::uint8_t>(file.begin() + static_cast<std::ptrdiff_t>(at),
                                                         file.begin() + static_cast<std::ptrdiff_t>(at + length)))
             .second)
      fail(path, "corrupt checkpoint", "duplicate section " + std::to_string(tag), __LINE__);
    at += (length + 7) / 8 * 8;
  }
  return sections;
}

}  // namespace resident::rl
