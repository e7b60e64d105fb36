# The monitor's end-to-end tests (real monitor, scheduler, archivers and PostgreSQL);
# included from tests/integration/CMakeLists.txt.
tw_add_test(monitor_integration_tests EXECUTABLES
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/monitor_changes_test.cpp
          ${CMAKE_CURRENT_LIST_DIR}/monitor_catchup_test.cpp
          ${CMAKE_CURRENT_LIST_DIR}/monitor_supervision_test.cpp
          ${CMAKE_CURRENT_LIST_DIR}/monitor_sequences_test.cpp
  LIBS timewarp_common timewarp_db
  LABELS integration)
