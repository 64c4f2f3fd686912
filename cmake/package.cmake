# Installation and the Debian package (docs/DEPLOY.md):
#   cmake --install <build>            binaries, configs, docs, manifests
#   cpack -G DEB --config <build>/CPackConfig.cmake
# The package's Depends are computed from the binaries' shared libraries
# (dpkg-shlibdeps, package dpkg-dev), so make it from a CPU build
# (-DPSTRAIN_WITH_CUDA=OFF): the CUDA libraries are not Debian packages.
include(GNUInstallDirs)
install(TARGETS pstrain-ps pstrain-worker pstrain-launch pstrain-compare RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY configs/ DESTINATION ${CMAKE_INSTALL_DATADIR}/pstrain/configs)
install(DIRECTORY deploy/ DESTINATION ${CMAKE_INSTALL_DATADIR}/pstrain/deploy)
install(DIRECTORY docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(FILES README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})

set(CPACK_PACKAGE_NAME pstrain)
set(CPACK_PACKAGE_VERSION 0.1.0)
set(CPACK_PACKAGE_CONTACT "pstrain developers <pstrain@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "Parameter-server and all-reduce distributed training, with every strategy in one tool")
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# The shipped configs train on Fashion-MNIST from Debian's package.
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "dataset-fashion-mnist, openmpi-bin")
include(CPack)
