# Supervised models: resident vs host-fed train step and epoch, batch 256, L = 64, F = 32, for
# every registered model (supervised_bench.cu).
resident_add_bench(supervised_bench supervised_bench.cu)
target_link_libraries(supervised_bench PRIVATE resident_models)
