# Decides PSTRAIN_UCX_ENABLED from PSTRAIN_WITH_UCX (AUTO, ON, OFF): the "ucx"
# transport (common/transport/ucx/), RDMA and shared memory through UCX
# (Debian libucx-dev). When enabled, defines
#   pstrain_ucx_libs  INTERFACE: the ucp/uct/ucs libraries and PSTRAIN_WITH_UCX=1.
# Without it the transport registry names "ucx" as unavailable, with the reason.
set(PSTRAIN_WITH_UCX "AUTO" CACHE STRING "Build the ucx transport: AUTO (if UCX is found), ON or OFF")
set(PSTRAIN_UCX_ENABLED OFF)
string(TOUPPER "${PSTRAIN_WITH_UCX}" _pstrain_ucx_mode)
if(NOT _pstrain_ucx_mode MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "PSTRAIN_WITH_UCX must be AUTO, ON or OFF, not \"${PSTRAIN_WITH_UCX}\"")
endif()
if(NOT _pstrain_ucx_mode STREQUAL "OFF")
  # libucx-dev ships ucx.pc; without pkg-config, look for the libraries.
  find_package(PkgConfig QUIET)
  if(PKG_CONFIG_FOUND)
    pkg_check_modules(PSTRAIN_UCX QUIET IMPORTED_TARGET ucx)
  endif()
  if(PSTRAIN_UCX_FOUND)
    set(PSTRAIN_UCX_ENABLED ON)
    set(_pstrain_ucx_link PkgConfig::PSTRAIN_UCX)
    set(_pstrain_ucx_version "${PSTRAIN_UCX_VERSION}")
  else()
    find_path(PSTRAIN_UCX_INCLUDE_DIR ucp/api/ucp.h)
    find_library(PSTRAIN_UCP_LIBRARY ucp)
    find_library(PSTRAIN_UCT_LIBRARY uct)
    find_library(PSTRAIN_UCS_LIBRARY ucs)
    find_library(PSTRAIN_UCM_LIBRARY ucm)  # the memory hooks' settings (ucm/api/ucm.h)
    if(PSTRAIN_UCX_INCLUDE_DIR AND PSTRAIN_UCP_LIBRARY AND PSTRAIN_UCT_LIBRARY AND PSTRAIN_UCS_LIBRARY
       AND PSTRAIN_UCM_LIBRARY)
      set(PSTRAIN_UCX_ENABLED ON)
      set(_pstrain_ucx_link ${PSTRAIN_UCP_LIBRARY} ${PSTRAIN_UCT_LIBRARY} ${PSTRAIN_UCS_LIBRARY} ${PSTRAIN_UCM_LIBRARY})
      file(STRINGS ${PSTRAIN_UCX_INCLUDE_DIR}/ucp/api/ucp_version.h _pstrain_ucp_api REGEX "define UCP_API_(MAJOR|MINOR) ")
      string(REGEX REPLACE ".*UCP_API_MAJOR +([0-9]+).*UCP_API_MINOR +([0-9]+).*" "\\1.\\2" _pstrain_ucx_version
             "${_pstrain_ucp_api}")
    endif()
  endif()
  if(NOT PSTRAIN_UCX_ENABLED AND _pstrain_ucx_mode STREQUAL "ON")
    message(FATAL_ERROR "PSTRAIN_WITH_UCX=ON but UCX was not found (no ucx.pc for pkg-config, no ucp/api/ucp.h "
                        "with libucp, libuct, libucs, libucm); install libucx-dev or configure with "
                        "-DPSTRAIN_WITH_UCX=OFF")
  endif()
endif()
if(PSTRAIN_UCX_ENABLED)
  add_library(pstrain_ucx_libs INTERFACE)
  if(PSTRAIN_UCX_INCLUDE_DIR)
    target_include_directories(pstrain_ucx_libs INTERFACE ${PSTRAIN_UCX_INCLUDE_DIR})
  endif()
  target_link_libraries(pstrain_ucx_libs INTERFACE ${_pstrain_ucx_link})
  target_compile_definitions(pstrain_ucx_libs INTERFACE PSTRAIN_WITH_UCX=1)
  message(STATUS "pstrain: ucx transport (UCX ${_pstrain_ucx_version})")
else()
  message(STATUS "pstrain: no ucx transport (PSTRAIN_WITH_UCX=${PSTRAIN_WITH_UCX})")
endif()
