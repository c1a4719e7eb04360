# Checks the layers of docs/design.md: every folder of tensorplay/ belongs to one layer, and a file
# includes only its own layer and the layers below it; inside the runtime layer its folders are
# ordered too (wire < observe < distributed < runtime). Also: schedules/ stays pure logic,
# transport/ includes nothing of the pipeline and its public headers name no pipeline vocabulary,
# and CAF and CUDA headers stay out of public headers.
# Run as: cmake -DSOURCE_DIR=<repo> -P check_layering.cmake
cmake_minimum_required(VERSION 3.25)
# Folders (and the umbrella tensor.h) from the bottom up, most specific first where one folder
# holds another; each with the layer it belongs to. A folder's detail/ belongs to the folder.
set(folders
  base:base tensor:tensors
  core:tensors nn:tensors optim:tensors data:tensors cpu_kernels:tensors
  cuda:tensors
  schedules:schedules
  transport:transport
  distributed/device_mesh:stages
  pipelining/checkpoints:stages
  pipelining/planner:planner
  pipelining/runtime:runtime
  pipelining:stages
  wire:wire observe:observe distributed/tensor_parallel:distributed distributed/fsdp:runtime
  distributed:distributed)
# What each layer may include (its own folders included).
set(allowed_base base)
set(allowed_tensors base tensors)
set(allowed_stages base tensors stages)
set(allowed_schedules schedules)
set(allowed_transport base tensors transport)
set(allowed_wire base tensors stages schedules transport wire)
set(allowed_observe ${allowed_wire} observe)
set(allowed_distributed ${allowed_observe} distributed)
set(allowed_runtime ${allowed_distributed} runtime)
set(allowed_planner ${allowed_runtime} planner)

# The layer of a path relative to tensorplay/ (a file or an include), or "" when none.
function(layer_of path out)
  foreach(entry ${folders})
    string(REPLACE ":" ";" pair ${entry})
    list(GET pair 0 folder)
    list(GET pair 1 layer)
    if(path MATCHES "^${folder}(/|\\.|$)")
      set(${out} ${layer} PARENT_SCOPE)
      return()
    endif()
  endforeach()
  set(${out} "" PARENT_SCOPE)
endfunction()

set(errors "")
file(GLOB_RECURSE files ${SOURCE_DIR}/tensorplay/*.h ${SOURCE_DIR}/tensorplay/*.cpp
     ${SOURCE_DIR}/tensorplay/*.cu ${SOURCE_DIR}/tensorplay/*.cuh)
foreach(file ${files})
  file(RELATIVE_PATH rel ${SOURCE_DIR}/tensorplay ${file})
  if(NOT rel MATCHES "/")
    continue()  # the umbrella headers at tensorplay/ include every layer
  endif()
  layer_of(${rel} layer)
  if(layer STREQUAL "")
    string(APPEND errors "tensorplay/${rel}: its folder belongs to no layer (add it to ${CMAKE_CURRENT_LIST_FILE})\n")
    continue()
  endif()
  file(STRINGS ${file} includes REGEX "^#include [\"<]")
  foreach(line ${includes})
    string(REGEX MATCH "^#include [\"<]([^\">]+)[\">]" _ "${line}")
    set(target "${CMAKE_MATCH_1}")
    if(target MATCHES "^tensorplay/(.+)$")
      layer_of(${CMAKE_MATCH_1} to)
      if(NOT to IN_LIST allowed_${layer})
        string(APPEND errors "tensorplay/${rel} (layer ${layer}): includes ${target} (layer ${to}), "
                             "but may only use: ${allowed_${layer}}\n")
      endif()
      if(layer STREQUAL "transport" AND to MATCHES "stages|schedules")
        string(APPEND errors "tensorplay/${rel}: transport/ includes nothing of the pipeline, "
                             "but includes ${target}\n")
      endif()
    endif()
    string(REGEX MATCH "^([a-z_]+)/" _ "${target}")
    set(top "${CMAKE_MATCH_1}")
    if(layer STREQUAL "schedules" AND (top STREQUAL "caf" OR target MATCHES "cuda"))
      string(APPEND errors "tensorplay/${rel}: schedules/ is pure logic but includes ${target}\n")
    endif()
    # CAF stays in sources, detail/ and wire/ (none of them installed); CUDA stays in cuda/ and
    # transport sources and transport/detail.
    if(top STREQUAL "caf" AND rel MATCHES "\\.h$" AND NOT rel MATCHES "(^|/)detail/"
       AND NOT rel MATCHES "^wire/")
      string(APPEND errors "tensorplay/${rel}: a public header includes CAF (${target})\n")
    endif()
    if(target MATCHES "^(cuda|cublas|nccl)" AND rel MATCHES "\\.h$" AND NOT rel MATCHES "^cuda/"
       AND NOT rel MATCHES "^transport/detail/")
      string(APPEND errors "tensorplay/${rel}: a public header includes ${target}\n")
    endif()
  endforeach()
endforeach()
# transport/'s API moves opaque {stream, key} pairs: its public headers speak of no pipeline (the
# pipeline's keys live in wire/pipeline_tag.h).
file(GLOB transport_headers ${SOURCE_DIR}/tensorplay/transport/*.h)
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
