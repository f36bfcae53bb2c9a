# gpu.mixers: the attention and Titans memory kernels (runtime/gpu/attention.cu,
# titans.cu, titans_act.cu) against their CPU ops, on the emulated device.
add_executable(test_gpu_mixers ${CMAKE_CURRENT_SOURCE_DIR}/test_gpu_mixers.c)
target_link_libraries(test_gpu_mixers PRIVATE tlm_gpu)
add_test(NAME gpu.mixers COMMAND test_gpu_mixers)
set_tests_properties(gpu.mixers PROPERTIES ENVIRONMENT "${TLM_GPU_TEST_ENV}" TIMEOUT 120)
