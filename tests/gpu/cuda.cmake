# The real CUDA backend's parts that run without a GPU. Whether CMake found
# the toolkit shows in how runtime/CMakeLists.txt built tlm_device.
get_target_property(tlm_device_definitions tlm_device COMPILE_DEFINITIONS)
if("TLM_HAVE_CUDA=1" IN_LIST tlm_device_definitions)
  set(tlm_gpu_with_cuda ON)
else()
  set(tlm_gpu_with_cuda OFF)
endif()

# gpu.no_driver: on a machine without libcuda.so.1, "cuda" fails with the
# one clear line (built without the toolkit: the line that says so); exit
# 77, skipped, where a driver is present. No TLM_TEST_DEVICE: it is about
# the real device.
add_executable(test_no_driver ${CMAKE_CURRENT_SOURCE_DIR}/test_no_driver.c)
target_link_libraries(test_no_driver PRIVATE tlm_device)
if(tlm_gpu_with_cuda)
  target_compile_definitions(test_no_driver PRIVATE TLM_EXPECT_CUDA=1)
endif()
add_test(NAME gpu.no_driver COMMAND test_no_driver)
set_tests_properties(gpu.no_driver PROPERTIES SKIP_RETURN_CODE 77 TIMEOUT 60)

# gpu.nvrtc: the runtime's kernels and generated MLP kernels of both kinds
# compile with NVRTC to CUBINs for sm_80 and sm_90 (only with the toolkit).
if(tlm_gpu_with_cuda)
  add_executable(test_nvrtc ${CMAKE_CURRENT_SOURCE_DIR}/test_nvrtc.c)
  target_link_libraries(test_nvrtc PRIVATE tlm_gpu tlm_codegen ${CMAKE_DL_LIBS})
  # The sonames tlm_device opens (it checks that they load only when used).
  set(tlm_toolkit_sonames ${tlm_device_definitions})
  list(FILTER tlm_toolkit_sonames INCLUDE REGEX "^TLM_(NVRTC|CUBLASLT)_SONAME=")
  target_compile_definitions(test_nvrtc PRIVATE ${tlm_toolkit_sonames})
  add_test(NAME gpu.nvrtc COMMAND test_nvrtc)
  # 19 s alone; over 120 s seen while two test processes and a build shared 2 cores
  set_tests_properties(gpu.nvrtc PROPERTIES TIMEOUT 300)
endif()

# gpu.spills: no kernel of either module spills registers on sm_80 or sm_90
# (ptxas's report through NVRTC, with tlm-run's options; only with the
# toolkit, and there a failure, not a skip, when NVRTC does not load).
if(tlm_gpu_with_cuda)
  add_executable(test_spills ${CMAKE_CURRENT_SOURCE_DIR}/test_spills.c)
  target_link_libraries(test_spills PRIVATE tlm_gpu Threads::Threads)
  add_test(NAME gpu.spills COMMAND test_spills)
  set_tests_properties(gpu.spills PROPERTIES TIMEOUT 180)
endif()

# gpu.attention_sass: bench/attention_sass.py counts the tensor-core
# attention kernels' SASS (NVRTC, ptxas): no spills, and a key tile's
# instructions besides its HMMAs within the bounds the script states (only
# with the toolkit). About 15 s: five builds of the module.
if(tlm_gpu_with_cuda)
  add_test(NAME gpu.attention_sass COMMAND ${PROJECT_SOURCE_DIR}/tests/bench/attention_sass.sh ${PROJECT_SOURCE_DIR}
                                           ${CMAKE_CURRENT_BINARY_DIR}/attention_sass)
  set_tests_properties(gpu.attention_sass PROPERTIES TIMEOUT 180 ENVIRONMENT "TLM_PYTHON=${TLM_PYTHON}")
endif()

# gpu.fake_driver.*: the real device's opening path against a stand-in
# driver built here as libcuda.so.1 (tests/gpu/fake_libcuda.c) on three
# pretend machines (only with the toolkit: without it there is no path).
if(tlm_gpu_with_cuda)
  add_library(tlm_fake_cuda SHARED ${CMAKE_CURRENT_SOURCE_DIR}/fake_libcuda.c)
  set_target_properties(tlm_fake_cuda PROPERTIES OUTPUT_NAME cuda SOVERSION 1
                        LIBRARY_OUTPUT_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/fake_driver)
  add_executable(test_fake_driver ${CMAKE_CURRENT_SOURCE_DIR}/test_fake_driver.c)
  target_link_libraries(test_fake_driver PRIVATE tlm_device)
  add_dependencies(test_fake_driver tlm_fake_cuda)
  foreach(machine h200 graph_fails no_device old_gpu old_driver)
    add_test(NAME gpu.fake_driver.${machine} COMMAND test_fake_driver ${machine})
    set_tests_properties(gpu.fake_driver.${machine} PROPERTIES TIMEOUT 60 ENVIRONMENT
                         "TLM_FAKE_CUDA=${machine};LD_LIBRARY_PATH=${CMAKE_CURRENT_BINARY_DIR}/fake_driver;XDG_CACHE_HOME=${CMAKE_CURRENT_BINARY_DIR}/fake_driver/cache")
  endforeach()
endif()

# gpu.lazy_libraries: tlm-run links none of CUDA's libraries; the driver,
# NVRTC and cuBLASLt are opened at first use (runtime/device/cuda_toolkit.h),
# so a command that needs no GPU starts in milliseconds, not 0.4 s.
if(TARGET tlm-run)
  find_program(TLM_READELF NAMES readelf llvm-readelf llvm-readelf-19)
  if(TLM_READELF)
    add_test(NAME gpu.lazy_libraries
             COMMAND sh ${CMAKE_CURRENT_SOURCE_DIR}/lazy_libraries.sh ${TLM_READELF} $<TARGET_FILE:tlm-run>)
    set_tests_properties(gpu.lazy_libraries PROPERTIES TIMEOUT 30)
  endif()
endif()
