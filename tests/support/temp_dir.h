// A scratch directory of one test: <temp>/<prefix>_<test suite>_<test>_<pid>, created on
// construction and removed with everything in it on destruction. Unique per test and process,
// so tests that ctest runs in parallel never share (or delete) each other's files.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <system_error>

namespace resident::test {

class TempDir {
 public:
  explicit TempDir(const std::string& prefix) {
    const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = prefix;
    if (info != nullptr) name += std::string("_") + info->test_suite_name() + "_" + info->name();
    for (char& ch : name)
      if (ch == '/' || ch == ' ') ch = '_';
    path_ = std::filesystem::temp_directory_path() / (name + "_" + std::to_string(::getpid()));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const noexcept { return path_; }
  std::filesystem::path operator/(const std::string& file) const { return path_ / file; }

 private:
  std::filesystem::path path_;
};

}  // namespace resident::test
