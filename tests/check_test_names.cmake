# Checks that no Catch test name holds a ';': CTest reads it as a list separator, and registers
# (and runs) the halves of the name as two tests that match nothing, or the wrong tests.
# Run as: cmake -DSOURCE_DIR=<repo> -P check_test_names.cmake
cmake_minimum_required(VERSION 3.25)
file(GLOB_RECURSE files ${SOURCE_DIR}/tests/*.cpp)
set(errors "")
foreach(file ${files})
  file(READ ${file} text)
  string(REGEX MATCH "TEST_CASE\\(\"[^\"]*;" found "${text}")
  if(found)
    file(RELATIVE_PATH rel ${SOURCE_DIR} ${file})
    string(APPEND errors "  ${rel}\n")
  endif()
endforeach()
if(errors)
  message(FATAL_ERROR "a test name holds a ';', which CTest splits into two names; write ',' "
                      "instead, in:\n${errors}")
endif()
message(STATUS "test names: none holds a ';'")
