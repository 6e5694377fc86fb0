// DqnStepSchedule: where the work of a resident DQN step runs and how steady-state steps are
// replayed (internal to lib/rl/dqn). The trainer supplies the work; the schedule owns the streams,
// the events that order them, the pending update and the CUDA graphs.
//
// Side work (DqnConfig::overlap_side_work): a step's last priority update and train metrics are
// left pending (defer_update) and run beside the next step's collection, which touches neither
// the replay nor the train counters: the update, with any insert tree work and draw that follow
// it, on the side stream, the metrics on the metrics stream (fork_pending_update). That step's
// episode tracker runs on the metrics stream too, beside its insert and training (fork_tracker).
// The main stream joins the update before the insert or draw (join_update) and the tracker at the
// end of the step (join_tracker); a step that throws joins whatever was forked
// (join_after_failure), so later work, and a capture, stays ordered after it.
//
// Graphs: steady-state steps captured from the main stream, one step and steps_per_graph steps
// (each captured once), and replayed with one cudaGraphLaunch each.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>

#include "lib/core/captured_graph.h"
#include "lib/core/stream.h"
#include "lib/replay/gpu_replay_buffer.h"

namespace resident::dqn {

class DqnStepSchedule {
 public:
  DqnStepSchedule() = default;
  DqnStepSchedule(const DqnStepSchedule&) = delete;
  DqnStepSchedule& operator=(const DqnStepSchedule&) = delete;

  // ----- the pending update: the sample whose priorities and metrics are still to be enqueued
  const std::optional<DeviceSampledBatch>& pending_update() const noexcept { return pending_; }
  void set_pending_update(const std::optional<DeviceSampledBatch>& sample) { pending_ = sample; }

  // ----- forks and joins of one step, in enqueue order
  // The pending update beside the main stream's next work: replay_work(side stream) (the priority
  // update, then whatever follows it on that stream), then metrics_work(metrics stream), both
  // after the work enqueued on `main` so far. The update is no longer pending after both.
  void fork_pending_update(cudaStream_t main, const std::function<void(cudaStream_t)>& replay_work,
                           const std::function<void(cudaStream_t)>& metrics_work);
  // tracker(metrics stream) after the work enqueued on `main` so far.
  void fork_tracker(cudaStream_t main, const std::function<void(cudaStream_t)>& tracker);
  // `main` waits for the forked update and metrics (nothing when none was forked).
  void join_update(cudaStream_t main);
  // `main` waits for the forked tracker (nothing when none was forked).
  void join_tracker(cudaStream_t main);
  // After a step threw: `main` waits for whatever it forked, also when forked work threw.
  void join_after_failure(cudaStream_t main);
  // Blocking: waits for both side streams (before the buffers their work reads are freed).
  void synchronize_side_streams() const noexcept;

  // ----- graphs of `steps` steady-state steps (1 or DqnConfig::steps_per_graph)
  bool graph_captured(std::size_t steps) const noexcept { return graph(steps).captured(); }
  // Captures enqueue_steps() (which enqueues `steps` steps on `main`). Throws when the capture
  // fails; the caller restores what enqueue_steps changed on the host.
  void capture_graph(std::size_t steps, cudaStream_t main,
                     const std::function<void()>& enqueue_steps);
  void launch_graph(std::size_t steps, cudaStream_t main);
  // cudaGraphLaunch calls so far.
  std::uint64_t graph_launches() const noexcept { return graph_launches_; }

 private:
  CapturedGraph& graph(std::size_t steps) noexcept { return steps == 1 ? one_step_ : multi_step_; }
  const CapturedGraph& graph(std::size_t steps) const noexcept {
    return steps == 1 ? one_step_ : multi_step_;
  }

  Stream side_, metrics_;
  Event update_fork_, replay_join_, metrics_join_, tracker_fork_, tracker_join_;
  std::optional<DeviceSampledBatch> pending_;
  bool update_forked_ = false, tracker_forked_ = false;  // forked in this step, not yet joined
  CapturedGraph one_step_, multi_step_;
  std::uint64_t graph_launches_ = 0;
};

}  // namespace resident::dqn
