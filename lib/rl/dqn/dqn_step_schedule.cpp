#include "lib/rl/dqn/dqn_step_schedule.h"

#include "kernels/core/error.h"

namespace resident::dqn {

void DqnStepSchedule::fork_pending_update(cudaStream_t main,
                                          const std::function<void(cudaStream_t)>& replay_work,
                                          const std::function<void(cudaStream_t)>& metrics_work) {
  update_fork_.record(main);
  update_fork_.make_wait(side_.get());
  update_fork_.make_wait(metrics_.get());
  replay_work(side_.get());
  replay_join_.record(side_.get());
  metrics_work(metrics_.get());
  metrics_join_.record(metrics_.get());
  update_forked_ = true;  // from here on `main` must join both streams
  pending_.reset();
}

void DqnStepSchedule::fork_tracker(cudaStream_t main,
                                   const std::function<void(cudaStream_t)>& tracker) {
  tracker_fork_.record(main);
  tracker_fork_.make_wait(metrics_.get());
  tracker_forked_ = true;  // from here on `main` must join the metrics stream
  tracker(metrics_.get());
  tracker_join_.record(metrics_.get());
}

void DqnStepSchedule::join_update(cudaStream_t main) {
  if (!update_forked_) return;
  replay_join_.make_wait(main);
  metrics_join_.make_wait(main);
  update_forked_ = false;
}

void DqnStepSchedule::join_tracker(cudaStream_t main) {
  if (!tracker_forked_) return;
  tracker_join_.make_wait(main);
  tracker_forked_ = false;
}

void DqnStepSchedule::join_after_failure(cudaStream_t main) {
  if (update_forked_) {
    replay_join_.make_wait(main);
    metrics_join_.make_wait(main);
    update_forked_ = false;
  }
  if (tracker_forked_) {  // re-recorded: valid whether or not the tracker was launched
    tracker_join_.record(metrics_.get());
    tracker_join_.make_wait(main);
    tracker_forked_ = false;
  }
}

void DqnStepSchedule::synchronize_side_streams() const noexcept {
  (void)cudaStreamSynchronize(side_.get());
  (void)cudaStreamSynchronize(metrics_.get());
}

void DqnStepSchedule::capture_graph(std::size_t steps, cudaStream_t main,
                                    const std::function<void()>& enqueue_steps) {
  graph(steps).capture(main, enqueue_steps);
}

void DqnStepSchedule::launch_graph(std::size_t steps, cudaStream_t main) {
  graph(steps).launch(main);
  ++graph_launches_;
}

}  // namespace resident::dqn
