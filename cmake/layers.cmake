# heapscope's layers: one library per layer, each allowed to use only the layers it names (and theirs).
# heapscope_layer() declares one; every declaration is also written to ${CMAKE_BINARY_DIR}/layers.json,
# which tests/layers/check_layers.py reads to check that every #include goes down the order (and that
# docs/architecture.md's layer table says the same).
#
#   heapscope_layer(NAME FOLDERS dir… [PRIVATE_FOLDERS dir…] [DEPENDS layer…] [LINK target…] [NO_LIBRARY])
#
# FOLDERS are relative to the source root; their *.cpp files (not subfolders') make the library
# heapscope_<NAME> (an INTERFACE library when there are none). PRIVATE_FOLDERS belong to the layer but no
# other layer may include from them (an allocator's internals: only the runtime layer's plug-in list names
# them). NO_LIBRARY declares the folders and their dependencies for the check only (a frontend that builds
# its own executable or plug-in).
set_property(GLOBAL PROPERTY HEAPSCOPE_LAYER_JSON "")

function(heapscope_layer name)
  cmake_parse_arguments(PARSE_ARGV 1 L "NO_LIBRARY" "" "FOLDERS;PRIVATE_FOLDERS;DEPENDS;LINK")
  set(sources "")
  foreach(folder IN LISTS L_FOLDERS L_PRIVATE_FOLDERS)
    file(GLOB found CONFIGURE_DEPENDS ${CMAKE_SOURCE_DIR}/${folder}/*.cpp)
    list(APPEND sources ${found})
  endforeach()
  if(NOT L_NO_LIBRARY)
    set(target heapscope_${name})
    if(sources)
      add_library(${target} STATIC ${sources})
      set(scope PUBLIC)
      heapscope_target_defaults(${target})
    else()
      add_library(${target} INTERFACE)
      set(scope INTERFACE)
    endif()
    target_include_directories(${target} ${scope} ${CMAKE_SOURCE_DIR}/engine ${CMAKE_SOURCE_DIR})
    foreach(dep IN LISTS L_DEPENDS)
      target_link_libraries(${target} ${scope} heapscope_${dep})
    endforeach()
    if(L_LINK)
      target_link_libraries(${target} ${scope} ${L_LINK})
    endif()
  endif()
  set(quoted "")
  foreach(list_name FOLDERS PRIVATE_FOLDERS DEPENDS)
    set(items "")
    foreach(item IN LISTS L_${list_name})
      list(APPEND items "\"${item}\"")
    endforeach()
    list(JOIN items ", " joined)
    string(TOLOWER ${list_name} key)
    list(APPEND quoted "\"${key}\": [${joined}]")
  endforeach()
  list(JOIN quoted ", " fields)
  set_property(GLOBAL APPEND_STRING PROPERTY HEAPSCOPE_LAYER_JSON "    {\"name\": \"${name}\", ${fields}},\n")
endfunction()

# Called once every layer is declared.
function(heapscope_write_layers)
  get_property(json GLOBAL PROPERTY HEAPSCOPE_LAYER_JSON)
  string(REGEX REPLACE ",\n$" "\n" json "${json}")
  file(WRITE ${CMAKE_BINARY_DIR}/layers.json "{\n  \"layers\": [\n${json}  ]\n}\n")
endfunction()
