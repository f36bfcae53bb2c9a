# gpu.device, gpu.gemm, gpu.kernel_cache: the device API itself on the
# emulated device (runtime/device: device.c, device_emu.c, gemm_reference.c,
# kernel_cache.c).
foreach(t test_device test_gemm test_kernel_cache)
  add_executable(${t} ${CMAKE_CURRENT_SOURCE_DIR}/${t}.c)
  target_link_libraries(${t} PRIVATE tlm_device tlm_rt)
  target_include_directories(${t} PRIVATE ${PROJECT_SOURCE_DIR}/tests/runtime)
endforeach()
add_test(NAME gpu.device COMMAND test_device)
add_test(NAME gpu.gemm COMMAND test_gemm)
# The cache's own folders live under here, apart from the suite's cache.
add_test(NAME gpu.kernel_cache COMMAND test_kernel_cache ${CMAKE_CURRENT_BINARY_DIR}/kernel_cache_test)
set_tests_properties(gpu.device gpu.gemm gpu.kernel_cache PROPERTIES ENVIRONMENT "${TLM_GPU_TEST_ENV}" TIMEOUT 120)
