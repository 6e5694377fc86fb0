# PPO benchmarks: resident vs host-staged update on the same config, and the training
# throughput (rollout + update) at 4096 envs x 128 steps.
resident_add_bench(ppo_bench ppo_bench.cu)
target_link_libraries(ppo_bench PRIVATE resident_ppo)
