#!/usr/bin/env bash
# cpack builds the Debian package; its control data (name, version, dependencies found by
# dpkg-shlibdeps, maintainer scripts, conffiles) and its contents are checked. Leaves the
# package in $TW_BUILD_DIR/packages for deb_install_test.sh.
set -euo pipefail
# shellcheck source=lib.sh
source "$TW_TEST_SCRIPTS/lib.sh"

[[ -x ${TW_CPACK:-} ]] || pkg_skip "cpack not found"
command -v dpkg-deb >/dev/null 2>&1 || pkg_skip "dpkg-deb not found (not a Debian system)"

out="$TW_BUILD_DIR/packages"
rm -f "$out"/timewarp_*.deb
pkg_log "cpack -G DEB"
(cd "$TW_BUILD_DIR" && "$TW_CPACK" -G DEB --config CPackConfig.cmake >"$TW_BUILD_DIR/packages-cpack.log" 2>&1) ||
    { cat "$TW_BUILD_DIR/packages-cpack.log"; pkg_fail "cpack failed"; }
debs=("$out"/timewarp_*.deb)
deb="${debs[0]}"
[[ -f $deb ]] || pkg_fail "cpack made no timewarp_*.deb in $out"
pkg_log "built $(basename "$deb") ($(du -h "$deb" | cut -f1))"

field() { dpkg-deb -f "$deb" "$1"; }
[[ "$(field Package)" == timewarp ]] || pkg_fail "Package is $(field Package)"
[[ -n "$(field Version)" ]] || pkg_fail "no Version"
[[ "$(field Architecture)" == "$(dpkg --print-architecture)" ]] || pkg_fail "Architecture is $(field Architecture)"
depends="$(field Depends)"
pkg_log "Depends: $depends"
for lib in libpq5 libzstd1 libc6; do
    [[ $depends == *"$lib"* ]] || pkg_fail "Depends lacks $lib"
done
[[ "$(field Recommends)" == *postgresql* ]] || pkg_fail "Recommends lacks postgresql"

contents="$(dpkg-deb -c "$deb" | awk '{print $NF}')"
for path in ./usr/bin/timewarp ./usr/bin/timewarp-monitor ./usr/bin/timewarp-scheduler \
    ./usr/bin/timewarp-archiver ./usr/lib/systemd/system/timewarp-monitor.service \
    ./etc/timewarp/timewarp.toml ./usr/share/doc/timewarp/examples/timewarp.toml.example \
    ./usr/share/doc/timewarp/operations.md ./usr/lib/sysusers.d/timewarp.conf; do
    grep -q -x -F "$path" <<<"$contents" || pkg_fail "the package lacks $path"
done

control="$(mktemp -d)"
trap 'rm -rf "$control"' EXIT
dpkg-deb -e "$deb" "$control"
grep -q -x /etc/timewarp/timewarp.toml "$control/conffiles" || pkg_fail "the configuration is not a conffile"
for script in postinst prerm postrm; do
    [[ -x $control/$script ]] || pkg_fail "maintainer script $script missing or not executable"
done
dpkg-deb -x "$deb" "$control/root"
pkg_check_unit "$control/root/usr/lib/systemd/system/timewarp-monitor.service" /usr/bin /etc/timewarp/timewarp.toml
echo "PASS"
