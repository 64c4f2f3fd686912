# Decides PSTRAIN_MPI_ENABLED from PSTRAIN_WITH_MPI (AUTO, ON, OFF): the "mpi"
# collective (worker/collective/mpi_collective.cc) over Open MPI (Debian
# libopenmpi-dev; mpirun from openmpi-bin). When enabled, defines
#   pstrain_mpi_libs  INTERFACE: MPI::MPI_C and PSTRAIN_WITH_MPI=1.
set(PSTRAIN_WITH_MPI "AUTO" CACHE STRING "Build the mpi collective: AUTO (if MPI is found), ON or OFF")
set(PSTRAIN_MPI_ENABLED OFF)
string(TOUPPER "${PSTRAIN_WITH_MPI}" _pstrain_mpi_mode)
if(NOT _pstrain_mpi_mode MATCHES "^(AUTO|ON|OFF)$")
  message(FATAL_ERROR "PSTRAIN_WITH_MPI must be AUTO, ON or OFF, not \"${PSTRAIN_WITH_MPI}\"")
endif()
if(NOT _pstrain_mpi_mode STREQUAL "OFF")
  find_package(MPI COMPONENTS C QUIET)
  if(MPI_C_FOUND)
    set(PSTRAIN_MPI_ENABLED ON)
  elseif(_pstrain_mpi_mode STREQUAL "ON")
    message(FATAL_ERROR "PSTRAIN_WITH_MPI=ON but no MPI was found; install libopenmpi-dev or configure with "
                        "-DPSTRAIN_WITH_MPI=OFF")
  endif()
endif()
if(PSTRAIN_MPI_ENABLED)
  add_library(pstrain_mpi_libs INTERFACE)
  target_link_libraries(pstrain_mpi_libs INTERFACE MPI::MPI_C)
  # The C API only: the deprecated C++ bindings would need libmpi_cxx.
  target_compile_definitions(pstrain_mpi_libs INTERFACE PSTRAIN_WITH_MPI=1 OMPI_SKIP_MPICXX=1 MPICH_SKIP_MPICXX=1)
  find_program(PSTRAIN_MPIRUN_FOUND NAMES mpirun mpiexec HINTS ${MPI_C_LIBRARY_DIRS}/../bin)
  # Open MPI derives its install prefix from the path it was started by:
  # through the merged-/usr link /bin/mpirun the prefix would be "/", which
  # it refuses. The resolved path (/usr/bin/orterun) gives /usr.
  get_filename_component(PSTRAIN_MPIRUN "${PSTRAIN_MPIRUN_FOUND}" REALPATH)
  message(STATUS "pstrain: mpi collective (MPI ${MPI_C_VERSION}, mpirun ${PSTRAIN_MPIRUN})")
else()
  message(STATUS "pstrain: no mpi collective (PSTRAIN_WITH_MPI=${PSTRAIN_WITH_MPI})")
endif()
