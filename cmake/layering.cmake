# The layering of src/ as a build fact (see the table in CMakeLists.txt).
#
# 1. Link check: each layer's static library is linked whole into a shared
#    object with --no-undefined against only the layers it may use. A call
#    into a layer above (say ops calling a graph function) leaves an undefined
#    symbol there and the default build fails.
# 2. Include check (the `layering` test, cmake/check_layering.cmake): every
#    #include "folder/..." in src/ is checked against KILN_LAYER_ALLOWED, so
#    header-only uses that the linker cannot see fail too.

# folder -> the src/ folders its files may include (itself always).
set(KILN_LAYER_ALLOWED
  "support:"
  "ir:support"
  "schedule:ir,support"
  "ops:schedule,ir,support"
  "codegen:ir,runtime,support"
  "graph:ops,schedule,ir,support"
  "frontend:graph,ops,schedule,ir,support"
  "driver:frontend,graph,ops,schedule,ir,codegen,runtime,support"
  "tuner:ops,schedule,ir,codegen,runtime,support"
  # Post-training quantization: builds and runs the float model (driver,
  # runtime) and hands its decisions to the frontend's QDQ writer.
  "quantize:driver,frontend,graph,ops,schedule,ir,runtime,support,codegen/target.h"
  # A tuning run's steps that build the model: driver (builds) and tuner (records).
  "autotune:driver,tuner,frontend,graph,ops,schedule,ir,codegen,runtime,support"
  "runtime:"
  # The CLI parses arguments and prints: it drives the build (driver) and the
  # tuner, loads packages (runtime) and parses --target (codegen/target.h only).
  "cli:autotune,driver,tuner,quantize,frontend,runtime,support,codegen/target.h"
  # The Python binding (src/python) is the CLI's peer: the same library calls
  # (kiln.build(precision="int8") quantizes as `kiln build --precision int8`),
  # plus graph/op_registry.h for the exception it maps to kiln.ModelError.
  "python:autotune,driver,tuner,quantize,frontend,runtime,support,codegen/target.h,graph/op_registry.h")

set(KILN_LAYER_CHECK_STUB ${CMAKE_CURRENT_BINARY_DIR}/kiln_layer_check.cc)
file(WRITE ${KILN_LAYER_CHECK_STUB} "// Linked with a whole kiln layer: see cmake/layering.cmake.\n")
# Not in sanitizer builds: there the sanitizer runtime, which only executables
# link, leaves every layer with undefined symbols. The default build checks.
set(KILN_LAYER_CHECKED_LAYERS support ir schedule ops graph codegen frontend driver tuner quantize
  autotune)
if(KILN_SANITIZE)
  set(KILN_LAYER_CHECKED_LAYERS)
endif()
foreach(layer ${KILN_LAYER_CHECKED_LAYERS})
  add_library(kiln_layer_check_${layer} SHARED ${KILN_LAYER_CHECK_STUB})
  target_link_libraries(kiln_layer_check_${layer} PRIVATE
    "$<LINK_LIBRARY:WHOLE_ARCHIVE,kiln_${layer}>")
  target_link_options(kiln_layer_check_${layer} PRIVATE -Wl,--no-undefined)
endforeach()

if(KILN_BUILD_TESTS)
  add_test(NAME layering COMMAND ${CMAKE_COMMAND}
    -DSRC_DIR=${CMAKE_CURRENT_SOURCE_DIR}/src "-DALLOWED=${KILN_LAYER_ALLOWED}"
    -P ${CMAKE_CURRENT_SOURCE_DIR}/cmake/check_layering.cmake)
endif()
