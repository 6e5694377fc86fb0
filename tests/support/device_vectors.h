// Host vectors copied to the device, for GPU tests (setup: the copy synchronizes).
#pragma once

#include <vector>

#include "lib/core/device_buffer.h"

namespace resident::test {

template <class T>
DeviceBuffer<T> to_device(const std::vector<T>& host) {
  DeviceBuffer<T> buffer(host.size());
  if (!host.empty()) buffer.upload(host);
  return buffer;
}

}  // namespace resident::test
