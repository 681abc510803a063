# The Python module `dcpbench` (harness/python/) is built when Debian's pybind11-dev and the Python
# headers (python3-dev) are found, for the interpreter those packages serve (/usr/bin/python3 when
# it exists; -DPython3_EXECUTABLE=... picks another). Not under the sanitizers: a plain python3
# cannot load ASan-instrumented code. DCP_PYTHON=AUTO|ON|OFF; sets DCP_HAVE_PYTHON. The static
# libraries the module links are then built position-independent.
set(DCP_PYTHON "AUTO" CACHE STRING "Build the Python module dcpbench: AUTO|ON|OFF")
set(DCP_HAVE_PYTHON OFF)
if(NOT DCP_PYTHON STREQUAL "OFF" AND NOT DCP_SANITIZE AND NOT DCP_FUZZ)
  if(NOT DEFINED Python3_EXECUTABLE AND EXISTS /usr/bin/python3)
    set(Python3_EXECUTABLE /usr/bin/python3)
  endif()
  find_package(Python3 COMPONENTS Interpreter Development.Module)
  if(Python3_FOUND)
    set(PYBIND11_FINDPYTHON ON)
    find_package(pybind11 CONFIG QUIET)
  endif()
  if(Python3_FOUND AND pybind11_FOUND)
    set(DCP_HAVE_PYTHON ON)
    set(CMAKE_POSITION_INDEPENDENT_CODE ON)
  elseif(DCP_PYTHON STREQUAL "ON")
    message(FATAL_ERROR "DCP_PYTHON=ON but pybind11 or the Python headers were not found "
                        "(apt-get install pybind11-dev python3-dev)")
  endif()
endif()
