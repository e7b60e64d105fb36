# Install layout, the systemd unit, the example configuration and the Debian package.
#
#   cmake --install build [--prefix /usr]   executables in <prefix>/bin, the unit in
#                                            <prefix>/lib/systemd/system, the config in
#                                            /etc/timewarp (prefix /usr) or <prefix>/etc/timewarp,
#                                            docs and the example in <prefix>/share/doc/timewarp
#   (cd build && cpack)                     timewarp_<version>_<arch>.deb (prefix /usr)
#
# The unit and config paths are decided at install time from the prefix really used, so
# `cmake --install --prefix` and cpack (which always installs under /usr) agree with what
# they install.

set(TIMEWARP_SYSTEMD_UNIT_DIR "" CACHE PATH
    "Absolute directory for the systemd unit (default: <install prefix>/lib/systemd/system)")

# Every executable of the suite (the others have their install rules beside their targets).
install(TARGETS timewarp-archiver RUNTIME DESTINATION bin)

configure_file(${PROJECT_SOURCE_DIR}/packaging/install_files.cmake.in
               ${PROJECT_BINARY_DIR}/packaging/install_files.cmake @ONLY)
install(SCRIPT ${PROJECT_BINARY_DIR}/packaging/install_files.cmake)

# --- Debian package ------------------------------------------------------------------
set(CPACK_GENERATOR "DEB")
set(CPACK_PACKAGE_NAME "timewarp")
set(CPACK_PACKAGE_VENDOR "TimeWarp")
set(CPACK_PACKAGE_CONTACT "TimeWarp maintainers <timewarp@localhost>")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "continuous file archiving with every version kept")
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION
    "TimeWarp watches folders and keeps every version of every file in them.\n\
A monitor records each change in a queue held in PostgreSQL; a scheduler hands queued\n\
changes to a pool of archiver processes, which store each version compressed (zstd) and\n\
checksummed (SHA-256) under a backup root from which any version can be listed and\n\
restored, even with the database gone. The timewarp tool shows status and progress,\n\
lists versions, restores and verifies.")
set(CPACK_PACKAGING_INSTALL_PREFIX "/usr")
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION "admin")
set(CPACK_DEBIAN_PACKAGE_PRIORITY "optional")
set(CPACK_STRIP_FILES ON)
# Runtime dependencies from the executables themselves (dpkg-shlibdeps, in dpkg-dev);
# without it, the Debian 12 packages the build links against.
find_program(TW_DPKG_SHLIBDEPS dpkg-shlibdeps)
if(TW_DPKG_SHLIBDEPS)
  set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
else()
  set(CPACK_DEBIAN_PACKAGE_DEPENDS
      "libc6 (>= 2.34), libstdc++6 (>= 12), libgcc-s1, libpq5, libzstd1, libsqlite3-0, libssl3, libfmt9, libspdlog1.10-fmt9")
endif()
# The database may live on another host; a local one is the common case.
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "postgresql")
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "postgresql-client")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    "${PROJECT_SOURCE_DIR}/packaging/debian/conffiles;${PROJECT_SOURCE_DIR}/packaging/debian/postinst;${PROJECT_SOURCE_DIR}/packaging/debian/prerm;${PROJECT_SOURCE_DIR}/packaging/debian/postrm")
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_PACKAGE_DIRECTORY ${PROJECT_BINARY_DIR}/packages)
include(CPack)

# --- Packaging tests -------------------------------------------------------------------
if(TIMEWARP_BUILD_TESTS AND EXISTS ${PROJECT_SOURCE_DIR}/tests/packaging/CMakeLists.txt)
  add_subdirectory(${PROJECT_SOURCE_DIR}/tests/packaging ${PROJECT_BINARY_DIR}/tests/packaging)
endif()
