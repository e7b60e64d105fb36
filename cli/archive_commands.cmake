# The archive subcommands of `timewarp` (versions, restore, verify); included from
# cli/CMakeLists.txt.
add_library(timewarp_cli_archive ${CMAKE_CURRENT_LIST_DIR}/archive_commands.cpp)
target_link_libraries(timewarp_cli_archive
  PUBLIC timewarp_common
  PRIVATE timewarp_archive fmt::fmt spdlog::spdlog)
