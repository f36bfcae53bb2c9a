# gpu.basic: the runtime's basic GPU ops (runtime/gpu/gpu_basic.h: embedding,
# rmsnorm, rope, cross-entropy, sigmoid gate, SwiGLU) against their CPU ops.
add_executable(test_gpu_basic ${CMAKE_CURRENT_SOURCE_DIR}/test_gpu_basic.c)
target_link_libraries(test_gpu_basic PRIVATE tlm_gpu)
add_test(NAME gpu.basic COMMAND test_gpu_basic)
set_tests_properties(gpu.basic PROPERTIES ENVIRONMENT "${TLM_GPU_TEST_ENV}" TIMEOUT 120)
