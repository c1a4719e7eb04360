# Checks that every layer includes only the layers below it (DESIGN.md's arrows), that
# schedules/ stays pure logic, that transport/ includes nothing from stages/ or schedules/ and
# its public headers name no pipeline vocabulary, and that CAF and CUDA headers stay out of public
# headers.
# Run as: cmake -DSOURCE_DIR=<repo> -P check_layering.cmake
cmake_minimum_required(VERSION 3.25)
set(allowed_tensors tensors)
set(allowed_stages tensors stages)
set(allowed_schedules schedules)
set(allowed_transport tensors transport)
set(allowed_actors tensors stages schedules transport actors)
set(allowed_planner tensors stages schedules transport actors planner)
set(layers tensors stages schedules transport actors planner)

set(errors "")
foreach(layer ${layers})
  file(GLOB_RECURSE files ${SOURCE_DIR}/${layer}/*.h ${SOURCE_DIR}/${layer}/*.cpp
       ${SOURCE_DIR}/${layer}/*.cu ${SOURCE_DIR}/${layer}/*.cuh)
  foreach(file ${files})
    file(RELATIVE_PATH rel ${SOURCE_DIR} ${file})
    file(STRINGS ${file} includes REGEX "^#include [\"<]")
    foreach(line ${includes})
      string(REGEX MATCH "^#include [\"<]([^\">]+)[\">]" _ "${line}")
      set(target "${CMAKE_MATCH_1}")
      string(REGEX MATCH "^([a-z_]+)/" _ "${target}")
      set(top "${CMAKE_MATCH_1}")
      if(top IN_LIST layers AND NOT top IN_LIST allowed_${layer})
        string(APPEND errors "${rel}: includes ${target}, but ${layer}/ may only use: ${allowed_${layer}}\n")
      endif()
      # transport/ moves opaque tensors and keys: it knows nothing of stages or schedules.
      if(layer STREQUAL "transport" AND (top STREQUAL "stages" OR top STREQUAL "schedules"))
        string(APPEND errors "${rel}: transport/ includes nothing from stages/ or schedules/, "
                             "but includes ${target}\n")
      endif()
      if(layer STREQUAL "schedules" AND (top STREQUAL "caf" OR target MATCHES "cuda"))
        string(APPEND errors "${rel}: schedules/ is pure logic but includes ${target}\n")
      endif()
      # CAF stays in actors/ sources and actors/detail; CUDA stays in tensors/cuda and transport
      # sources and transport/detail (private headers shared by its sources).
      if(top STREQUAL "caf" AND rel MATCHES "\\.h$" AND NOT rel MATCHES "^actors/detail/")
        string(APPEND errors "${rel}: a public header includes CAF (${target})\n")
      endif()
      if(target MATCHES "^(cuda|cublas|nccl)" AND rel MATCHES "\\.h$" AND NOT rel MATCHES "/cuda/"
         AND NOT rel MATCHES "^transport/detail/")
        string(APPEND errors "${rel}: a public header includes ${target}\n")
      endif()
    endforeach()
  endforeach()
endforeach()
# transport/'s API moves opaque {stream, key} pairs: its public headers speak of no pipeline (the
# pipeline's keys live in actors/pipeline_tag.h).
file(GLOB transport_headers ${SOURCE_DIR}/transport/*.h)
foreach(file ${transport_headers})
  file(RELATIVE_PATH rel ${SOURCE_DIR} ${file})
  file(STRINGS ${file} words REGEX
       "(^|[^A-Za-z_])([Mm]icrobatch|[Ss]tages?|[Pp]ipelines?|TransferTag|kCollectiveStage)([^A-Za-z_]|$)")
  foreach(line ${words})
    string(APPEND errors "${rel}: transport/'s API names no pipeline vocabulary, but says: ${line}\n")
  endforeach()
endforeach()
if(errors)
  message(FATAL_ERROR "layering violations:\n${errors}")
endif()
message(STATUS "layering: every include points downward")
