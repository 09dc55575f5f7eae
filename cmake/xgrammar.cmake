# xgrammar's C++ core (https://github.com/mlc-ai/xgrammar, Apache-2.0), the
# grammar engine of client/constrain/: its PyPI source distribution, pinned by
# name, version and SHA-256 here and nowhere else, is downloaded and built once
# into this build tree (_deps/xgrammar-*) as a static library, without its
# Python bindings (cmake/xgrammar_config.cmake replaces its cmake/config.cmake).
# Nothing of it is committed. Its only third-party parts, picojson and dlpack
# (headers), come in the sdist.
#
# Offline: -DLLM_XGRAMMAR_SDIST=/path/to/xgrammar-<version>.tar.gz uses a local
# copy of the same file (its SHA-256 is checked all the same).
#
# Defines the imported target xgrammar::xgrammar, the target xgrammar_ext that
# builds it, and LLM_XGRAMMAR_SOURCE_DIR (its unpacked sources).
include_guard(GLOBAL)
include(ExternalProject)

set(LLM_XGRAMMAR_NAME xgrammar)
set(LLM_XGRAMMAR_VERSION 0.2.9)
set(LLM_XGRAMMAR_SHA256 87b466bca2475e29bb0323abc62c6c33cbcbcff47e5fb800a3e2099ac9620b90)
set(LLM_XGRAMMAR_URL
  "https://files.pythonhosted.org/packages/3a/2f/5bf8e8fa6619cff534932f79b0abc81a417d354bc5093252c1a6081d0a93/${LLM_XGRAMMAR_NAME}-${LLM_XGRAMMAR_VERSION}.tar.gz")

set(LLM_XGRAMMAR_SDIST "" CACHE FILEPATH
  "A local copy of xgrammar's sdist (default: download it from PyPI)")
set(LLM_XGRAMMAR_JOBS 2 CACHE STRING "Parallel jobs of xgrammar's own build")

set(_xg_url ${LLM_XGRAMMAR_URL})
if(LLM_XGRAMMAR_SDIST)
  set(_xg_url ${LLM_XGRAMMAR_SDIST})
endif()
set(_xg_prefix ${CMAKE_BINARY_DIR}/_deps)
set(_xg_src ${_xg_prefix}/xgrammar-src)
set(_xg_bin ${_xg_prefix}/xgrammar-build)
set(_xg_lib ${_xg_bin}/${CMAKE_STATIC_LIBRARY_PREFIX}xgrammar${CMAKE_STATIC_LIBRARY_SUFFIX})

# Its CMakeLists adds -Werror and -flto=auto; later flags win: no LTO (the
# archive is linked by gcc and by clang), no -Werror (a newer warning in
# its code must not stop our build). Under the fuzz preset it is
# instrumented like everything else a fuzzer links.
# XGRAMMAR_LOG_CUSTOMIZE: its log calls functions that the library using it
# defines (client/constrain/xgrammar_log.cc): no writes to stderr.
set(_xg_flags "${CMAKE_CXX_FLAGS} -fno-lto -Wno-error -g1 -DXGRAMMAR_LOG_CUSTOMIZE=1")
if(LLM_BUILD_FUZZERS)
  string(APPEND _xg_flags " -fsanitize=fuzzer-no-link,address,undefined")
endif()

set(_xg_launcher "")
if(CCACHE_PROGRAM)
  set(_xg_launcher -DCMAKE_CXX_COMPILER_LAUNCHER=${CCACHE_PROGRAM})
endif()

ExternalProject_Add(xgrammar_ext
  URL ${_xg_url}
  URL_HASH SHA256=${LLM_XGRAMMAR_SHA256}
  DOWNLOAD_NAME ${LLM_XGRAMMAR_NAME}-${LLM_XGRAMMAR_VERSION}.tar.gz
  DOWNLOAD_DIR ${_xg_prefix}/xgrammar-download
  DOWNLOAD_EXTRACT_TIMESTAMP ON
  PREFIX ${_xg_prefix}/xgrammar-prefix
  SOURCE_DIR ${_xg_src}
  BINARY_DIR ${_xg_bin}
  PATCH_COMMAND ${CMAKE_COMMAND} -E copy
    ${CMAKE_CURRENT_LIST_DIR}/xgrammar_config.cmake <SOURCE_DIR>/cmake/config.cmake
  CMAKE_ARGS
    -DCMAKE_BUILD_TYPE=Release
    -DCMAKE_CXX_COMPILER=${CMAKE_CXX_COMPILER}
    ${_xg_launcher}
    "-DCMAKE_CXX_FLAGS=${_xg_flags}"
    -DXGRAMMAR_BUILD_PYTHON_BINDINGS=OFF
    -DXGRAMMAR_BUILD_CXX_TESTS=OFF
  BUILD_COMMAND ${CMAKE_COMMAND} --build <BINARY_DIR> --target xgrammar -j ${LLM_XGRAMMAR_JOBS}
  BUILD_BYPRODUCTS ${_xg_lib}
  INSTALL_COMMAND ""
  LOG_CONFIGURE ON
  LOG_BUILD ON
  LOG_OUTPUT_ON_FAILURE ON)

set(_xg_includes ${_xg_src}/include ${_xg_src}/3rdparty/picojson ${_xg_src}/3rdparty/dlpack/include)
# An imported target's include directories must exist when CMake generates.
file(MAKE_DIRECTORY ${_xg_includes})
add_library(xgrammar::xgrammar STATIC IMPORTED GLOBAL)
set_target_properties(xgrammar::xgrammar PROPERTIES
  IMPORTED_LOCATION ${_xg_lib}
  INTERFACE_INCLUDE_DIRECTORIES "${_xg_includes}"
  INTERFACE_COMPILE_DEFINITIONS
    "XGRAMMAR_ENABLE_CPPTRACE=0;XGRAMMAR_ENABLE_INTERNAL_CHECK=0;XGRAMMAR_LOG_CUSTOMIZE=1"
  INTERFACE_LINK_LIBRARIES Threads::Threads)
add_dependencies(xgrammar::xgrammar xgrammar_ext)
set(LLM_XGRAMMAR_SOURCE_DIR ${_xg_src})
