# gpu.bf16: the bf16 conversion kernel bit for bit, and GEMMs lowered to
# bf16 operands (runtime/gpu/bf16_gemm.h) against a double reference from
# the same rounded inputs, on the emulated device.
add_executable(test_gpu_bf16 ${CMAKE_CURRENT_SOURCE_DIR}/test_gpu_bf16.c)
target_link_libraries(test_gpu_bf16 PRIVATE tlm_gpu)
target_include_directories(test_gpu_bf16 PRIVATE ${PROJECT_SOURCE_DIR}/tests/runtime)
add_test(NAME gpu.bf16 COMMAND test_gpu_bf16)
set_tests_properties(gpu.bf16 PROPERTIES ENVIRONMENT "${TLM_GPU_TEST_ENV}" TIMEOUT 60)
