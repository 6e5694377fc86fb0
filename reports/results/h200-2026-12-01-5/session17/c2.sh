#!/usr/bin/env bash
# Session 17 call 2: verify the conflict-free chunk staging (k-contiguous operands stored as
# float4, slice partials read as float2, __launch_bounds__(256, 1)): tests, sanitizers,
# side-by-side dqn_epoch and mlp_step; phase clocks and timelines on both trees; ncu of the
# branch's gradient step. At most 8 files in $OUT.
export RESIDENT_GIT_COMMIT=$(cat device-calls/s17/commit)
mkdir -p /tmp/v; nvidia-smi --query-gpu=name,driver_version --format=csv > /tmp/gpu.txt
timeout 450 ci/verify-patch device-calls/s17/bank.patch /tmp/v \
  --tests 'Fused|fused|Dqn|dqn|Mlp|mlp|Act|act' \
  --sanitize racecheck:dqn_train_step_fused_test:'Shapes/*' \
  --sanitize synccheck:dqn_train_step_fused_test:'Shapes/*' \
  --sanitize memcheck:nn_mlp_train_step_fused_test:'Shapes/*' \
  --sanitize racecheck:dqn_act_fused_test:'Shapes/*' \
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
bin=$(find /tmp/verify-patch-branch/build-gpu/tests -name dqn_train_step_fused_test -type f | head -1)
RESIDENT_REQUIRE_GPU=1 timeout 60 ncu --clock-control none --set full -k regex:dqn_train_step_fused \
  --launch-skip 5 --launch-count 1 -o /tmp/v/fused-step "$bin" \
  --gtest_filter='DqnFusedStepPhases.*' > /tmp/v/ncu.log 2>&1
ncu --import /tmp/v/fused-step.ncu-rep --page details > $OUT/ncu-details.txt 2>&1
tar cJf $OUT/v.tar.xz -C /tmp v 2>/dev/null
ls $OUT
