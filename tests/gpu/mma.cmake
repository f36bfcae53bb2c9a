# gpu.mma: the tensor cores' device functions (runtime/gpu/mma.cuh) alone on
# the emulated device, with the kernels of mma_kernels.cu, and (with the
# toolkit) compiled by NVRTC for sm_80 and sm_90 with their PTX checked for
# the instructions. gpu.attention_tc: the tensor-core attention forward and backward
# (runtime/gpu/attention_tc.cu) against the scalar kernels.
add_executable(test_gpu_mma ${CMAKE_CURRENT_SOURCE_DIR}/test_gpu_mma.c)
target_link_libraries(test_gpu_mma PRIVATE tlm_gpu ${CMAKE_DL_LIBS})
target_compile_definitions(test_gpu_mma PRIVATE TLM_GPU_SOURCE_DIR="${PROJECT_SOURCE_DIR}/runtime/gpu"
                           TLM_MMA_TEST_KERNELS="${CMAKE_CURRENT_SOURCE_DIR}/mma_kernels.cu")
get_target_property(tlm_mma_device_definitions tlm_device COMPILE_DEFINITIONS)
if("TLM_HAVE_CUDA=1" IN_LIST tlm_mma_device_definitions)
  set(tlm_mma_soname ${tlm_mma_device_definitions})
  list(FILTER tlm_mma_soname INCLUDE REGEX "^TLM_NVRTC_SONAME=")
  target_compile_definitions(test_gpu_mma PRIVATE TLM_MMA_TEST_NVRTC=1 ${tlm_mma_soname})
endif()
add_test(NAME gpu.mma COMMAND test_gpu_mma)
set_tests_properties(gpu.mma PROPERTIES ENVIRONMENT "${TLM_GPU_TEST_ENV}" TIMEOUT 120 LABELS sanitize)

add_executable(test_gpu_attention_tc ${CMAKE_CURRENT_SOURCE_DIR}/test_gpu_attention_tc.c)
target_link_libraries(test_gpu_attention_tc PRIVATE tlm_gpu)
add_test(NAME gpu.attention_tc COMMAND test_gpu_attention_tc)
set_tests_properties(gpu.attention_tc PROPERTIES ENVIRONMENT "${TLM_GPU_TEST_ENV}" TIMEOUT 120 LABELS sanitize)
