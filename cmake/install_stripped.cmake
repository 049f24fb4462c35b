# Installs the shipped binaries without their debug information, which is installed apart, where gdb and
# lldb look for it by build-id (cmake/split_installed_debug_info.cmake says where): with it each binary is
# about 150 MB, almost all of it DWARF, which a user of heapscope rarely needs and a debugger finds anyway.
# The build tree's binaries keep theirs: the tests run them. The debug files are the `debug` component
# (the heapscope-dbg Debian package), everything else the `runtime` one.
set(CMAKE_INSTALL_DEFAULT_COMPONENT_NAME runtime)
find_program(HEAPSCOPE_OBJCOPY NAMES objcopy REQUIRED)
find_program(HEAPSCOPE_STRIP NAMES strip REQUIRED)
find_program(HEAPSCOPE_READELF NAMES readelf REQUIRED)

# TARGET (an executable or shared library) into DESTINATION under the prefix, stripped; its DWARF apart.
function(heapscope_install_stripped target destination)
  install(TARGETS ${target} RUNTIME DESTINATION ${destination} LIBRARY DESTINATION ${destination})
  set(split "
    set(BUILT \"$<TARGET_FILE:${target}>\")
    set(INSTALLED \"${destination}/$<TARGET_FILE_NAME:${target}>\")
    set(DEBUG_COPY \"${CMAKE_CURRENT_BINARY_DIR}/$<TARGET_FILE_NAME:${target}>.debug\")
    set(OBJCOPY \"${HEAPSCOPE_OBJCOPY}\")
    set(STRIP \"${HEAPSCOPE_STRIP}\")
    set(READELF \"${HEAPSCOPE_READELF}\")")
  set(script "${PROJECT_SOURCE_DIR}/cmake/split_installed_debug_info.cmake")
  install(CODE "${split}\nset(STEP strip)\ninclude(\"${script}\")")
  install(CODE "${split}\nset(STEP debug)\ninclude(\"${script}\")" COMPONENT debug)
endfunction()
