// The checkpoint record format of lib/core/device_state_bytes.h, host side (no GPU needed):
// records round-trip; a count, element-size or length mismatch, a truncated record and leftover
// bytes are each rejected with a message naming the owner and the record; staged actions run
// only at commit(), in order.
#include "lib/core/device_state_bytes.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "kernels/core/error.h"

namespace {

using resident::DeviceStateReader;
using resident::DeviceStateWriter;
using resident::Error;

std::vector<std::uint8_t> two_records() {
  DeviceStateWriter w;
  const std::vector<std::uint64_t> counters = {7, 9};
  const std::vector<float> values = {1.5f, -2.0f, 3.25f};
  w.add_host(std::span<const std::uint64_t>(counters)).add_host(std::span<const float>(values));
  return w.take();
}

std::string message_of(auto&& call) {
  try {
    call();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(DeviceStateBytes, RecordsRoundTrip) {
  const std::vector<std::uint8_t> bytes = two_records();
  EXPECT_EQ(bytes.size(), 2 * 16 + 2 * 8 + 3 * 4);
  DeviceStateReader r(bytes, "Owner::load_state");
  EXPECT_EQ(r.next<std::uint64_t>(2, "counters"), (std::vector<std::uint64_t>{7, 9}));
  EXPECT_EQ(r.next<float>(3, "values"), (std::vector<float>{1.5f, -2.0f, 3.25f}));
  EXPECT_NO_THROW(r.check_consumed());
}

TEST(DeviceStateBytes, MismatchesAreNamed) {
  const std::vector<std::uint8_t> bytes = two_records();
  {
    DeviceStateReader r(bytes, "Owner::load_state");
    const std::string m = message_of([&] { r.next<std::uint64_t>(3, "counters"); });
    EXPECT_NE(m.find("Owner::load_state"), std::string::npos) << m;
    EXPECT_NE(m.find("counters has 2 elements of 8 bytes, this object needs 3 of 8"),
              std::string::npos) << m;
  }
  {
    DeviceStateReader r(bytes, "Owner::load_state");
    const std::string m = message_of([&] { r.next<std::uint32_t>(2, "counters"); });
    EXPECT_NE(m.find("this object needs 2 of 4"), std::string::npos) << m;  // element size
  }
  {
    const std::vector<std::uint8_t> cut(bytes.begin(), bytes.end() - 1);
    DeviceStateReader r(cut, "Owner::load_state");
    r.next<std::uint64_t>(2, "counters");
    const std::string m = message_of([&] { r.next<float>(3, "values"); });
    EXPECT_NE(m.find("truncated at values"), std::string::npos) << m;
  }
  {
    std::vector<std::uint8_t> longer = bytes;
    longer.push_back(0);
    DeviceStateReader r(longer, "Owner::load_state");
    r.next<std::uint64_t>(2, "counters");
    r.next<float>(3, "values");
    const std::string m = message_of([&] { r.check_consumed(); });
    EXPECT_NE(m.find("1 bytes left over"), std::string::npos) << m;
  }
}

TEST(DeviceStateBytes, StagedActionsRunOnlyAtCommitInOrder) {
  const std::vector<std::uint8_t> bytes = two_records();
  DeviceStateReader r(bytes, "Owner::load_state");
  std::vector<int> order;
  r.next<std::uint64_t>(2, "counters");
  r.then([&] { order.push_back(1); });
  r.next<float>(3, "values");
  r.then([&] { order.push_back(2); });
  EXPECT_TRUE(order.empty());
  r.commit();
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
  // A reader with bytes left over refuses to commit and runs nothing.
  std::vector<std::uint8_t> longer = bytes;
  longer.push_back(0);
  DeviceStateReader bad(longer, "Owner::load_state");
  bool ran = false;
  bad.next<std::uint64_t>(2, "counters");
  bad.then([&] { ran = true; });
  EXPECT_THROW(bad.commit(), Error);
  EXPECT_FALSE(ran);
}

}  // namespace
