# gpu.decode: sampling's attention over the KV cache (attention_decode.cu)
# against the CPU's tlm_attention_decode, on the emulated device.
add_executable(test_gpu_decode ${CMAKE_CURRENT_SOURCE_DIR}/test_gpu_decode.c)
target_link_libraries(test_gpu_decode PRIVATE tlm_gpu)
target_include_directories(test_gpu_decode PRIVATE ${PROJECT_SOURCE_DIR}/tests/runtime)
add_test(NAME gpu.decode COMMAND test_gpu_decode)
set_tests_properties(gpu.decode PROPERTIES ENVIRONMENT "${TLM_GPU_TEST_ENV}" TIMEOUT 120)
