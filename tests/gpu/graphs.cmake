# gpu.graphs: CUDA graphs in the device API and the graph cache on the
# emulated device (runtime/device: device_graph.c, emu_graph.c,
# graph_cache.c): recording and replay, arguments copied at capture, the
# calls a capture refuses, the cache's warm-up, capture and switch.
add_executable(test_graphs ${CMAKE_CURRENT_SOURCE_DIR}/test_graphs.c)
target_link_libraries(test_graphs PRIVATE tlm_device tlm_rt)
target_include_directories(test_graphs PRIVATE ${PROJECT_SOURCE_DIR}/tests/runtime)
add_test(NAME gpu.graphs COMMAND test_graphs)
set_tests_properties(gpu.graphs PROPERTIES ENVIRONMENT "${TLM_GPU_TEST_ENV}" TIMEOUT 60 LABELS sanitize)
