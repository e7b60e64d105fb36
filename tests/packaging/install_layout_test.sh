#!/usr/bin/env bash
# `cmake --install` into a staging directory puts the four executables, the systemd unit,
# the configuration, the example and the docs in the usual places for the prefix /usr and
# for /usr/local; the unit is checked, verified with systemd-analyze where present, and its
# ExecStart is started and stopped as systemd would (needs TIMEWARP_TEST_DATABASE).
set -euo pipefail
# shellcheck source=lib.sh
source "$TW_TEST_SCRIPTS/lib.sh"

work="$(mktemp -d)"
pkg_cleanup() { pkg_drop_database; rm -rf "$work"; }
trap pkg_cleanup EXIT

expect_file() { [[ -f $1 ]] || pkg_fail "missing after install: $1"; }
expect_exe() { [[ -x $1 ]] || pkg_fail "missing or not executable after install: $1"; }

for prefix in /usr /usr/local; do
    stage="$work/stage$(echo "$prefix" | tr / _)"
    pkg_log "cmake --install --prefix $prefix (DESTDIR=$stage)"
    DESTDIR="$stage" "$TW_CMAKE" --install "$TW_BUILD_DIR" --prefix "$prefix" >"$work/install.log" ||
        { cat "$work/install.log"; pkg_fail "cmake --install failed"; }
    if [[ $prefix == /usr ]]; then etc=/etc; else etc=$prefix/etc; fi
    for exe in timewarp timewarp-monitor timewarp-scheduler timewarp-archiver; do
        expect_exe "$stage$prefix/bin/$exe"
    done
    expect_file "$stage$etc/timewarp/timewarp.toml"
    expect_file "$stage$prefix/share/doc/timewarp/examples/timewarp.toml.example"
    expect_file "$stage$prefix/share/doc/timewarp/operations.md"
    expect_file "$stage$prefix/share/doc/timewarp/FORMAT.md"
    expect_file "$stage$prefix/share/doc/timewarp/decisions.md"
    unit="$stage$prefix/lib/systemd/system/timewarp-monitor.service"
    pkg_check_unit "$unit" "$prefix/bin" "$etc/timewarp/timewarp.toml"
    # Nothing else lands in bin/ (no test or benchmark programs).
    for file in "$stage$prefix"/bin/*; do
        case "$(basename "$file")" in
            timewarp | timewarp-monitor | timewarp-scheduler | timewarp-archiver) ;;
            *) pkg_fail "unexpected file installed in bin/: $file" ;;
        esac
    done
    "$stage$prefix/bin/timewarp" --help >/dev/null || pkg_fail "installed timewarp does not run"
done

# An administrator's configuration survives a reinstall.
stage="$work/stage_usr"
echo "# edited" >>"$stage/etc/timewarp/timewarp.toml"
DESTDIR="$stage" "$TW_CMAKE" --install "$TW_BUILD_DIR" --prefix /usr >/dev/null
grep -q "^# edited" "$stage/etc/timewarp/timewarp.toml" || pkg_fail "reinstall overwrote the configuration"

verified=0
pkg_analyze_verify "$stage/usr/lib/systemd/system/timewarp-monitor.service" "$stage" || verified=$?
[[ $verified == 0 || $verified == 77 ]] || exit "$verified"
[[ $verified == 77 ]] && pkg_log "systemd-analyze not installed: unit verify skipped"
rated=0
pkg_analyze_security "$stage/usr/lib/systemd/system/timewarp-monitor.service" || rated=$?
[[ $rated == 0 || $rated == 77 ]] || exit "$rated"
[[ -f $stage/usr/lib/sysusers.d/timewarp.conf ]] || pkg_fail "no sysusers.d entry for the service's user"

status=0
pkg_create_database || status=$?
if [[ $status == 77 ]]; then
    pkg_log "no TIMEWARP_TEST_DATABASE or psql: service start/stop not exercised"
    [[ $verified == 77 ]] && pkg_skip "neither systemd-analyze nor a test database"
    exit 0
fi
[[ $status == 0 ]] || pkg_fail "cannot create a test database"
pkg_service_emulated "$stage/usr/lib/systemd/system/timewarp-monitor.service" "$stage" "$work/service"
echo "PASS"
