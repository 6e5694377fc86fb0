# The last lines of a ctest run: how many tests ran, passed, failed and were skipped, and why, in
# plain words, counted from the records the tests of this run left in RECORD_DIR
# (tests/support/test_record.cpp; the directory is emptied before each run). Run by ctest after
# its own summary (CTEST_CUSTOM_POST_TEST, see tests/CMakeLists.txt):
#   cmake -DRECORD_DIR=<build>/Testing/resident-test-records -P summarize_test_records.cmake
# Prints nothing when there are no records (ctest -N, or a run that selected no test). Always exits
# 0: ctest's own result is the verdict; this only explains it.

cmake_minimum_required(VERSION 3.25)

set(gpu_prefix "GPU test skipped: ")
set(gpu_hint "(GPU tests; set RESIDENT_REQUIRE_GPU=1 to make a skip fail)")
set(names_shown 5)

if(NOT DEFINED RECORD_DIR OR NOT IS_DIRECTORY "${RECORD_DIR}")
  return()
endif()
file(GLOB records LIST_DIRECTORIES false "${RECORD_DIR}/*.txt")

# The test's name from its record's file name ('+' stands for '/').
function(record_test_name record out)
  get_filename_component(name "${record}" NAME)
  string(REGEX REPLACE "\\.txt$" "" name "${name}")
  string(REPLACE "+" "/" name "${name}")
  set(${out} "${name}" PARENT_SCOPE)
endfunction()

# "a, b, c and 4 more" from a list of names.
function(some_names names out)
  list(LENGTH names count)
  list(SORT names)
  if(count GREATER names_shown)
    list(SUBLIST names 0 ${names_shown} shown)
    math(EXPR more "${count} - ${names_shown}")
    list(JOIN shown ", " text)
    string(APPEND text " and ${more} more")
  else()
    list(JOIN names ", " text)
  endif()
  set(${out} "${text}" PARENT_SCOPE)
endfunction()

set(passed 0)
set(failed_names "")
set(unfinished_names "")
set(skip_keys "")
foreach(record IN LISTS records)
  file(STRINGS "${record}" lines)
  list(LENGTH lines line_count)
  set(status "started")
  if(line_count GREATER 0)
    list(GET lines 0 status)
  endif()
  if(status STREQUAL "passed")
    math(EXPR passed "${passed} + 1")
  elseif(status STREQUAL "failed")
    record_test_name("${record}" name)
    list(APPEND failed_names "${name}")
  elseif(status STREQUAL "skipped")
    set(message "(no reason given)")
    if(line_count GREATER 1)
      list(GET lines 1 message)
    endif()
    # Skips are grouped by their message; the group is a variable named by its message's hash.
    string(MD5 key "${message}")
    if(NOT DEFINED skip_count_${key})
      list(APPEND skip_keys ${key})
      set(skip_count_${key} 0)
      set(skip_message_${key} "${message}")
    endif()
    math(EXPR skip_count_${key} "${skip_count_${key}} + 1")
  else()  # "started" and nothing after it: the test crashed, hung or was killed
    record_test_name("${record}" name)
    list(APPEND unfinished_names "${name}")
  endif()
endforeach()

# Clauses joined by "; " into one string (not a CMake list: a clause may hold a ';').
set(summary "")
function(add_clause text)
  if(summary STREQUAL "")
    set(summary "${text}" PARENT_SCOPE)
  else()
    set(summary "${summary}; ${text}" PARENT_SCOPE)
  endif()
endfunction()

# Tests CTest counted as failed that left no record never reached gtest: a test binary that was
# not built (CTest's "<target>_NOT_BUILT"), or one that could not start. CTest lists them in
# Testing/Temporary/LastTestsFailed*.log before this script runs; a log older than this run's
# start marker is from an earlier run.
set(not_run_names "")
get_filename_component(testing_dir "${RECORD_DIR}" DIRECTORY)
file(GLOB failed_logs "${testing_dir}/Temporary/LastTestsFailed*.log")
foreach(log IN LISTS failed_logs)
  if(NOT EXISTS "${RECORD_DIR}/.run-started" OR "${RECORD_DIR}/.run-started" IS_NEWER_THAN "${log}")
    continue()
  endif()
  file(STRINGS "${log}" entries)
  foreach(entry IN LISTS entries)
    string(REGEX REPLACE "^[0-9]+:" "" name "${entry}")
    string(REPLACE "/" "+" file_name "${name}")
    if(EXISTS "${RECORD_DIR}/${file_name}.txt")
      continue()
    endif()
    # A typed test: CTest's "Fixture.Test<float>" is gtest's "Fixture/0.Test".
    if(name MATCHES "^([^.<]+)\\.([^<]+)<")
      file(GLOB typed "${RECORD_DIR}/${CMAKE_MATCH_1}+*.${CMAKE_MATCH_2}.txt")
      if(typed)
        continue()
      endif()
    endif()
    list(APPEND not_run_names "${name}")
  endforeach()
endforeach()

list(LENGTH failed_names failed)
list(LENGTH unfinished_names unfinished)
list(LENGTH not_run_names not_run)
if(NOT records AND not_run EQUAL 0)
  return()  # no test ran: ctest -N, or a selection without tests
endif()
# Worded so that it never reads "tests passed" / "tests failed", which scripts grep ctest's own
# summary for.
add_clause("${passed} tests ran and passed")
if(not_run GREATER 0)
  some_names("${not_run_names}" text)
  add_clause("${not_run} did not run (test binary not built or not startable): ${text}")
endif()
if(failed GREATER 0)
  some_names("${failed_names}" text)
  add_clause("${failed} FAILED: ${text}")
endif()
if(unfinished GREATER 0)
  some_names("${unfinished_names}" text)
  add_clause("${unfinished} ended without a result (crashed or timed out): ${text}")
endif()

# The largest skip group first.
set(ordered_keys "")
foreach(key IN LISTS skip_keys)
  string(LENGTH "${skip_count_${key}}" digits)  # sort key: the count zero-padded to 10 digits
  math(EXPR pad_length "10 - ${digits}")
  string(REPEAT "0" ${pad_length} pad)
  list(APPEND ordered_keys "${pad}${skip_count_${key}}:${key}")
endforeach()
list(SORT ordered_keys ORDER DESCENDING)
foreach(entry IN LISTS ordered_keys)
  string(REGEX REPLACE "^[0-9]+:" "" key "${entry}")
  set(message "${skip_message_${key}}")
  string(FIND "${message}" "${gpu_prefix}" at)
  if(at EQUAL 0)
    string(LENGTH "${gpu_prefix}" prefix_length)
    string(SUBSTRING "${message}" ${prefix_length} -1 reason)
    add_clause("${skip_count_${key}} skipped: ${reason} ${gpu_hint}")
  else()
    add_clause("${skip_count_${key}} skipped: ${message}")
  endif()
endforeach()

message("\nTest summary: ${summary}")
