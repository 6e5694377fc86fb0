#!/usr/bin/env bash
# Session 17 call 1: verify the two staged patches together (stripes, programmatic fork): tests,
# sanitizers, side-by-side dqn_epoch; phase clocks and timelines on both trees; ncu on the
# branch's fused gradient step at the bench shape.
export RESIDENT_GIT_COMMIT=$(cat device-calls/s17/commit)
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $OUT/gpu.txt
timeout 420 ci/verify-patch device-calls/s17/combined.patch /tmp/v \
  --tests 'Fused|fused|Dqn|dqn' \
  --sanitize racecheck:dqn_train_step_fused_test:'DqnFusedStepStripes*' \
  --sanitize synccheck:dqn_train_step_fused_test:'Shapes/*' \
  --sanitize memcheck:dqn_train_step_fused_test:'DqnFusedStepStripes*' \
  --sanitize memcheck:dqn_trainer_test:'*StepsPerGraphChangesNothing*' \
  --bench 'dqn_bench:dqn_epoch/resident/' > $OUT/verify.log 2>&1
echo "verify-patch exit $?" >> $OUT/verify.log
cp /tmp/v/summary.txt $OUT/ 2>/dev/null
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
RESIDENT_REQUIRE_GPU=1 timeout 90 ncu --clock-control none --set full -k regex:dqn_train_step_fused \
  --launch-skip 5 --launch-count 1 -o /tmp/v/fused-step "$bin" \
  --gtest_filter='DqnFusedStepPhases.*' > /tmp/v/ncu.log 2>&1
echo "ncu exit $?" >> /tmp/v/ncu.log
ncu --import /tmp/v/fused-step.ncu-rep --page details > /tmp/v/ncu-details.txt 2>&1
ncu --import /tmp/v/fused-step.ncu-rep --page source --csv --print-source sass > /tmp/v/ncu-sass.csv 2>/dev/null
cp /tmp/v/ncu.log /tmp/v/ncu-details.txt $OUT/
tar cJf $OUT/v.tar.xz -C /tmp v 2>/dev/null
