# Read by ctest before the tests of a TLM_SANITIZE=ON build (the top-level
# CMakeLists.txt names it in TEST_INCLUDE_FILES): the sanitizers' options
# for every test and every program a test starts, unless already set.
#   LSAN_OPTIONS   the reviewed suppressions of lsan.supp (next to this file)
#   UBSAN_OPTIONS  a stack trace with each report (the build stops at the
#                  first: -fno-sanitize-recover=all)
#   ASAN_OPTIONS   also checks that a C string function's arguments are
#                  terminated within their bounds
# A report exits with status 86 (ASan's and LeakSanitizer's, UBSan's), not
# the default 1, so a test that expects a tool to fail with status 1 cannot
# pass on a sanitizer report instead.
if(NOT DEFINED ENV{LSAN_OPTIONS})
  set(ENV{LSAN_OPTIONS} "suppressions=${CMAKE_CURRENT_LIST_DIR}/lsan.supp:print_suppressions=0")
endif()
if(NOT DEFINED ENV{UBSAN_OPTIONS})
  set(ENV{UBSAN_OPTIONS} "print_stacktrace=1:halt_on_error=1:exitcode=86")
endif()
if(NOT DEFINED ENV{ASAN_OPTIONS})
  set(ENV{ASAN_OPTIONS} "strict_string_checks=1:detect_leaks=1:exitcode=86")
endif()
