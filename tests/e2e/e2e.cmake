# End-to-end model tests: PyTorch model -> ONNX -> kiln build -> kiln run -> compare with
# PyTorch's outputs. Included from tests/CMakeLists.txt when KILN_E2E_TESTS is ON. They need
# python3-torch, python3-torchvision, python3-onnx and python3-numpy (scripts/install-deps.sh);
# without them they fail with a message saying so. Generated models are cached in build/e2e.
set(KILN_E2E_MODELS resnet18 encoder)
foreach(model ${KILN_E2E_MODELS})
  add_test(NAME e2e_${model}
    COMMAND ${CMAKE_CURRENT_LIST_DIR}/run_model.sh $<TARGET_FILE:kiln> ${model}
            ${CMAKE_BINARY_DIR}/e2e 1e-4)
  set_tests_properties(e2e_${model} PROPERTIES TIMEOUT 1800 LABELS e2e)
endforeach()

# Small models of paths the zoo does not take (bench/models/coverage_models.py): 1-D convs,
# transposed convs, dilated ASPP, more activations, a GPT-style decoder, LSTM and GRU,
# InstanceNorm and GroupNorm, PixelShuffle, ShuffleNetV2's 58-channel branches (pad_channels),
# a LLaMA-style decoder (rotary Sin/Cos of CumSum positions, Trilu mask, Einsum attention, TopK,
# ArgMax, GatherElements, ReduceLogSumExp; its integer outputs compared exactly).
set(KILN_E2E_COVERAGE_MODELS keyword_spotter unet dcgan_generator aspp tabular_mlp gpt_decoder
    llama_decoder sequence_tagger style_net super_resolution channel_split)
foreach(model ${KILN_E2E_COVERAGE_MODELS})
  add_test(NAME e2e_coverage_${model}
    COMMAND ${CMAKE_CURRENT_LIST_DIR}/run_model.sh $<TARGET_FILE:kiln> ${model}
            ${CMAKE_BINARY_DIR}/e2e 1e-4 coverage_models.py)
  set_tests_properties(e2e_coverage_${model} PROPERTIES TIMEOUT 900 LABELS e2e)
endforeach()

# Arm: packages cross-compiled for aarch64 run by the cross-built kiln-run under
# qemu-user (skipped, naming what is missing, without the cross toolchain).
add_test(NAME e2e_arm_qemu
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/run_arm_qemu.sh aarch64 $<TARGET_FILE:kiln>
          ${CMAKE_BINARY_DIR}/arm 1e-4 squeezenet1_1 mobilenet_v2 encoder)
set_tests_properties(e2e_arm_qemu PROPERTIES TIMEOUT 1800 LABELS e2e SKIP_RETURN_CODE 77)
# 32-bit Arm: the same models (one work folder: the models are generated once).
add_test(NAME e2e_armv7_qemu
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/run_arm_qemu.sh armv7 $<TARGET_FILE:kiln>
          ${CMAKE_BINARY_DIR}/arm 1e-4 squeezenet1_1 mobilenet_v2 encoder)
set_tests_properties(e2e_armv7_qemu PROPERTIES TIMEOUT 1800 LABELS e2e SKIP_RETURN_CODE 77)
# Arm tuning: `kiln tune --runner` measures through the cross-built
# kiln-measure-worker --serve under qemu-user; the records build a package that
# kiln-run runs there. Shares the cross-build folder with e2e_arm_qemu.
add_test(NAME e2e_arm_qemu_tune
  COMMAND ${CMAKE_CURRENT_LIST_DIR}/run_arm_qemu_tune.sh $<TARGET_FILE:kiln> ${CMAKE_BINARY_DIR}/arm
          1e-4)
set_tests_properties(e2e_arm_qemu_tune PROPERTIES TIMEOUT 1200 LABELS e2e SKIP_RETURN_CODE 77)
# The three share the work folder (models, cross builds): never at once.
set_tests_properties(e2e_arm_qemu e2e_armv7_qemu e2e_arm_qemu_tune PROPERTIES
  RESOURCE_LOCK arm_cross_build)
