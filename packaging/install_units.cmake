# Installs keel's systemd units (examples/systemd) with ExecStart naming the
# binary under the install-time prefix. Set by packaging/CMakeLists.txt:
# KEEL_UNIT_SOURCES, KEEL_UNIT_STAGING, KEEL_SYSTEMD_UNIT_DIR, KEEL_BINDIR.
foreach(unit keel-scheduler.service keel-gateway.service keel-job@.service keel-job@.timer)
  file(READ "${KEEL_UNIT_SOURCES}/${unit}" text)
  string(REPLACE "/usr/local/bin/keel" "${CMAKE_INSTALL_PREFIX}/${KEEL_BINDIR}/keel" text "${text}")
  file(WRITE "${KEEL_UNIT_STAGING}/${unit}" "${text}")
  file(INSTALL "${KEEL_UNIT_STAGING}/${unit}" DESTINATION "${KEEL_SYSTEMD_UNIT_DIR}"
       PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
endforeach()
