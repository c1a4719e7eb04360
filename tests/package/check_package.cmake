# Installs the build into a scratch prefix, then configures, builds and runs examples/consumer, a
# separate project that uses find_package(tensorplay) and trains a two-stage pipeline. Run as:
# cmake -DBUILD_DIR=<build> -DWORK_DIR=<scratch> -DCONSUMER_DIR=<examples/consumer> -P check_package.cmake
cmake_minimum_required(VERSION 3.25)
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR})
execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${WORK_DIR}/prefix
                RESULT_VARIABLE rc OUTPUT_QUIET)
if(rc)
  message(FATAL_ERROR "cmake --install failed (${rc})")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} -S ${CONSUMER_DIR} -B ${WORK_DIR}/consumer-build
                        -DCMAKE_PREFIX_PATH=${WORK_DIR}/prefix
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(rc)
  message(FATAL_ERROR "configuring examples/consumer (find_package(tensorplay)) failed:\n${out}")
endif()
execute_process(COMMAND ${CMAKE_COMMAND} --build ${WORK_DIR}/consumer-build
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(rc)
  message(FATAL_ERROR "building examples/consumer against the installed package failed:\n${out}")
endif()
execute_process(COMMAND ${WORK_DIR}/consumer-build/consumer RESULT_VARIABLE rc
                OUTPUT_VARIABLE out ERROR_VARIABLE out)
message(STATUS "${out}")
if(rc)
  message(FATAL_ERROR "examples/consumer failed (${rc}): its two-stage pipeline did not learn")
endif()
message(STATUS "find_package(tensorplay) works from an install prefix")
