# DQN trainer bench (issue 7): resident vs host-staged epochs (included by bench/CMakeLists.txt).
resident_add_bench(dqn_bench dqn_bench.cu)
target_link_libraries(dqn_bench PRIVATE resident_dqn)

# The per-kernel timeline of one vector step of dqn_epoch/resident (a plain main, not a Google
# Benchmark, so bench/run-benches does not run it: its name does not end in _bench).
add_executable(dqn_step_timeline dqn_step_timeline.cu)
target_link_libraries(dqn_step_timeline PRIVATE resident_dqn resident_audit resident_warnings)
set_target_properties(dqn_step_timeline PROPERTIES ENABLE_EXPORTS ON
                      RUNTIME_OUTPUT_DIRECTORY ${PROJECT_BINARY_DIR}/bench)
# resident_warnings turns these GCC false positives (std::variant: GCC bug 105593; GCC 13's
# dangling-reference: bug 107532) off for C++ only; this .cu builds audit::Json values.
target_compile_options(dqn_step_timeline PRIVATE
  $<$<AND:$<COMPILE_LANGUAGE:CUDA>,$<CXX_COMPILER_ID:GNU>>:-Xcompiler=-Wno-maybe-uninitialized>
  $<$<AND:$<COMPILE_LANGUAGE:CUDA>,$<CXX_COMPILER_ID:GNU>,$<VERSION_GREATER_EQUAL:$<CXX_COMPILER_VERSION>,13>>:-Xcompiler=-Wno-dangling-reference>)
