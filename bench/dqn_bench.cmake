# DQN trainer bench: resident vs host-staged epochs (included by bench/CMakeLists.txt).
resident_add_bench(dqn_bench dqn_bench.cu)
target_link_libraries(dqn_bench PRIVATE resident_dqn)
