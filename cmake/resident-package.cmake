# The exported CMake package (install component "audit"): <prefix>/lib/cmake/resident holds
# resident-config.cmake, its version file and the targets audit/ installs.
include(CMakePackageConfigHelpers)
set(RESIDENT_PACKAGE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/resident)
install(EXPORT resident-targets NAMESPACE resident:: DESTINATION ${RESIDENT_PACKAGE_DIR}
        COMPONENT audit)
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/resident-config.cmake.in
  ${PROJECT_BINARY_DIR}/resident-config.cmake INSTALL_DESTINATION ${RESIDENT_PACKAGE_DIR})
write_basic_package_version_file(${PROJECT_BINARY_DIR}/resident-config-version.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/resident-config.cmake
              ${PROJECT_BINARY_DIR}/resident-config-version.cmake
        DESTINATION ${RESIDENT_PACKAGE_DIR} COMPONENT audit)
