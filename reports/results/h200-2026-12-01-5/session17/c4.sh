#!/usr/bin/env bash
# Session 17 call 4: the main job on main (bank + pairs merged), in the verified branch tree when
# the machine still holds it (else a fresh build of this tree).
export RESIDENT_GIT_COMMIT=$(cat device-calls/s17/commit)
if [ -x /tmp/verify-patch-branch/build-gpu/bench/dqn_bench ]; then
  tree=/tmp/verify-patch-branch
else
  tree=$PWD
  cmake --preset gpu > $OUT/build.log 2>&1 && cmake --build --preset gpu >> $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
fi
echo "tree $tree" > $OUT/tree.txt
cd $tree
RESIDENT_BENCH_SKIP=ppo_agents timeout ${MAIN_LIMIT:-520} bench/run-main-job build-gpu > $OUT/main-job.log 2>&1
echo "exit $?" >> $OUT/main-job.log
d=$(ls -d reports/results/h200-* | sort -V | tail -1)
echo "$d" >> $OUT/tree.txt
tar cJf $OUT/main.tar.xz $d reports/out 2>/dev/null
