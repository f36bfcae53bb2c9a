# gpu.optim: the optimizers, the gradient norm, clipping and the gradient
# sums on the device (runtime/gpu/gpu_optim.h) against their CPU functions
# (tlm_rt/optim.h), on the emulated device.
add_executable(test_gpu_optim ${CMAKE_CURRENT_SOURCE_DIR}/test_gpu_optim.c)
target_link_libraries(test_gpu_optim PRIVATE tlm_gpu)
add_test(NAME gpu.optim COMMAND test_gpu_optim)
set_tests_properties(gpu.optim PROPERTIES ENVIRONMENT "${TLM_GPU_TEST_ENV}" TIMEOUT 120)
