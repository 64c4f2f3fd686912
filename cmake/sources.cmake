# The one source-list policy: a library's sources are the .cc files of the
# directories it names (not their subdirectories), found again at every
# build (CONFIGURE_DEPENDS). Adding a part -- a strategy, a layer, an
# optimizer, a data source, a consistency policy -- is adding its file;
# no CMakeLists.txt changes. A role's main (`*_main.cc`) is never a library
# source, and files that need an optional library (CUDA, UCX, MPI) live in
# directories of their own or are named in EXCLUDE and added by the block
# that finds that library.
#
#   pstrain_sources(<var> DIRS <dir>... [EXCLUDE <file>...])
# sets <var> to the sorted sources of the <dir>s (relative to the current
# source directory; "." for itself), leaving out the EXCLUDE files (same
# relative form, e.g. strategies/nccl_allreduce.cc).
function(pstrain_sources var)
  cmake_parse_arguments(S "" "" "DIRS;EXCLUDE" ${ARGN})
  set(found)
  foreach(dir ${S_DIRS})
    set(pattern ${CMAKE_CURRENT_SOURCE_DIR}/${dir}/*.cc)
    if(dir STREQUAL ".")
      set(pattern ${CMAKE_CURRENT_SOURCE_DIR}/*.cc)
    endif()
    file(GLOB files CONFIGURE_DEPENDS RELATIVE ${CMAKE_CURRENT_SOURCE_DIR} ${pattern})
    list(APPEND found ${files})
  endforeach()
  list(FILTER found EXCLUDE REGEX "(^|/)[^/]*_main\\.cc$")
  foreach(excluded ${S_EXCLUDE})
    list(REMOVE_ITEM found ${excluded})
  endforeach()
  list(SORT found)
  set(${var} ${found} PARENT_SCOPE)
endfunction()
