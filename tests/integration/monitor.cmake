# The monitor's end-to-end tests (real monitor, scheduler, archivers and PostgreSQL);
# included from tests/integration/CMakeLists.txt.
tw_add_test(monitor_integration_tests EXECUTABLES
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/monitor_changes_test.cpp
          ${CMAKE_CURRENT_LIST_DIR}/monitor_catchup_test.cpp
          ${CMAKE_CURRENT_LIST_DIR}/monitor_supervision_test.cpp
          ${CMAKE_CURRENT_LIST_DIR}/monitor_sequences_test.cpp
          ${CMAKE_CURRENT_LIST_DIR}/child_environment_test.cpp
  LIBS timewarp_common timewarp_db PkgConfig::SQLITE3
  LABELS integration)
target_compile_definitions(monitor_integration_tests PRIVATE
  TW_FAULT_ARCHIVER_EXE="$<TARGET_FILE:timewarp-fault-archiver>")
add_dependencies(monitor_integration_tests timewarp-fault-archiver)

# Items retried after newer changes, through the fault-injecting archiver proxy.
tw_add_test(retried_requests_tests EXECUTABLES
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/retried_requests_test.cpp
  LIBS timewarp_common timewarp_db
  LABELS integration)
target_compile_definitions(retried_requests_tests PRIVATE
  TW_FAULT_ARCHIVER_EXE="$<TARGET_FILE:timewarp-fault-archiver>")
add_dependencies(retried_requests_tests timewarp-fault-archiver)

# The monitor's shipping runs, against the S3 gateway scripts/test starts.
tw_add_test(monitor_ship_tests EXECUTABLES
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/monitor_ship_test.cpp
          ${CMAKE_CURRENT_LIST_DIR}/store_restore_test.cpp
  LIBS timewarp_common timewarp_db timewarp_test_gateway
  LABELS integration objstore)
