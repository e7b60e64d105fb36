#!/usr/bin/env bash
# Installs the package built by deb_contents_test.sh on this machine with dpkg -i (root
# only; dependencies must already be installed, as on a clean Debian 12 with TimeWarp's
# runtime libraries), checks the installed files and unit, starts and stops the service
# (with systemctl when systemd runs, else as systemd would), then purges the package.
# Skipped when not root, without dpkg, or when another timewarp package is installed
# (it is never replaced).
set -euo pipefail
# shellcheck source=lib.sh
source "$TW_TEST_SCRIPTS/lib.sh"

((EUID == 0)) || pkg_skip "not root: dpkg -i not attempted"
command -v dpkg >/dev/null 2>&1 || pkg_skip "dpkg not found"
debs=("$TW_BUILD_DIR"/packages/timewarp_*.deb)
deb="${debs[0]}"
[[ -f $deb ]] || pkg_fail "no package: run packaging.deb_contents first"

# One install at a time on this machine, whichever build tree runs the test.
exec 9>/var/lock/timewarp-deb-test.lock
flock -w 600 9 || pkg_fail "another package test holds /var/lock/timewarp-deb-test.lock"

if dpkg-query -W -f='${Status}' timewarp 2>/dev/null | grep -q " installed"; then
    pkg_skip "a timewarp package is already installed here; not touching it"
fi
for f in /usr/bin/timewarp /usr/bin/timewarp-monitor /usr/lib/systemd/system/timewarp-monitor.service; do
    [[ -e $f ]] && pkg_skip "$f exists outside a package; not touching it"
done

work="$(mktemp -d)"
pkg_cleanup() {
    pkg_drop_database
    dpkg --purge timewarp >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap pkg_cleanup EXIT

# dpkg takes a lock of its own; wait for it rather than fail when apt runs elsewhere.
dpkg_retry() {
    local deadline=$((SECONDS + 120)) out
    while true; do
        if out="$("$@" 2>&1)"; then printf '%s\n' "$out"; return 0; fi
        if [[ $out == *"lock"* ]] && ((SECONDS < deadline)); then sleep 1; continue; fi
        printf '%s\n' "$out" >&2
        return 1
    done
}

pkg_log "dpkg -i $(basename "$deb")"
dpkg_retry dpkg -i "$deb" || pkg_fail "dpkg -i failed (missing dependencies are named above)"
for exe in timewarp timewarp-monitor timewarp-scheduler timewarp-archiver; do
    [[ -x /usr/bin/$exe ]] || pkg_fail "/usr/bin/$exe not installed"
    "/usr/bin/$exe" --help >/dev/null || pkg_fail "/usr/bin/$exe does not run"
done
[[ -f /etc/timewarp/timewarp.toml ]] || pkg_fail "no /etc/timewarp/timewarp.toml"
unit=/usr/lib/systemd/system/timewarp-monitor.service
[[ -f $unit ]] || unit=/lib/systemd/system/timewarp-monitor.service
pkg_check_unit "$unit" /usr/bin /etc/timewarp/timewarp.toml
verified=0
pkg_analyze_verify "$unit" || verified=$?
[[ $verified == 0 || $verified == 77 ]] || exit "$verified"
rated=0
pkg_analyze_security "$unit" || rated=$?
[[ $rated == 0 || $rated == 77 ]] || exit "$rated"
[[ $rated == 77 ]] && pkg_log "systemd-analyze cannot rate unit files here: security rating skipped"
# The package made the service's user, and only root and that group read the configuration.
getent passwd timewarp >/dev/null || pkg_fail "the package did not create the user timewarp"
[[ -f /usr/lib/sysusers.d/timewarp.conf ]] || pkg_fail "no /usr/lib/sysusers.d/timewarp.conf"
[[ "$(stat -c '%U:%G %a' /etc/timewarp/timewarp.toml)" == "root:timewarp 640" ]] ||
    pkg_fail "/etc/timewarp/timewarp.toml is $(stat -c '%U:%G %a' /etc/timewarp/timewarp.toml), not root:timewarp 640"

status=0
pkg_create_database || status=$?
if [[ $status == 0 ]]; then
    if [[ -d /run/systemd/system ]]; then
        pkg_service_systemd "$work/service"
    else
        pkg_log "systemd is not running here (PID 1 is $(cat /proc/1/comm)): starting the unit's ExecStart as systemd would"
        pkg_service_emulated "$unit" "" "$work/service"
    fi
else
    pkg_log "no TIMEWARP_TEST_DATABASE or psql: service start/stop not exercised"
fi

pkg_log "dpkg --purge timewarp"
dpkg_retry dpkg --purge timewarp >/dev/null || pkg_fail "dpkg --purge failed"
for f in /usr/bin/timewarp /usr/bin/timewarp-monitor /etc/timewarp/timewarp.toml "$unit"; do
    [[ ! -e $f ]] || pkg_fail "$f left after purge"
done
echo "PASS"
