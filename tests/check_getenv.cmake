# Checks that no code reads the environment except the knob reader (tensorplay/base/knobs.cpp) and
# the launcher-environment reader (tensorplay/distributed/launch_env.*): every other variable is a
# knob, a row declared by the layer that reads it (docs/design.md, "Knobs by layer").
# Run as: cmake -DSOURCE_DIR=<repo> -P check_getenv.cmake
cmake_minimum_required(VERSION 3.25)
set(allowed
  tensorplay/base/knobs.cpp
  tensorplay/distributed/launch_env.h
  tensorplay/distributed/launch_env.cpp
  # A test's private variable: the ids it hands to the peer process it starts.
  tests/transport/test_nccl_channel.cpp)

set(errors "")
foreach(folder tensorplay examples bench tools tests)
  file(GLOB_RECURSE files ${SOURCE_DIR}/${folder}/*.h ${SOURCE_DIR}/${folder}/*.cpp
       ${SOURCE_DIR}/${folder}/*.cu ${SOURCE_DIR}/${folder}/*.cuh)
  foreach(file ${files})
    file(RELATIVE_PATH rel ${SOURCE_DIR} ${file})
    if(rel IN_LIST allowed)
      continue()
    endif()
    file(STRINGS ${file} lines REGEX "getenv")
    foreach(line ${lines})
      string(STRIP "${line}" line)
      string(APPEND errors "${rel}: ${line}\n")
    endforeach()
  endforeach()
endforeach()
if(errors)
  message(FATAL_ERROR "environment read outside tensorplay/base/knobs.cpp (declare a row in the "
                      "layer's <folder>/<layer>_knobs.h and read it with knob_int, knob_string, "
                      "...):\n${errors}")
endif()
message(STATUS "getenv: only the table of knobs and the launcher environment read it")
