// One checked GPU step of a supervised model, whatever its loss, for the model GPU tests.
// Contract: run_poisoned_step(model, ctx, x, batch, pred, dpred, grads0, enqueue_loss) on ctx's
// stream: fills pred and dpred with NaN (all bits set) so an element the run fails to write
// shows, sets the grad slab to grads0 (random values: the backward must ADD exactly its share),
// then forward(x) into pred, enqueue_loss() (the test's loss and its gradient: reads pred, writes
// dpred), backward(x, dpred), and synchronizes. Returns grads_added: the whole grad slab after
// the backward minus grads0. pred and dpred are left for the caller to download.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <vector>

#include "kernels/core/error.h"
#include "lib/core/device_buffer.h"
#include "lib/core/stream.h"
#include "lib/models/supervised_model.h"
#include "lib/nn/param_slab.h"

namespace resident::test {

template <class EnqueueLoss>
std::vector<float> run_poisoned_step(models::SupervisedModel& model, const StreamContext& ctx,
                                     const float* x, std::size_t batch, DeviceBuffer<float>& pred,
                                     DeviceBuffer<float>& dpred, const std::vector<float>& grads0,
                                     EnqueueLoss&& enqueue_loss) {
  RESIDENT_CUDA_CHECK(cudaMemsetAsync(pred.data(), 0xFF, pred.bytes(), ctx.stream()));  // NaN
  RESIDENT_CUDA_CHECK(cudaMemsetAsync(dpred.data(), 0xFF, dpred.bytes(), ctx.stream()));
  model.slab().upload(nn::SlabPart::Grads, grads0, ctx.stream());
  model.forward(ctx, x, batch, pred.data());
  enqueue_loss();
  model.backward(ctx, x, dpred.data(), batch);
  ctx.synchronize();
  std::vector<float> grads = model.slab().download(nn::SlabPart::Grads, ctx.stream());
  for (std::size_t i = 0; i < grads.size(); ++i) grads[i] -= grads0[i];
  return grads;
}

}  // namespace resident::test
