# Installs the build into a scratch prefix, then configures, builds and runs a separate project
# that uses find_package(tensorplay). Run as:
# cmake -DBUILD_DIR=<build> -DWORK_DIR=<scratch> -DTEST_DIR=<this folder> -P check_package.cmake
cmake_minimum_required(VERSION 3.25)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR}/consumer)
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK_DIR}/prefix
                RESULT_VARIABLE rc OUTPUT_QUIET)
if(rc)
  message(FATAL_ERROR "cmake --install failed (${rc})")
endif()
configure_file(${TEST_DIR}/consumer_CMakeLists.txt.in ${WORK_DIR}/consumer/CMakeLists.txt COPYONLY)
configure_file(${TEST_DIR}/consumer_main.cpp ${WORK_DIR}/consumer/main.cpp COPYONLY)
execute_process(COMMAND ${CMAKE_COMMAND} -S ${WORK_DIR}/consumer -B ${WORK_DIR}/consumer/build
                        -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(rc)
  message(FATAL_ERROR "configuring a find_package(tensorplay) project failed:\n${out}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK_DIR}/consumer/build
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(rc)
  message(FATAL_ERROR "building against the installed package failed:\n${out}")
endif()
execute_process(COMMAND ${WORK_DIR}/consumer/build/consumer RESULT_VARIABLE rc)
if(rc)
  message(FATAL_ERROR "the consumer program failed (${rc})")
endif()
message(STATUS "find_package(tensorplay) works from an install prefix")
