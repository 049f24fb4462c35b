# Run by `cmake --install` for each installed binary (install(CODE), cmake/install_stripped.cmake):
#   STEP strip   the installed copy loses its DWARF (the .debug_* sections; its symbol table stays)
#   STEP debug   the build's copy's DWARF, compressed, goes to DEBUG_ROOT/.build-id/xx/yyyy.debug, where gdb
#                and lldb look it up by the binary's build-id (which stripping keeps)
# DEBUG_ROOT is /usr/lib/debug under the prefixes /usr and /usr/local, the one debug directory debuggers
# search by default (/usr/local/lib/debug is not one); under any other prefix PREFIX/lib/debug, which
# gdb's `set debug-file-directory` can name. DESTDIR is honoured (cpack installs with it).
# Variables: STEP, BUILT (the build's binary), INSTALLED (its path under the prefix), DEBUG_COPY (where the
# build tree keeps its split debug file), OBJCOPY, STRIP, READELF.
include(${CMAKE_CURRENT_LIST_DIR}/debug_info.cmake)

if(STEP STREQUAL "strip")
  debug_info_run(${STRIP} --strip-debug "$ENV{DESTDIR}${CMAKE_INSTALL_PREFIX}/${INSTALLED}")
  return()
endif()

if(NOT EXISTS "${DEBUG_COPY}" OR "${BUILT}" IS_NEWER_THAN "${DEBUG_COPY}")
  debug_info_run(${OBJCOPY} --only-keep-debug --compress-debug-sections=zlib "${BUILT}" "${DEBUG_COPY}")
endif()
if(CMAKE_INSTALL_PREFIX MATCHES "^/usr(/local)?/*$")
  set(debug_root /usr/lib/debug)
else()
  set(debug_root "${CMAKE_INSTALL_PREFIX}/lib/debug")
endif()
debug_info_build_id_path("${BUILT}" ${READELF} build_id_path)
get_filename_component(build_id_dir "${debug_root}/.build-id/${build_id_path}" DIRECTORY)
get_filename_component(build_id_name "${build_id_path}" NAME)
file(INSTALL DESTINATION "${build_id_dir}" TYPE FILE PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ
     FILES "${DEBUG_COPY}" RENAME "${build_id_name}")
