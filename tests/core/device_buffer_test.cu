// DeviceBuffer: round trip of fresh random data, ownership transfer on move, size errors.
#include <gtest/gtest.h>

#include <random>
#include <vector>

#include "lib/core/device_buffer.h"
#include "tests/support/gpu.h"

namespace {

using resident::DeviceBuffer;

TEST(DeviceBuffer, RoundTripOfRandomData) {
  RESIDENT_REQUIRE_GPU();
  std::mt19937 rng(1234);
  std::uniform_real_distribution<float> dist(-1e3f, 1e3f);
  for (std::size_t n : {1u, 7u, 256u, 1000003u}) {
    std::vector<float> host(n);
    for (float& x : host) x = dist(rng);
    DeviceBuffer<float> buffer(n);
    EXPECT_EQ(buffer.size(), n);
    EXPECT_EQ(buffer.bytes(), n * sizeof(float));
    buffer.upload(host);
    EXPECT_EQ(buffer.download(), host) << "n=" << n;
  }
}

TEST(DeviceBuffer, MoveTransfersOwnership) {
  RESIDENT_REQUIRE_GPU();
  DeviceBuffer<int> a(16);
  int* raw = a.data();
  DeviceBuffer<int> b(std::move(a));
  EXPECT_EQ(b.data(), raw);
  EXPECT_EQ(b.size(), 16u);
  EXPECT_EQ(a.data(), nullptr);  // NOLINT(bugprone-use-after-move): checking the moved-from state
  EXPECT_EQ(a.size(), 0u);
  DeviceBuffer<int> c(4);
  c = std::move(b);
  EXPECT_EQ(c.data(), raw);
  EXPECT_EQ(c.size(), 16u);
}

TEST(DeviceBuffer, UploadOfWrongSizeThrows) {
  RESIDENT_REQUIRE_GPU();
  DeviceBuffer<int> buffer(4);
  const std::vector<int> three = {1, 2, 3};
  EXPECT_THROW(buffer.upload(three), resident::Error);
}

TEST(DeviceBuffer, ImpossibleAllocationThrowsNamingTheBytes) {
  RESIDENT_REQUIRE_GPU();
  try {
    DeviceBuffer<double> huge(std::size_t{1} << 47);  // 1 PiB
    FAIL() << "allocated 1 PiB";
  } catch (const resident::Error& e) {
    EXPECT_NE(std::string(e.what()).find(std::to_string((std::size_t{1} << 47) * 8) + " bytes"),
              std::string::npos)
        << e.what();
  }
}

}  // namespace
