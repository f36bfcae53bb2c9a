# gpu.emulator: the CUDA emulator (runtime/device/cuda_emu.h) on kernels of
# its own (emulator_kernels.cu), compiled at test time by the host C++
# compiler, as the emulated device does, and checked for warnings by clang++
# too when there is one.
find_program(TLM_EMU_TEST_CXX NAMES c++ g++ clang++ clang++-19)
find_program(TLM_EMU_TEST_CLANGXX NAMES clang++-19 clang++)
add_executable(test_emulator ${CMAKE_CURRENT_SOURCE_DIR}/test_emulator.c)
find_package(Threads REQUIRED)
target_link_libraries(test_emulator PRIVATE ${CMAKE_DL_LIBS} m Threads::Threads)
set(emu_cxx "${TLM_EMU_TEST_CXX}")
if(NOT TLM_EMU_TEST_CXX)
  set(emu_cxx "")  # the test then fails: the emulated device needs a C++ compiler
endif()
set(emu_clangxx "${TLM_EMU_TEST_CLANGXX}")
if(NOT TLM_EMU_TEST_CLANGXX)
  set(emu_clangxx "")
endif()
target_compile_definitions(test_emulator PRIVATE
  TLM_EMU_TEST_CXX="${emu_cxx}" TLM_EMU_TEST_CLANGXX="${emu_clangxx}"
  TLM_EMU_HEADER_DIR="${PROJECT_SOURCE_DIR}/runtime/device"
  TLM_EMU_KERNELS="${CMAKE_CURRENT_SOURCE_DIR}/emulator_kernels.cu")
add_test(NAME gpu.emulator COMMAND test_emulator)
set_tests_properties(gpu.emulator PROPERTIES TIMEOUT 120)
