# Helpers that keep every module's CMakeLists.txt to a few lines.
#
# dcp_module(NAME [DEPS libs...] [SOURCES files...])
#   Library dcp_NAME from the given sources (default: every *.cpp in the current folder).
# dcp_test(NAME LABEL [DEPS libs...] [SOURCES files...])
#   GoogleTest executable NAME (default sources: tests/test_*.cpp of the current folder), registered
#   in CTest with the label (cpu | gpu | mpi).
# dcp_bench(NAME [DEPS libs...] SOURCES files...)
#   Google Benchmark executable (only when DCP_BENCH is ON).
function(dcp_module name)
  cmake_parse_arguments(A "" "" "DEPS;SOURCES" ${ARGN})
  if(NOT A_SOURCES)
    file(GLOB A_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/*.cpp)
  endif()
  add_library(dcp_${name} STATIC ${A_SOURCES})
  target_link_libraries(dcp_${name} PUBLIC ${A_DEPS})
  target_include_directories(dcp_${name} PUBLIC ${PROJECT_SOURCE_DIR}/impl ${PROJECT_SOURCE_DIR})
endfunction()

function(dcp_test name label)
  cmake_parse_arguments(A "" "" "DEPS;SOURCES" ${ARGN})
  if(NOT A_SOURCES)
    file(GLOB A_SOURCES CONFIGURE_DEPENDS ${CMAKE_CURRENT_SOURCE_DIR}/tests/test_*.cpp)
  endif()
  if(NOT A_SOURCES)
    return()
  endif()
  add_executable(${name} ${A_SOURCES})
  target_link_libraries(${name} PRIVATE ${A_DEPS} GTest::gtest GTest::gtest_main Threads::Threads)
  # The C++ test sources at -O1 in the optimised builds (the libraries they test keep their own
  # optimisation: the build type's -O2, -O3 for dcp_model): GoogleTest's macro expansions are most
  # of what they compile, and -O1 took their compile time from ~277 s to 181 s of CPU in build/
  # (gcc) and from 312 s to 282 s in build-asan/ (clang), with no test slower (2026-12-05, 2-core
  # VM; the GPU tests, which skip there, untimed). -O0 would save 30 s more but made test_attn 6x
  # slower (the CPU emulation of the CUDA kernels compiles into its test sources from headers).
  # Results cannot move with it: no -march (SSE2, no FMA), no -ffast-math. C++ only, as nvcc
  # refuses a second -O. (The MPI test executables, plain add_executable, keep -O2.)
  target_compile_options(${name} PRIVATE $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<CONFIG:RelWithDebInfo,Release>>:-O1>)
  add_test(NAME ${name} COMMAND ${name} --gtest_brief=1)
  set_tests_properties(${name} PROPERTIES LABELS ${label} TIMEOUT 900)
endfunction()

function(dcp_bench name)
  cmake_parse_arguments(A "" "" "DEPS;SOURCES" ${ARGN})
  if(NOT DCP_BENCH)
    return()
  endif()
  add_executable(${name} ${A_SOURCES})
  target_link_libraries(${name} PRIVATE ${A_DEPS} benchmark::benchmark Threads::Threads)
endfunction()

# dcp_mpi_test(NAME name NP ranks LABEL label TARGET exe [ARGS ...] [PROPERTIES ...])
#   CTest `name` running `exe ARGS` under mpirun with NP processes (oversubscribed; CI runs as
#   root), in a session folder of its own (cmake/mpirun_session.sh). Under the sanitizers
#   LeakSanitizer is off for it: OpenMPI's own allocations leak at exit, and our code is
#   leak-checked by the cpu tests.
function(dcp_mpi_test)
  cmake_parse_arguments(A "" "NAME;NP;LABEL;TARGET" "ARGS;PROPERTIES" ${ARGN})
  add_test(NAME ${A_NAME}
           COMMAND ${PROJECT_SOURCE_DIR}/cmake/mpirun_session.sh ${MPIEXEC_EXECUTABLE} --oversubscribe
                   --allow-run-as-root -np ${A_NP} $<TARGET_FILE:${A_TARGET}> ${A_ARGS})
  set_tests_properties(${A_NAME} PROPERTIES LABELS ${A_LABEL} TIMEOUT 300 ${A_PROPERTIES})
  if(DCP_SANITIZE)
    set_tests_properties(${A_NAME} PROPERTIES ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0")
  endif()
endfunction()

# dcp_fuzz(NAME name SOURCE file DEPS libs... CORPUS dir [SECONDS s] [MAX_LEN n])
#   libFuzzer target (only with DCP_FUZZ and clang) run as a CTest labelled "fuzz" for a bounded
#   time, seeded (-seed=1) for reproducibility, from the committed seed corpus CORPUS plus a
#   build-tree corpus it grows. A crash, UB report, leak or uncaught exception fails the test and
#   leaves the input in the build folder (artifact_prefix).
set(DCP_FUZZ_TARGET_SECONDS 15 CACHE STRING "Seconds each fuzz CTest runs (the length-file target runs twice as long)")
function(dcp_fuzz)
  cmake_parse_arguments(A "" "NAME;SOURCE;CORPUS;SECONDS;MAX_LEN" "DEPS" ${ARGN})
  if(NOT DCP_FUZZ OR NOT CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    return()
  endif()
  if(NOT A_SECONDS)
    set(A_SECONDS ${DCP_FUZZ_TARGET_SECONDS})
  endif()
  if(NOT A_MAX_LEN)
    set(A_MAX_LEN 4096)
  endif()
  add_executable(${A_NAME} ${A_SOURCE})
  target_link_libraries(${A_NAME} PRIVATE ${A_DEPS})
  target_compile_options(${A_NAME} PRIVATE -fsanitize=fuzzer)
  target_link_options(${A_NAME} PRIVATE -fsanitize=fuzzer)
  file(MAKE_DIRECTORY ${CMAKE_CURRENT_BINARY_DIR}/${A_NAME}-corpus)
  add_test(NAME ${A_NAME}
           COMMAND ${CMAKE_COMMAND} -E env ASAN_OPTIONS=detect_leaks=1
                   $<TARGET_FILE:${A_NAME}> -max_total_time=${A_SECONDS} -max_len=${A_MAX_LEN} -seed=1
                   -rss_limit_mb=2048 -artifact_prefix=${CMAKE_CURRENT_BINARY_DIR}/${A_NAME}-
                   -print_final_stats=1 ${CMAKE_CURRENT_BINARY_DIR}/${A_NAME}-corpus ${A_CORPUS})
  set_tests_properties(${A_NAME} PROPERTIES LABELS fuzz TIMEOUT 300)
endfunction()
