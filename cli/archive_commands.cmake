# The archive subcommands of `timewarp` (versions, restore, verify, check, diff, forget, ship);
# included from cli/CMakeLists.txt. They need the backup root (and for check the sources), not
# the database.
add_library(timewarp_cli_archive
  ${CMAKE_CURRENT_LIST_DIR}/archive_commands.cpp
  ${CMAKE_CURRENT_LIST_DIR}/check_command.cpp
  ${CMAKE_CURRENT_LIST_DIR}/check_walk.cpp
  ${CMAKE_CURRENT_LIST_DIR}/diff_command.cpp
  ${CMAKE_CURRENT_LIST_DIR}/retention_commands.cpp
  ${CMAKE_CURRENT_LIST_DIR}/ship_command.cpp
  ${CMAKE_CURRENT_LIST_DIR}/shipped_archive.cpp)
target_link_libraries(timewarp_cli_archive
  PUBLIC timewarp_common
  PRIVATE timewarp_archive timewarp_objstore fmt::fmt spdlog::spdlog nlohmann_json::nlohmann_json)
