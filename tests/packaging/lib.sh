# shellcheck shell=bash
# Shared by the packaging tests. Source it; do not run it.

pkg_skip() {
    echo "SKIP: $*"
    exit 77
}

pkg_fail() {
    echo "FAIL: $*" >&2
    exit 1
}

pkg_log() { echo "--- $*"; }

# pkg_wait SECONDS COMMAND...: polls COMMAND every 0.2 s until it succeeds or time is up.
pkg_wait() {
    local deadline=$((SECONDS + $1))
    shift
    while ((SECONDS < deadline)); do
        "$@" && return 0
        sleep 0.2
    done
    "$@"
}

# pkg_unit_value UNIT KEY: the value of the first KEY= line of a unit file.
pkg_unit_value() {
    sed -n "s/^$2=//p" "$1" | head -n 1
}

# pkg_check_unit UNIT BIN_DIR CONFIG: the unit runs BIN_DIR/timewarp-monitor on CONFIG,
# restarts on failure and stops with SIGTERM to the monitor alone.
pkg_check_unit() {
    local unit=$1 bin=$2 config=$3
    [[ -f $unit ]] || pkg_fail "no unit file at $unit"
    [[ "$(pkg_unit_value "$unit" ExecStart)" == "$bin/timewarp-monitor --config $config" ]] ||
        pkg_fail "ExecStart is '$(pkg_unit_value "$unit" ExecStart)', expected '$bin/timewarp-monitor --config $config'"
    [[ "$(pkg_unit_value "$unit" Restart)" == "on-failure" ]] || pkg_fail "Restart is not on-failure"
    [[ "$(pkg_unit_value "$unit" KillSignal)" == "SIGTERM" ]] || pkg_fail "KillSignal is not SIGTERM"
    [[ "$(pkg_unit_value "$unit" KillMode)" == "mixed" ]] || pkg_fail "KillMode is not mixed"
    [[ "$(pkg_unit_value "$unit" WantedBy)" == "multi-user.target" ]] || pkg_fail "not WantedBy multi-user.target"
    if grep -q '@[A-Z_]*@' "$unit"; then pkg_fail "unfilled @VARIABLE@ in $unit"; fi
    # Least privilege: its own user, one capability, a read-only system.
    [[ "$(pkg_unit_value "$unit" User)" == "timewarp" ]] || pkg_fail "User is not timewarp"
    [[ "$(pkg_unit_value "$unit" AmbientCapabilities)" == "CAP_DAC_READ_SEARCH" ]] ||
        pkg_fail "AmbientCapabilities is not CAP_DAC_READ_SEARCH"
    [[ "$(pkg_unit_value "$unit" CapabilityBoundingSet)" == "CAP_DAC_READ_SEARCH" ]] ||
        pkg_fail "CapabilityBoundingSet is not CAP_DAC_READ_SEARCH"
    [[ "$(pkg_unit_value "$unit" ProtectSystem)" == "strict" ]] || pkg_fail "ProtectSystem is not strict"
}

# pkg_analyze_security UNIT: systemd-analyze's exposure rating of the unit must be 4.0 or
# lower ("OK" or better). Returns 77 when systemd-analyze cannot rate a unit file offline.
pkg_analyze_security() {
    local unit=$1 out status=0
    command -v systemd-analyze >/dev/null 2>&1 || return 77
    out="$(systemd-analyze security --offline=yes --threshold=40 "$unit" 2>&1)" || status=$?
    if [[ $out == *"Unknown option"* || $out == *"unrecognized option"* ]]; then return 77; fi
    printf '%s\n' "$out" | grep -F "Overall exposure level" | sed 's/^/    /'
    ((status == 0)) || { printf '%s\n' "$out"; pkg_fail "systemd-analyze security rates the unit above 4.0"; }
    pkg_log "systemd-analyze security $(basename "$unit"): at most 4.0"
}

# pkg_service_user_prefix UNIT: sets PKG_AS_USER to the command prefix that runs a program
# as the unit's User= with its ambient capabilities and bounding set, and no new
# privileges, as systemd would (setpriv, from util-linux). Empty when that user does not
# exist here (a staging install) or setpriv is missing: the program then runs as is.
pkg_service_user_prefix() {
    local unit=$1 user caps="" cap
    PKG_AS_USER=()
    user="$(pkg_unit_value "$unit" User)"
    [[ -n $user ]] && getent passwd "$user" >/dev/null && command -v setpriv >/dev/null 2>&1 || return 0
    for cap in $(pkg_unit_value "$unit" AmbientCapabilities); do
        cap="${cap#CAP_}"
        caps+=",+${cap,,}"
    done
    PKG_AS_USER=(setpriv --reuid="$user" --regid="$(id -g "$user")" --init-groups --no-new-privs
        --inh-caps="-all$caps" --ambient-caps="-all$caps" --bounding-set="-all$caps" --)
}

# pkg_analyze_verify UNIT [ROOT]: systemd-analyze verify, the unit's executables looked up
# under ROOT. Returns 77 when systemd-analyze is missing.
pkg_analyze_verify() {
    local unit=$1 root=${2:-}
    command -v systemd-analyze >/dev/null 2>&1 || return 77
    local copy
    copy="$(mktemp -d)/$(basename "$unit")"
    if [[ -n $root ]]; then
        # Staged: point ExecStart at the staged executable so verify can check it.
        sed "s|^ExecStart=/|ExecStart=$root/|" "$unit" >"$copy"
    else
        cp "$unit" "$copy"
    fi
    local out status=0
    out="$(SYSTEMD_LOG_LEVEL=notice systemd-analyze verify "$copy" 2>&1)" || status=$?
    # Without systemd running, verify also reports on units this one names that the machine
    # lacks (postgresql.service, network-online.target): those are not ours.
    local ours
    ours="$(printf '%s\n' "$out" | grep -F "$(basename "$unit")" || true)"
    rm -rf "$(dirname "$copy")"
    if [[ -n $ours ]]; then
        printf '%s\n' "$out"
        pkg_fail "systemd-analyze verify found problems in $(basename "$unit")"
    fi
    pkg_log "systemd-analyze verify $(basename "$unit"): clean (exit $status)"
    printf '%s\n' "$out" | sed 's/^/    /'
    return 0
}

# Test database: creates a database for the service and sets PKG_CONNINFO. Needs
# TIMEWARP_TEST_DATABASE and psql; returns 77 otherwise.
pkg_create_database() {
    [[ -n ${TIMEWARP_TEST_DATABASE:-} ]] || return 77
    command -v psql >/dev/null 2>&1 || return 77
    PKG_DBNAME="tw_pkg_$$_$RANDOM"
    psql -X -q -v ON_ERROR_STOP=1 "$TIMEWARP_TEST_DATABASE" -c "CREATE DATABASE $PKG_DBNAME" || return 1
    PKG_CONNINFO="$TIMEWARP_TEST_DATABASE dbname=$PKG_DBNAME"
}

pkg_drop_database() {
    [[ -n ${PKG_DBNAME:-} ]] || return 0
    psql -X -q "$TIMEWARP_TEST_DATABASE" -c "DROP DATABASE IF EXISTS $PKG_DBNAME WITH (FORCE)" >/dev/null 2>&1 || true
    PKG_DBNAME=""
}

# Pids whose command line contains TEXT (from /proc: procps may be missing).
pkg_processes_with() {
    local dir cmd out=""
    for dir in /proc/[0-9]*; do
        cmd="$(tr '\0' ' ' <"$dir/cmdline" 2>/dev/null)" || continue
        [[ $cmd == *"$1"* ]] && out+="${dir#/proc/} "
    done
    printf '%s' "$out"
}

pkg_sql() { psql -X -At -v ON_ERROR_STOP=1 "$PKG_CONNINFO" -c "$1"; }

pkg_live_schedulers() {
    [[ "$(pkg_sql "SELECT count(*) FROM timewarp.schedulers WHERE stopped_at IS NULL" 2>/dev/null)" == "$1" ]]
}

pkg_fresh_scheduler() {
    [[ "$(pkg_sql "SELECT count(*) > 0 FROM timewarp.schedulers WHERE stopped_at IS NULL
                     AND started_at > now() - interval '50 seconds'" 2>/dev/null)" == "t" ]]
}

pkg_completed() {
    [[ "$(pkg_sql "SELECT count(*) FROM timewarp.items WHERE status = 'COMPLETED'" 2>/dev/null)" == "$1" ]]
}

# pkg_service_emulated UNIT ROOT WORKDIR: starts the unit's ExecStart as systemd would
# (its executables and config under ROOT), checks the service works (a file queued with the
# installed timewarp is archived), stops it with the unit's KillSignal to the main process
# (KillMode=mixed) and expects a clean exit within TimeoutStopSec, with no process left.
pkg_service_emulated() {
    local unit=$1 root=$2 work=$3
    local exec_start; exec_start="$(pkg_unit_value "$unit" ExecStart)"
    local kill_signal; kill_signal="$(pkg_unit_value "$unit" KillSignal)"
    local timeout; timeout="$(pkg_unit_value "$unit" TimeoutStopSec)"
    local -a argv
    read -r -a argv <<<"$exec_start"
    local i
    for i in "${!argv[@]}"; do
        [[ ${argv[i]} == /* ]] && argv[i]="$root${argv[i]}"
    done
    local bin; bin="$(dirname "${argv[0]}")"
    local user; user="$(pkg_unit_value "$unit" User)"
    mkdir -p "$work/archive" "$work/source"
    # A file only root may read, in a folder only root may enter: the service reads it
    # through its capability, not as root.
    mkdir -p -m 0700 "$work/source/root-only"
    echo "service test file" >"$work/source/root-only/hello.txt"
    chmod 0600 "$work/source/root-only/hello.txt"
    pkg_service_user_prefix "$unit"
    if ((${#PKG_AS_USER[@]})); then
        # The archive folder is the service's own, as StateDirectory= makes it.
        chown "$user:" "$work/archive"
        "${PKG_AS_USER[@]}" true || pkg_fail "cannot run a command as $user with setpriv"
        # Without the capability the user cannot read it: else this would prove nothing.
        if setpriv --reuid="$user" --regid="$(id -g "$user")" --init-groups --no-new-privs \
            --inh-caps=-all --ambient-caps=-all --bounding-set=-all \
            cat "$work/source/root-only/hello.txt" >/dev/null 2>&1; then
            pkg_fail "user $user reads the root-only file without the capability"
        fi
        pkg_log "starting (as systemd would, user $user with $(pkg_unit_value "$unit" AmbientCapabilities)): ${argv[*]}"
    else
        pkg_log "starting (as systemd would, but as $(id -un): no user ${user:-?} or no setpriv here): ${argv[*]}"
    fi
    TIMEWARP_DATABASE="$PKG_CONNINFO" BACKUP_ROOT="$work/archive" \
        "${PKG_AS_USER[@]}" "${argv[@]}" 2>"$work/monitor.log" &
    local pid=$!
    if ! pkg_wait 60 pkg_live_schedulers 1; then
        cat "$work/monitor.log"; kill -KILL "$pid" 2>/dev/null
        pkg_fail "the service did not start a scheduler"
    fi
    "$bin/timewarp" --database="$PKG_CONNINFO" enqueue "$work/source/root-only/hello.txt" >/dev/null ||
        pkg_fail "timewarp enqueue failed"
    pkg_wait 60 pkg_completed 1 || {
        cat "$work/monitor.log"
        "$bin/timewarp" --database="$PKG_CONNINFO" failed || true
        pkg_fail "the root-only file was not archived"
    }
    "$bin/timewarp" --backup-root="$work/archive" versions "$work/source/root-only/hello.txt" |
        grep -q UPDATE || pkg_fail "no version of the root-only file in the archive"
    if ((${#PKG_AS_USER[@]})); then
        local foreign
        foreign="$(find "$work/archive" ! -user "$user" -print -quit)"
        [[ -z $foreign ]] || pkg_fail "the service wrote $foreign as another user than $user"
        pkg_log "archived a root-only file as $user through the capability; the archive is all $user's"
    fi
    "$bin/timewarp" --database="$PKG_CONNINFO" status || pkg_fail "timewarp status failed"
    pkg_log "stopping: kill -$kill_signal $pid (wait at most ${timeout}s)"
    kill "-${kill_signal#SIG}" "$pid"
    local deadline=$((SECONDS + ${timeout%s}))
    while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.2; done
    if kill -0 "$pid" 2>/dev/null; then
        kill -KILL "$pid"; cat "$work/monitor.log"
        pkg_fail "the monitor did not stop within TimeoutStopSec"
    fi
    local status=0
    wait "$pid" || status=$?
    [[ $status == 0 ]] || { cat "$work/monitor.log"; pkg_fail "the monitor exited $status on $kill_signal"; }
    pkg_live_schedulers 0 || pkg_fail "the scheduler is still registered as running"
    local left; left="$(pkg_processes_with "$work/archive")"
    [[ -z $left ]] || pkg_fail "processes of the service are left after stop: $left"
    pkg_log "service started, archived a file, stopped cleanly on $kill_signal"
}

# pkg_restarted UNIT OLD_PID: the unit is active again, with another main process.
pkg_restarted() {
    local now; now="$(systemctl show -p MainPID --value "$1")"
    [[ $now != 0 && $now != "$2" ]] && systemctl is-active --quiet "$1"
}

# pkg_service_systemd: the installed unit under the running systemd: start, archive a file,
# kill the monitor (Restart=on-failure brings it back), stop (Result=success).
pkg_service_systemd() {
    local work=$1 unit=timewarp-monitor.service
    local dropin=/run/systemd/system/$unit.d
    mkdir -p "$dropin" "$work/archive" "$work/source"
    echo "service test file" >"$work/source/hello.txt"
    cat >"$dropin/test.conf" <<CONF
[Service]
Environment="TIMEWARP_DATABASE=$PKG_CONNINFO" "BACKUP_ROOT=$work/archive"
RestartSec=1s
CONF
    systemctl daemon-reload
    trap 'systemctl stop '"$unit"' >/dev/null 2>&1; rm -rf '"$dropin"'; systemctl daemon-reload; pkg_cleanup' EXIT
    systemctl start "$unit" || { journalctl -u "$unit" --no-pager | tail -n 50; pkg_fail "systemctl start failed"; }
    pkg_wait 60 pkg_live_schedulers 1 || { journalctl -u "$unit" --no-pager | tail -n 50; pkg_fail "no scheduler"; }
    timewarp --database="$PKG_CONNINFO" enqueue "$work/source/hello.txt" >/dev/null
    pkg_wait 60 pkg_completed 1 || pkg_fail "the file was not archived"
    local first_pid; first_pid="$(systemctl show -p MainPID --value "$unit")"
    systemctl kill --kill-whom=main --signal=SIGKILL "$unit"
    pkg_wait 60 pkg_restarted "$unit" "$first_pid" || pkg_fail "Restart=on-failure did not bring the monitor back"
    pkg_wait 60 pkg_fresh_scheduler || pkg_fail "no scheduler heart-beating after the restart"
    systemctl stop "$unit"
    [[ "$(systemctl show -p Result --value "$unit")" == success ]] ||
        pkg_fail "stop result: $(systemctl show -p Result --value "$unit")"
    pkg_live_schedulers 0 || pkg_fail "the scheduler is still registered as running"
    pkg_log "systemctl start, restart on failure and stop all behaved"
}
