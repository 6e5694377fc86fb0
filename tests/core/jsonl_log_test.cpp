// JsonRecord and JsonlLog (CPU, runs in CI): escaping of every control byte, doubles that read
// back to the same bits, NaN and infinities as null, integer extremes, nesting, duplicate keys
// refused; a log's lines are on disk as soon as write() returns (read while the log is open, and
// after a child process that wrote them is killed), append mode keeps what was there, and an
// unopenable path or a full device throws naming the path.
#include "lib/core/jsonl_log.h"

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <sstream>
#include <span>
#include <string>
#include <vector>

#include "kernels/core/error.h"
#include "tests/support/temp_dir.h"

namespace {

using resident::JsonlLog;
using resident::JsonRecord;

std::vector<std::string> lines_of(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

TEST(JsonRecord, EscapesStringsAndKeys) {
  JsonRecord r;
  r.add("plain", "abc").add("quote\"key", "a\"b\\c").add("controls", "\n\r\t\b\f");
  r.add("low", std::string("\x01\x1f\x7f", 3)).add("utf8", "caf\xc3\xa9");
  EXPECT_EQ(r.text(),
            R"({"plain":"abc","quote\"key":"a\"b\\c","controls":"\n\r\t\b\f",)"
            R"("low":"\u0001\u001f\u007f","utf8":"caf)" "\xc3\xa9" R"("})");
}

TEST(JsonRecord, DoublesReadBackExactlyAndNonFiniteIsNull) {
  const std::vector<double> values = {0.0, -0.0, 1.0, 0.1, 1.0 / 3.0, 475.0, 2.5e-4, 1e300,
                                      std::numeric_limits<double>::denorm_min(),
                                      std::numeric_limits<double>::max(), -123.456};
  for (const double v : values) {
    const std::string text = JsonRecord().add("x", v).text();
    ASSERT_EQ(text.rfind("{\"x\":", 0), 0u) << text;
    const std::string number = text.substr(5, text.size() - 6);
    EXPECT_EQ(std::strtod(number.c_str(), nullptr), v) << text;
    EXPECT_EQ(std::signbit(std::strtod(number.c_str(), nullptr)), std::signbit(v)) << text;
  }
  EXPECT_EQ(JsonRecord().add("x", std::nan("")).text(), R"({"x":null})");
  EXPECT_EQ(JsonRecord().add("x", -std::numeric_limits<double>::infinity()).text(),
            R"({"x":null})");
  EXPECT_EQ(JsonRecord().add("x", 0.5f).text(), R"({"x":0.5})");
}

TEST(JsonRecord, IntegersBooleansAndNesting) {
  JsonRecord config;
  config.add("lr", 2.5e-4).add("hidden", "256,256");
  JsonRecord r;
  r.add("min", std::numeric_limits<std::int64_t>::min())
      .add("max", std::numeric_limits<std::uint64_t>::max())
      .add("size", std::size_t{7})
      .add("u32", std::uint32_t{4000000000u})
      .add("neg", -3)
      .add("yes", true)
      .add("no", false)
      .add("config", config);
  EXPECT_EQ(r.text(),
            R"({"min":-9223372036854775808,"max":18446744073709551615,"size":7,"u32":4000000000,)"
            R"("neg":-3,"yes":true,"no":false,"config":{"lr":0.00025,"hidden":"256,256"}})");
  EXPECT_EQ(JsonRecord().text(), "{}");
}

TEST(JsonRecord, ArraysOfDoublesAndOfRecords) {
  const std::vector<double> values = {0.25, -3.0, 1.0 / 3.0, std::nan(""), 1e-300};
  const std::vector<JsonRecord> records = {JsonRecord().add("a", 1), JsonRecord().add("b", true)};
  const std::string text = JsonRecord()
                               .add("values", std::span<const double>(values))
                               .add("none", std::span<const double>())
                               .add("records", std::span<const JsonRecord>(records))
                               .text();
  EXPECT_EQ(text, R"({"values":[0.25,-3,0.3333333333333333,null,1e-300],"none":[],)"
                  R"("records":[{"a":1},{"b":true}]})");
  EXPECT_THROW(JsonRecord().add("x", 1).add("x", std::span<const double>(values)),
               resident::Error);
}

TEST(JsonRecord, DuplicateKeyThrowsNamingIt) {
  JsonRecord r;
  r.add("seed", 1).add("see", 2);
  try {
    r.add("seed", 3);
    FAIL() << "no throw";
  } catch (const resident::Error& e) {
    EXPECT_NE(std::string(e.what()).find("\"seed\" added twice"), std::string::npos) << e.what();
  }
}

TEST(JsonlLog, EachRecordIsOnDiskWhenWriteReturns) {
  const resident::test::TempDir dir("jsonl_log");
  JsonlLog log(dir / "run.jsonl");
  log.write(JsonRecord().add("record", "header"));
  EXPECT_EQ(lines_of(dir / "run.jsonl"), std::vector<std::string>{R"({"record":"header"})"});
  log.write(JsonRecord().add("step", 1));
  EXPECT_EQ(lines_of(dir / "run.jsonl"),
            (std::vector<std::string>{R"({"record":"header"})", R"({"step":1})"}));
}

TEST(JsonlLog, AKilledWriterKeepsItsRecords) {
  const resident::test::TempDir dir("jsonl_log");
  const std::filesystem::path path = dir / "killed.jsonl";
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    JsonlLog log(path);
    for (int i = 0; i < 3; ++i) log.write(JsonRecord().add("i", i));
    ::raise(SIGKILL);
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  EXPECT_EQ(lines_of(path),
            (std::vector<std::string>{R"({"i":0})", R"({"i":1})", R"({"i":2})"}));
}

TEST(JsonlLog, TruncateReplacesAndAppendKeeps) {
  const resident::test::TempDir dir("jsonl_log");
  { JsonlLog(dir / "a.jsonl").write(JsonRecord().add("n", 1)); }
  { JsonlLog(dir / "a.jsonl", JsonlLog::Mode::Append).write(JsonRecord().add("n", 2)); }
  EXPECT_EQ(lines_of(dir / "a.jsonl"), (std::vector<std::string>{R"({"n":1})", R"({"n":2})"}));
  { JsonlLog(dir / "a.jsonl").write(JsonRecord().add("n", 3)); }
  EXPECT_EQ(lines_of(dir / "a.jsonl"), std::vector<std::string>{R"({"n":3})"});
}

TEST(JsonlLog, FailuresNameThePath) {
  const resident::test::TempDir dir("jsonl_log");
  const std::filesystem::path missing = dir / "no" / "such" / "dir" / "run.jsonl";
  try {
    JsonlLog log(missing);
    FAIL() << "no throw";
  } catch (const resident::Error& e) {
    EXPECT_NE(std::string(e.what()).find(missing.string() + ": No such file"), std::string::npos)
        << e.what();
  }
  if (!std::filesystem::exists("/dev/full")) GTEST_SKIP() << "no /dev/full on this system";
  JsonlLog full("/dev/full");
  try {
    full.write(JsonRecord().add("n", 1));
    FAIL() << "no throw";
  } catch (const resident::Error& e) {
    EXPECT_NE(std::string(e.what()).find("/dev/full: No space left"), std::string::npos)
        << e.what();
  }
}

}  // namespace
