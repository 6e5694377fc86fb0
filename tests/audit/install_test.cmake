# The audit's install, moved (no GPU needed): installs component "audit" of the build tree BUILD
# into WORK/run-<id>/prefix, renames the prefix to .../moved, then checks that
#   - moved/bin/resident-audit --help and --version run,
#   - --print-inject-path finds moved/lib/libresident_audit_inject.so from its own location,
#   - `-- /bin/true` says plainly that the program never initialized CUDA (exit 2),
#   - --json to an unwritable path fails with exit 2 before the program runs,
#   - a user's project (install_consumer/) configures with find_package(resident) against the
#     moved prefix, builds its GoogleTest file, and the file's tests pass (GPU ones skip).
# Run by CTest (tests/audit/CMakeLists.txt):
#   cmake -DBUILD=... -DWORK=... -DCONSUMER=... -DVERSION=... -DGENERATOR=... -DCXX=...
#         -DCUDA_ROOT=... -DGTEST_DIR=... [-DRECORD=file] -P install_test.cmake
# RECORD, when given, receives this test's outcome like a gtest binary's record
# (tests/support/test_record.cpp): "started", then "passed" or "failed".
cmake_minimum_required(VERSION 3.25)

if(RECORD)
  file(WRITE "${RECORD}" "started\n")
endif()
function(fail text)
  if(RECORD)
    file(WRITE "${RECORD}" "failed\n")
  endif()
  message(FATAL_ERROR "${text}")
endfunction()

# Runs a command; OUT receives stdout and stderr, CODE the exit status.
function(run out code)
  execute_process(COMMAND ${ARGN} OUTPUT_VARIABLE text ERROR_VARIABLE text RESULT_VARIABLE rc)
  set(${out} "${text}" PARENT_SCOPE)
  set(${code} "${rc}" PARENT_SCOPE)
endfunction()

function(expect_run expected_code expected_text)
  run(text rc ${ARGN})
  string(FIND "${text}" "${expected_text}" at)
  if(NOT rc STREQUAL expected_code OR at EQUAL -1)
    list(JOIN ARGN " " command)
    fail("${command}: expected exit ${expected_code} and \"${expected_text}\", got exit ${rc}:\n"
         "${text}")
  endif()
endfunction()

# A directory of its own under WORK, so that runs in one shared build tree do not collide; removed
# when the test passes, kept for a look when it fails.
string(RANDOM LENGTH 8 run_id)
set(WORK "${WORK}/run-${run_id}")
file(REMOVE_RECURSE "${WORK}")
file(MAKE_DIRECTORY "${WORK}")
run(text rc "${CMAKE_COMMAND}" --install "${BUILD}" --prefix "${WORK}/prefix" --component audit)
if(NOT rc EQUAL 0)
  fail("cmake --install failed (exit ${rc}):\n${text}")
endif()
file(RENAME "${WORK}/prefix" "${WORK}/moved")
set(prefix "${WORK}/moved")
set(cli "${prefix}/bin/resident-audit")

expect_run(0 "usage: resident-audit" "${cli}" --help)
expect_run(0 "resident-audit ${VERSION}" "${cli}" --version)
expect_run(0 "${prefix}/lib/libresident_audit_inject.so" "${cli}" --print-inject-path)
expect_run(2 "the program never initialized CUDA: nothing to audit" "${cli}" -- /bin/true)
expect_run(2 "cannot write --json ${WORK}/no-such-dir/out.json" "${cli}"
           --json "${WORK}/no-such-dir/out.json" -- /bin/sh -c "touch '${WORK}/ran'")
if(EXISTS "${WORK}/ran")
  fail("resident-audit ran the program although its --json path was not writable")
endif()
file(RENAME "${prefix}/lib/libresident_audit_inject.so" "${WORK}/inject.so")
set(tried "${prefix}/bin/libresident_audit_inject.so, ${prefix}/lib/libresident_audit_inject.so")
expect_run(2 "tried: ${tried}" "${cli}" --print-inject-path)
file(RENAME "${WORK}/inject.so" "${prefix}/lib/libresident_audit_inject.so")

run(text rc "${CMAKE_COMMAND}" -S "${CONSUMER}" -B "${WORK}/consumer" -G "${GENERATOR}"
    "-DCMAKE_CXX_COMPILER=${CXX}" "-DCMAKE_PREFIX_PATH=${prefix}" "-DCUDAToolkit_ROOT=${CUDA_ROOT}"
    "-DGTest_DIR=${GTEST_DIR}" -DCMAKE_BUILD_TYPE=Release)
if(NOT rc EQUAL 0)
  fail("the consumer project did not configure against ${prefix} (exit ${rc}):\n${text}")
endif()
run(text rc "${CMAKE_COMMAND}" --build "${WORK}/consumer")
if(NOT rc EQUAL 0)
  fail("the consumer project did not build against ${prefix} (exit ${rc}):\n${text}")
endif()
expect_run(0 "[       OK ] Consumer.ChecksAReportAgainstItsContract"
           "${WORK}/consumer/consumer_test")

message(STATUS "installed, moved to ${prefix}, CLI and consumer project OK")
file(REMOVE_RECURSE "${WORK}")
if(RECORD)
  file(WRITE "${RECORD}" "passed\n")
endif()
