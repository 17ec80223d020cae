# Sanitizer and fuzzing builds (scripts/test.sh --sanitize, scripts/fuzz.sh).
#
# KILN_SANITIZE=ON: every kiln translation unit is built with AddressSanitizer
# and UndefinedBehaviorSanitizer. Undefined behaviour aborts (no recovery), so
# a finding fails its test instead of scrolling past in the log. The kernels
# kiln generates at run time are compiled by LLVM, not by this compiler, so
# they stay uninstrumented; what is checked is kiln itself: the importer, the
# passes, the runtime, the tuner and its database.
#
# KILN_FUZZ=ON (clang only): the libFuzzer targets of fuzz/ are added, and every
# kiln translation unit gets -fsanitize=fuzzer-no-link so that libFuzzer sees
# coverage of the code under test, not only of the fuzz drivers.
option(KILN_SANITIZE "Build with AddressSanitizer and UndefinedBehaviorSanitizer" OFF)
option(KILN_FUZZ "Build the libFuzzer targets (needs clang); implies KILN_SANITIZE" OFF)

if(KILN_FUZZ)
  if(NOT CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    message(FATAL_ERROR "KILN_FUZZ needs clang (scripts/fuzz.sh configures it with clang++)")
  endif()
  set(KILN_SANITIZE ON)
endif()

if(KILN_SANITIZE)
  set(KILN_SANITIZER_FLAGS -fsanitize=address,undefined -fno-sanitize-recover=undefined
      -fno-omit-frame-pointer)
  # -fsanitize=vptr needs RTTI of every class it sees, including those of
  # libraries built without the sanitizer (LLVM is built with -fno-rtti).
  # -fsanitize=function (clang) is a C++ check whose handler the C examples,
  # linked by the C driver, do not get.
  list(APPEND KILN_SANITIZER_FLAGS -fno-sanitize=vptr)
  if(CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
    list(APPEND KILN_SANITIZER_FLAGS -fno-sanitize=function)
  endif()
  add_compile_options(${KILN_SANITIZER_FLAGS})
  add_link_options(${KILN_SANITIZER_FLAGS})
  if(KILN_FUZZ)
    add_compile_options(-fsanitize=fuzzer-no-link)
  endif()
  # One string, for projects built against this build (tests/deploy_consumer).
  string(REPLACE ";" " " KILN_SANITIZER_FLAGS_STRING "${KILN_SANITIZER_FLAGS}")
  message(STATUS "kiln: sanitizers on (${KILN_SANITIZER_FLAGS_STRING})")
endif()
