# ctest deploy_consumer: installs kiln's runtime component into a fresh
# prefix, then configures and builds examples/deploy against it with
# find_package(kiln), and runs the result (usage check: no package needed).
foreach(var KILN_BUILD_DIR CONSUMER_SOURCE_DIR WORK_DIR CMAKE_GENERATOR C_COMPILER CXX_COMPILER)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "deploy_consumer: ${var} is not set")
  endif()
endforeach()

function(run_step name)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "deploy_consumer: ${name} failed (${rc}):\n${out}\n${err}")
  endif()
endfunction()

file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)
run_step(install ${CMAKE_COMMAND} --install ${KILN_BUILD_DIR} --prefix ${prefix}
  --component runtime)

# Only the runtime went in: no compiler library, no LLVM.
file(GLOB_RECURSE installed RELATIVE ${prefix} ${prefix}/*)
message(STATUS "installed: ${installed}")
foreach(f IN LISTS installed)
  if(f MATCHES "kiln_compiler|LLVM")
    message(FATAL_ERROR "deploy_consumer: the runtime component installed ${f}")
  endif()
endforeach()

# A sanitizer build's runtime needs the sanitizer's runtime in the program too.
set(flags)
if(SANITIZER_FLAGS)
  set(flags "-DCMAKE_C_FLAGS=${SANITIZER_FLAGS}" "-DCMAKE_CXX_FLAGS=${SANITIZER_FLAGS}"
            "-DCMAKE_EXE_LINKER_FLAGS=${SANITIZER_FLAGS}")
endif()
run_step(configure ${CMAKE_COMMAND} -S ${CONSUMER_SOURCE_DIR} -B ${WORK_DIR}/build
  -G ${CMAKE_GENERATOR} -DCMAKE_PREFIX_PATH=${prefix}
  -DCMAKE_C_COMPILER=${C_COMPILER} -DCMAKE_CXX_COMPILER=${CXX_COMPILER} ${flags})
run_step(build ${CMAKE_COMMAND} --build ${WORK_DIR}/build)

# The programs start (libkiln_runtime resolves from the prefix) and answer a
# missing argument with their usage and status 2, a missing file with 1.
foreach(prog deploy deploy_c)
  execute_process(COMMAND ${WORK_DIR}/build/${prog} RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 2 OR NOT err MATCHES "usage:")
    message(FATAL_ERROR "deploy_consumer: ${prog} without arguments: status ${rc}, '${err}'")
  endif()
  execute_process(COMMAND ${WORK_DIR}/build/${prog} ${WORK_DIR}/no-such.tar
    RESULT_VARIABLE rc ERROR_VARIABLE err)
  if(NOT rc EQUAL 1 OR NOT err MATCHES "no-such.tar': no such file")
    message(FATAL_ERROR "deploy_consumer: ${prog} on a missing package: status ${rc}, '${err}'")
  endif()
endforeach()
file(REMOVE_RECURSE ${WORK_DIR})
