// Names of parameterized test cases, made from the parameter values: readable, the same on every
// run, valid gtest names ([A-Za-z0-9_], never empty) and so usable with `ctest -R` and
// `--gtest_filter`. CTest registers the gtest name as it is (resident_add_test in
// tests/CMakeLists.txt discovers with NO_PRETTY_VALUES), so a case without a name generator would
// be listed by its index ("/0", "/1"): give every INSTANTIATE_TEST_SUITE_P one, e.g.
//
//   INSTANTIATE_TEST_SUITE_P(Capacities, GpuReplayMatchesCpu, ::testing::Combine(...),
//                            [](const auto& test_case) {  // not "info": gtest names its own so
//                              const auto& p = test_case.param;
//                              return test::param_name("capacity", std::get<0>(p), "batch",
//                                                      std::get<1>(p));
//                            });                                // -> capacity_1000_batch_256
//
// Inside the macro, read a tuple with std::get rather than a structured binding: the binding's
// commas split the macro's arguments (nvcc then fails to compile the generator).
//
// A typed suite (TYPED_TEST_SUITE) is left without one: CMake's discovery takes the type from
// gtest's index ("Fixture/0.  # TypeParam = float" -> "Fixture.Test<float>") and garbles a
// generated name into "Fixture.Test<Fixture/float.  # TypeParam = float>".
//
// gtest rejects an invalid or a repeated name when the binary lists its tests, so a generator
// that maps two cases to one name fails discovery (and with it the build's test step) at once.
#pragma once

#include <gtest/gtest.h>

#include <charconv>
#include <concepts>
#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <system_error>
#include <vector>

#include "kernels/nn/activation.h"
#include "kernels/nn/adamw.h"
#include "kernels/nn/softmax.h"  // nn::SoftmaxMask
#include "lib/replay/replay_config.h"

namespace resident::test {

// Text as a fragment: each run of characters outside [A-Za-z0-9_] becomes one '_', and '_' is
// trimmed from both ends: "bench 32 x 64-256-256-3" -> "bench_32_x_64_256_256_3".
inline std::string name_part(std::string_view text) {
  std::string out;
  bool pending_separator = false;
  for (const char c : text) {
    const bool word = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
    if (word) {
      if (pending_separator && !out.empty()) out += '_';
      pending_separator = false;
      out += c;
    } else {
      pending_separator = true;  // '_' too: runs of separators collapse to one
    }
  }
  return out;
}
inline std::string name_part(const char* text) { return name_part(std::string_view(text)); }
inline std::string name_part(const std::string& text) { return name_part(std::string_view(text)); }

// Integers in decimal; a minus sign is 'm': -5 -> "m5".
template <std::integral T>
  requires(!std::same_as<T, bool> && !std::same_as<T, char>)
std::string name_part(T value) {
  const std::string digits = std::to_string(value);
  return digits[0] == '-' ? "m" + digits.substr(1) : digits;
}

// Floating point as the shortest decimal that reads back to the same value, with '.' -> 'p',
// '-' -> 'm' and '+' dropped: 0.6 -> "0p6", 1e-06 -> "1em06", -0.5 -> "m0p5", 1e+09f -> "1e09".
template <std::floating_point T>
std::string name_part(T value) {
  char buffer[64];
  const auto result = std::to_chars(buffer, buffer + sizeof buffer, value);
  std::string out;
  if (result.ec != std::errc()) return "nan";  // cannot happen with 64 characters
  for (const char* p = buffer; p != result.ptr; ++p) {
    if (*p == '.')
      out += 'p';
    else if (*p == '-')
      out += 'm';
    else if (*p != '+')
      out += *p;
  }
  return out;  // inf -> "inf", nan -> "nan"
}

// A bool names itself only through a flag() (see below); a bare true/false says nothing.
std::string name_part(bool) = delete;

// Dimensions joined by 'x': {4, 64, 64, 2} -> "4x64x64x2".
inline std::string dims(std::span<const std::size_t> sizes) {
  std::string out;
  for (const std::size_t size : sizes) {
    if (!out.empty()) out += 'x';
    out += std::to_string(size);
  }
  return out.empty() ? "none" : out;
}
inline std::string dims(const std::vector<std::size_t>& sizes) {
  return dims(std::span<const std::size_t>(sizes));
}
inline std::string dims(std::initializer_list<std::size_t> sizes) {
  return dims(std::span<const std::size_t>(sizes.begin(), sizes.size()));
}

// The project's enums by their meaning. No default case: a new enumerator is a -Wswitch error
// here until it has a name.
inline std::string name_part(kernels::ActivationKind kind) {
  switch (kind) {
    case kernels::ActivationKind::Relu: return "relu";
    case kernels::ActivationKind::Tanh: return "tanh";
    case kernels::ActivationKind::Sigmoid: return "sigmoid";
    case kernels::ActivationKind::Silu: return "silu";
    case kernels::ActivationKind::GeluTanh: return "gelu_tanh";
    case kernels::ActivationKind::Elu: return "elu";
    case kernels::ActivationKind::Softplus: return "softplus";
  }
  return "activation" + std::to_string(static_cast<int>(kind));
}
inline std::string name_part(nn::SoftmaxMask mask) {
  switch (mask) {
    case nn::SoftmaxMask::None: return "unmasked";
    case nn::SoftmaxMask::Causal: return "causal";
  }
  return "mask" + std::to_string(static_cast<int>(mask));
}
inline std::string name_part(kernels::LrSchedule schedule) {
  switch (schedule) {
    case kernels::LrSchedule::Constant: return "constant_lr";
    case kernels::LrSchedule::LinearToZero: return "linear_to_zero_lr";
  }
  return "schedule" + std::to_string(static_cast<int>(schedule));
}
inline std::string name_part(ReplayPriorityMode mode) {
  switch (mode) {
    case ReplayPriorityMode::Proportional: return "proportional";
    case ReplayPriorityMode::Rank: return "rank";
  }
  return "mode" + std::to_string(static_cast<int>(mode));
}
inline std::string name_part(ReplaySampling sampling) {
  switch (sampling) {
    case ReplaySampling::Stratified: return "stratified";
    case ReplaySampling::Independent: return "independent";
  }
  return "sampling" + std::to_string(static_cast<int>(sampling));
}

// A boolean parameter as a word: flag(c.weighted, "weighted") -> "weighted" / "no_weighted";
// flag(c.accumulate, "accumulate", "overwrite") -> one of the two.
inline std::string flag(bool on, std::string_view name) {
  return on ? name_part(name) : "no_" + name_part(name);
}
inline std::string flag(bool on, std::string_view if_true, std::string_view if_false) {
  return name_part(on ? if_true : if_false);
}

// Fragments joined by '_' (empty ones left out): param_name("capacity", 1000, "batch", 256)
// -> "capacity_1000_batch_256". Each part goes through name_part(), so text may hold any
// characters and numbers follow the rules above.
template <class... Parts>
std::string param_name(const Parts&... parts) {
  std::string out;
  const auto append = [&out](const std::string& part) {
    if (part.empty()) return;
    if (!out.empty()) out += '_';
    out += part;
  };
  (append(name_part(parts)), ...);
  return out.empty() ? "case" : out;
}

}  // namespace resident::test
