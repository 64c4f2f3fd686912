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
