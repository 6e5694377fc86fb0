#!/usr/bin/env bash
# Session 17 call 3: verify the paired epilogue stores (store_pair / load_pair: one 8-byte access
# per thread and tile row where aligned): tests, memcheck, side-by-side dqn_epoch and mlp_step;
# phase clocks and timelines on both trees. At most 8 files in $OUT.
export RESIDENT_GIT_COMMIT=$(cat device-calls/s17/commit)
mkdir -p /tmp/v; nvidia-smi --query-gpu=name,driver_version --format=csv > /tmp/gpu.txt
timeout 450 ci/verify-patch device-calls/s17/pairs.patch /tmp/v \
  --tests 'Fused|fused|Dqn|dqn|Mlp|mlp|Act|act' \
  --sanitize memcheck:dqn_train_step_fused_test:'Shapes/*' \
  --sanitize memcheck:nn_mlp_train_step_fused_test:'Shapes/*' \
  --sanitize memcheck:dqn_act_fused_test:'Shapes/*' \
  --bench 'dqn_bench:dqn_epoch/resident/' \
  --bench 'mlp_bench:mlp_step/resident/batch:256' > /tmp/v/verify.log 2>&1
echo "verify-patch exit $?" >> /tmp/v/verify.log
cp /tmp/gpu.txt /tmp/v/
cat /tmp/v/summary.txt /tmp/v/ab-*/round-*/summary.md > $OUT/summary.txt 2>/dev/null
for t in base branch; do
  for b in dqn_train_step_fused_test nn_mlp_train_step_fused_test; do
    bin=$(find /tmp/verify-patch-$t/build-gpu/tests -name "$b" -type f | head -1)
    RESIDENT_REQUIRE_GPU=1 timeout 40 "$bin" --gtest_filter='*FusedStepPhases*' \
      >> /tmp/v/phases-$t.log 2>&1
  done
  timeout 40 /tmp/verify-patch-$t/build-gpu/bench/dqn_step_timeline > /tmp/v/timeline-$t.md 2>&1
done
cp /tmp/v/phases-*.log /tmp/v/timeline-*.md $OUT/
tar cJf $OUT/v.tar.xz -C /tmp v 2>/dev/null
ls $OUT
