# gpu.linear: the row-major linear maps as GEMM descriptions against the
# CPU's tlm_linear_forward/backward, on the emulated device.
add_executable(test_gpu_linear ${CMAKE_CURRENT_SOURCE_DIR}/test_gpu_linear.c)
target_link_libraries(test_gpu_linear PRIVATE tlm_gpu)
add_test(NAME gpu.linear COMMAND test_gpu_linear)
set_tests_properties(gpu.linear PROPERTIES ENVIRONMENT "${TLM_GPU_TEST_ENV}" TIMEOUT 60)
