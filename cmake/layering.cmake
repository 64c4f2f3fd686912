# The module graph, enforced by the build.
#
# No directory is on every target's include path. Each library exposes its
# own headers through a view (a directory of symbolic links under
# ${CMAKE_BINARY_DIR}/include/<target>/) that is a PUBLIC include directory of
# that library only, so a file can include "ps/shard.h" only if its target
# links pstrain_ps, directly or through its dependencies. An include that
# crosses the graph the wrong way (a PS source including a model header, a
# worker source including the PS shard) fails to compile with "No such file".
# docs/ARCHITECTURE.md draws the graph.
#
# pstrain_expose_headers(<target>
#     [TREES dir...]       every header under dir, subdirectories included
#     [DIRS dir...]        the headers directly in dir, not its subdirectories
#     [EXCLUDE file...])   headers (paths from the source root) left out of DIRS
# Paths are relative to the source root; headers are *.h and *.cuh.
function(pstrain_expose_headers target)
  cmake_parse_arguments(A "" "" "TREES;DIRS;EXCLUDE" ${ARGN})
  set(view ${CMAKE_BINARY_DIR}/include/${target})
  file(REMOVE_RECURSE ${view})
  foreach(tree ${A_TREES})
    get_filename_component(parent ${view}/${tree} DIRECTORY)
    file(MAKE_DIRECTORY ${parent})
    file(CREATE_LINK ${CMAKE_SOURCE_DIR}/${tree} ${view}/${tree} SYMBOLIC)
  endforeach()
  foreach(dir ${A_DIRS})
    file(GLOB headers CONFIGURE_DEPENDS RELATIVE ${CMAKE_SOURCE_DIR}
         ${CMAKE_SOURCE_DIR}/${dir}/*.h ${CMAKE_SOURCE_DIR}/${dir}/*.cuh)
    file(MAKE_DIRECTORY ${view}/${dir})
    foreach(header ${headers})
      if(NOT header IN_LIST A_EXCLUDE)
        file(CREATE_LINK ${CMAKE_SOURCE_DIR}/${header} ${view}/${header} SYMBOLIC)
      endif()
    endforeach()
  endforeach()
  get_target_property(type ${target} TYPE)
  if(type STREQUAL "INTERFACE_LIBRARY")
    target_include_directories(${target} INTERFACE ${view})
  else()
    target_include_directories(${target} PUBLIC ${view})
  endif()
endfunction()

# pstrain_compile_protos(<target> <generated-root> proto...): a static
# library of the generated code of each .proto (paths from the source root),
# whose headers only its dependents see ("<dir>/<name>.pb.h").
function(pstrain_compile_protos target root)
  set(sources)
  foreach(proto ${ARGN})
    get_filename_component(dir ${proto} DIRECTORY)
    get_filename_component(stem ${proto} NAME_WE)
    set(out_cc ${root}/${dir}/${stem}.pb.cc)
    set(out_h ${root}/${dir}/${stem}.pb.h)
    add_custom_command(
      OUTPUT ${out_cc} ${out_h}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${root}
      COMMAND protobuf::protoc --cpp_out=${root} -I${CMAKE_SOURCE_DIR} ${CMAKE_SOURCE_DIR}/${proto}
      DEPENDS ${CMAKE_SOURCE_DIR}/${proto} protobuf::protoc
      COMMENT "protoc ${proto}")
    list(APPEND sources ${out_cc})
  endforeach()
  add_library(${target} STATIC ${sources})
  target_link_libraries(${target} PUBLIC protobuf::libprotobuf)
  target_include_directories(${target} PUBLIC ${root})
  target_compile_options(${target} PRIVATE -w)
endfunction()

# pstrain_whole_archive(<name> <library>): an INTERFACE target <name> that
# links <library> whole, so the static registrations in it (layers, models,
# optimizers, strategies, transports, config checks) are kept by the linker.
function(pstrain_whole_archive name library)
  add_library(${name} INTERFACE)
  target_link_libraries(${name} INTERFACE "$<LINK_LIBRARY:WHOLE_ARCHIVE,${library}>")
endfunction()

# The graph as built: ${CMAKE_BINARY_DIR}/layering/libraries.txt lists every
# pstrain_* library of the product (not tests/) with its direct pstrain_*
# link dependencies, PUBLIC, PRIVATE and INTERFACE alike, one line each:
#   pstrain_ps: pstrain_common pstrain_compression ...
# A whole-archive wrapper (pstrain_whole_archive: <library>_all) stands for
# the library it wraps and is not listed itself. Written at the end of
# configuration, when every target exists; tests/layering/ checks it against
# the table "Which library may include which" of docs/ARCHITECTURE.md.
function(_pstrain_collect_targets dir out)
  get_property(targets DIRECTORY ${dir} PROPERTY BUILDSYSTEM_TARGETS)
  get_property(subdirs DIRECTORY ${dir} PROPERTY SUBDIRECTORIES)
  foreach(sub ${subdirs})
    _pstrain_collect_targets(${sub} sub_targets)
    list(APPEND targets ${sub_targets})
  endforeach()
  set(${out} ${targets} PARENT_SCOPE)
endfunction()

# The library a link item names, with wrappers resolved; empty when it names
# no pstrain_* target.
function(_pstrain_linked_library item out)
  set(${out} "" PARENT_SCOPE)
  if(NOT TARGET ${item})
    return()
  endif()
  if(item MATCHES "_all$")
    get_target_property(wrapped ${item} INTERFACE_LINK_LIBRARIES)
    if(wrapped MATCHES "WHOLE_ARCHIVE,(pstrain_[A-Za-z0-9_]+)>")
      set(item ${CMAKE_MATCH_1})
    endif()
  endif()
  set(${out} ${item} PARENT_SCOPE)
endfunction()

function(pstrain_write_library_graph)
  _pstrain_collect_targets(${CMAKE_SOURCE_DIR} targets)
  list(SORT targets)
  set(text "# <library>: its direct pstrain_* link dependencies (cmake/layering.cmake)\n")
  foreach(target ${targets})
    get_target_property(type ${target} TYPE)
    get_target_property(source_dir ${target} SOURCE_DIR)
    string(FIND "${source_dir}/" "${CMAKE_SOURCE_DIR}/tests/" in_tests)
    if(NOT target MATCHES "^pstrain_" OR target MATCHES "_all$" OR NOT type MATCHES "_LIBRARY$" OR in_tests EQUAL 0)
      continue()
    endif()
    set(items)
    foreach(property LINK_LIBRARIES INTERFACE_LINK_LIBRARIES)
      get_target_property(value ${target} ${property})
      if(value)
        # Items may sit inside generator expressions ($<LINK_ONLY:...>,
        # $<LINK_LIBRARY:WHOLE_ARCHIVE,...>): every pstrain_* name counts.
        string(REGEX MATCHALL "pstrain_[A-Za-z0-9_]+" names "${value}")
        list(APPEND items ${names})
      endif()
    endforeach()
    set(deps)
    foreach(item ${items})
      _pstrain_linked_library(${item} dep)
      if(dep AND NOT dep STREQUAL target)
        list(APPEND deps ${dep})
      endif()
    endforeach()
    list(REMOVE_DUPLICATES deps)
    list(SORT deps)
    list(JOIN deps " " deps)
    string(APPEND text "${target}: ${deps}\n")
  endforeach()
  file(WRITE ${CMAKE_BINARY_DIR}/layering/libraries.txt "${text}")
endfunction()
cmake_language(DEFER DIRECTORY ${CMAKE_SOURCE_DIR} CALL pstrain_write_library_graph)
