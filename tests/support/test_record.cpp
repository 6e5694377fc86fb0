// Linked into every test binary (resident_add_test): when RESIDENT_TEST_RECORD_DIR is set (CTest
// sets it for the tests it runs), each test leaves one file there named after the test, holding
// its outcome on the first line ("started", then "passed", "failed" or "skipped") and, for a skip,
// the skip message on the second. A test that crashes or times out leaves "started". The summary
// at the end of a ctest run (tests/summarize_test_records.cmake) reads these files.
// Nothing is written when the variable is unset (a binary run by hand, or listing its tests).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>
#include <utility>

namespace {

// gtest names hold [A-Za-z0-9_], '/' and '.'; '/' becomes '+' (which no gtest name holds, so two
// names never share a file) and anything else unexpected a '%XX' escape.
std::string file_name(const ::testing::TestInfo& test) {
  const std::string name = std::string(test.test_suite_name()) + "." + test.name();
  std::string out;
  for (const char c : name) {
    const bool plain = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                       c == '_' || c == '.' || c == '-';
    if (plain) {
      out += c;
    } else if (c == '/') {
      out += '+';
    } else {
      char escaped[4];
      std::snprintf(escaped, sizeof escaped, "%%%02X", static_cast<unsigned char>(c));
      out += escaped;
    }
  }
  return out + ".txt";
}

// One line: newlines become spaces; ';' becomes ',' (the summary is a CMake script, where ';'
// separates list items).
std::string one_line(std::string text) {
  for (char& c : text) {
    if (c == '\n' || c == '\r') c = ' ';
    if (c == ';') c = ',';
  }
  return text;
}

class RecordListener : public ::testing::EmptyTestEventListener {
 public:
  explicit RecordListener(std::string dir) : dir_(std::move(dir)) {}

  void OnTestStart(const ::testing::TestInfo& test) override { write(test, "started", ""); }

  void OnTestEnd(const ::testing::TestInfo& test) override {
    const ::testing::TestResult& result = *test.result();
    if (result.Failed()) {
      write(test, "failed", "");
    } else if (result.Skipped()) {
      std::string message;
      for (int i = 0; i < result.total_part_count(); ++i)
        if (result.GetTestPartResult(i).skipped()) {
          message = result.GetTestPartResult(i).message();
          break;
        }
      write(test, "skipped", message.empty() ? "(no reason given)" : one_line(message));
    } else {
      write(test, "passed", "");
    }
  }

 private:
  void write(const ::testing::TestInfo& test, const char* status, const std::string& message) {
    std::ofstream out(dir_ + "/" + file_name(test), std::ios::trunc);
    out << status << '\n' << message << '\n';
  }

  std::string dir_;
};

// Registered before main (gtest_main) runs: the listener list lives in the UnitTest singleton,
// which InitGoogleTest keeps. The directory is created by the ctest pre-test step.
[[maybe_unused]] const bool registered = [] {
  const char* dir = std::getenv("RESIDENT_TEST_RECORD_DIR");
  if (dir == nullptr || dir[0] == '\0') return false;
  ::testing::UnitTest::GetInstance()->listeners().Append(new RecordListener(dir));
  return true;
}();

}  // namespace
