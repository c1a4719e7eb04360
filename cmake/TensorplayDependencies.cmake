# Finds tensorplay's dependencies and defines imported targets for those that ship no CMake config
# (CAF 0.17, NCCL). Used by the build and by the installed package config.
include_guard(GLOBAL)
include(CMakeFindDependencyMacro)

set(BLA_VENDOR OpenBLAS)
find_package(BLAS REQUIRED)
find_package(Threads REQUIRED)
find_package(ZLIB REQUIRED)  # crc32 of checkpoint files (tensorplay/core/serialize.cpp)
# JSON headers of safetensors files and Hugging Face config.json (tensorplay/core/safetensors.cpp).
find_package(nlohmann_json 3 CONFIG REQUIRED)
# oneDNN 2.6 (Debian's libdnnl-dev, built on OpenMP) runs the host products; OpenMP sets each
# calling thread's product thread count. Debian's dnnl-config.cmake insists on OpenCL headers
# (its GPU runtime) that the CPU path never uses, so the target is defined here instead.
find_package(OpenMP REQUIRED COMPONENTS CXX)
# Highway 1.0 (Debian's libhwy-dev): the vectorised host kernels, dispatched at run time.
find_package(hwy CONFIG REQUIRED)
if(NOT TARGET DNNL::dnnl)
  find_path(DNNL_INCLUDE_DIR dnnl.hpp)
  find_library(DNNL_LIBRARY dnnl)
  if(NOT DNNL_INCLUDE_DIR OR NOT DNNL_LIBRARY)
    message(FATAL_ERROR "oneDNN not found: install Debian's libdnnl-dev (bash scripts/setup.sh)")
  endif()
  add_library(DNNL::dnnl SHARED IMPORTED)
  set_target_properties(DNNL::dnnl PROPERTIES IMPORTED_LOCATION ${DNNL_LIBRARY}
    INTERFACE_INCLUDE_DIRECTORIES ${DNNL_INCLUDE_DIR})
endif()
# SentencePiece 0.1.97 from Debian (libsentencepiece-dev): trains and runs the BPE tokenizer of
# token shards (tensorplay/data/sentencepiece_tokenizer.cpp). Its CMake config is not shipped.
if(NOT TARGET sentencepiece::sentencepiece)
  find_path(SENTENCEPIECE_INCLUDE_DIR sentencepiece_processor.h)
  find_library(SENTENCEPIECE_LIBRARY sentencepiece)
  find_library(SENTENCEPIECE_TRAIN_LIBRARY sentencepiece_train)
  if(NOT SENTENCEPIECE_INCLUDE_DIR OR NOT SENTENCEPIECE_LIBRARY OR NOT SENTENCEPIECE_TRAIN_LIBRARY)
    message(FATAL_ERROR
      "SentencePiece not found: install Debian's libsentencepiece-dev (bash scripts/setup.sh)")
  endif()
  add_library(sentencepiece::sentencepiece SHARED IMPORTED)
  set_target_properties(sentencepiece::sentencepiece PROPERTIES
    IMPORTED_LOCATION ${SENTENCEPIECE_LIBRARY}
    INTERFACE_INCLUDE_DIRECTORIES ${SENTENCEPIECE_INCLUDE_DIR}
    INTERFACE_LINK_LIBRARIES ${SENTENCEPIECE_TRAIN_LIBRARY})
endif()
# PCRE2 (libpcre2-dev) runs the Unicode-property patterns of tokenizer.json pre-tokenizers. Their
# NFC normalizer loads ICU's common library when first used (tensorplay/data/nfc.cpp): nothing
# links ICU, so binaries that never normalize (the GPU bundle's) need none.
if(NOT TARGET PCRE2::pcre2)
  find_path(PCRE2_INCLUDE_DIR pcre2.h)
  find_library(PCRE2_LIBRARY pcre2-8)
  if(NOT PCRE2_INCLUDE_DIR OR NOT PCRE2_LIBRARY)
    message(FATAL_ERROR "PCRE2 not found: install Debian's libpcre2-dev (bash scripts/setup.sh)")
  endif()
  add_library(PCRE2::pcre2 SHARED IMPORTED)
  set_target_properties(PCRE2::pcre2 PROPERTIES IMPORTED_LOCATION ${PCRE2_LIBRARY}
    INTERFACE_INCLUDE_DIRECTORIES ${PCRE2_INCLUDE_DIR})
endif()
find_package(spdlog CONFIG REQUIRED)
find_package(ucx CONFIG REQUIRED)

# CAF 0.17.6 from Debian: no CMake config, no pkg-config file.
if(NOT TARGET caf::core)
  find_path(CAF_INCLUDE_DIR caf/all.hpp REQUIRED)
  find_library(CAF_CORE_LIBRARY caf_core REQUIRED)
  find_library(CAF_IO_LIBRARY caf_io REQUIRED)
  add_library(caf::core SHARED IMPORTED)
  set_target_properties(caf::core PROPERTIES IMPORTED_LOCATION ${CAF_CORE_LIBRARY}
    INTERFACE_INCLUDE_DIRECTORIES ${CAF_INCLUDE_DIR}
    INTERFACE_LINK_LIBRARIES Threads::Threads)
  add_library(caf::io SHARED IMPORTED)
  set_target_properties(caf::io PROPERTIES IMPORTED_LOCATION ${CAF_IO_LIBRARY}
    INTERFACE_LINK_LIBRARIES caf::core)
endif()
