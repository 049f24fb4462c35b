# What the scripts that split a binary's debug information from it share (cmake -P or install(CODE)):
# tests/fixtures/split_debug_info.cmake (distribution-style debug files for the tests) and
# cmake/split_installed_debug_info.cmake (the installed binaries' debug files).

# Runs a command; fails the script with its error output when it fails. Sets run_output to what it printed.
function(debug_info_run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE result OUTPUT_VARIABLE output ERROR_VARIABLE error)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "`${ARGN}` failed (${result}): ${error}")
  endif()
  set(run_output "${output}" PARENT_SCOPE)
endfunction()

# Sets OUT to "xx/yyyy.debug": where gdb and lldb look up FILE's debug information by its build-id, under
# a debug directory's .build-id/ (READELF: the readelf to read the note with).
function(debug_info_build_id_path file readelf out)
  debug_info_run(${readelf} --notes ${file})
  if(NOT run_output MATCHES "Build ID: ([0-9a-f][0-9a-f])([0-9a-f]+)")
    message(FATAL_ERROR "${file} has no build-id note")
  endif()
  set(${out} "${CMAKE_MATCH_1}/${CMAKE_MATCH_2}.debug" PARENT_SCOPE)
endfunction()
