# shellcheck shell=bash
# Helpers to run a throw-away one-node Ceph cluster with an S3 gateway, for tests. Source
# this file.
#
#   tw_ceph_start DIR   create DIR if needed and a fresh cluster in it (one monitor, one OSD
#                       on memstore, radosgw on 127.0.0.1), create an S3 user, wait until
#                       the gateway answers a signed request, export TW_S3_ENDPOINT
#                       TW_S3_ACCESS_KEY TW_S3_SECRET_KEY TW_S3_REGION TW_CEPH_DIR and print
#                       the endpoint. Returns non-zero (with the tail of the log that tells
#                       why) on failure. Call it directly, not in $(...), so the exports
#                       reach the caller. Reuses the cluster already running in DIR when its
#                       gateway answers; otherwise whatever DIR held of a cluster is stopped
#                       and wiped (the data lives in the OSD's memory: nothing is kept).
#   tw_ceph_stop DIR    stop radosgw, the OSD and the monitor of DIR (TERM, a bounded wait,
#                       then KILL), whatever state they are in; idempotent, and safe after a
#                       start that failed halfway
#
# Everything lives in DIR: ceph.conf, monmap, mon/, osd/, rgw/, log/ (each daemon's log
# and its output, cluster.log), run/ (admin sockets, pid files, the gateway's port), crash/.
# Every ceph command gets -c DIR/ceph.conf (nothing of /etc/ceph is read) and runs under
# `timeout` (without a mgr, some commands never return). No systemd: the daemons run with
# -f in the background, not as children of the caller; DIR/run/<name>.tw.pid holds each
# pid (ceph-mon and ceph-osd also write DIR/run/<name>.pid; radosgw -f writes none), and
# tw_ceph_stop also finds, in /proc, any daemon started with -c DIR/ceph.conf. Each cluster
# has its own fsid, and its monitor (msgr2 only, from port 3300) and gateway (from 7480)
# take free ports on 127.0.0.1, so clusters in different folders do not clash (the OSD
# picks its own ports in 6800..7300). Authentication between the daemons is off (auth ...
# required = none: a loopback-only test cluster, no keyrings). A start takes about 3 s.
#
# S3: path-style requests, signed with SigV4. RGW requires the x-amz-content-sha256
# header (curl 7.88's --aws-sigv4 does not send it: add it, e.g. the SHA-256 of the empty
# payload), accepts any region in the credential scope and, for a CreateBucket
# LocationConstraint, only its zone group's name "default", hence TW_S3_REGION=default.
#
# Environment:
#   TW_CEPH_ACCESS_KEY, TW_CEPH_SECRET_KEY   the S3 user's keys (defaults below)
#   TW_CEPH_REGION                           exported as TW_S3_REGION (default "default")

# shellcheck source=scripts/lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

TW_CEPH_FIRST_MON_PORT=3300
TW_CEPH_FIRST_RGW_PORT=7480
TW_CEPH_PORT_RANGE=100
TW_CEPH_TIMEOUT=20 # seconds, for each ceph / radosgw-admin command
TW_CEPH_READY_TIMEOUT=60 # seconds, for the gateway to answer a signed request
TW_CEPH_UID=timewarp
TW_CEPH_DEFAULT_ACCESS_KEY=TIMEWARPTESTACCESS01
TW_CEPH_DEFAULT_SECRET_KEY=timewarpTestSecretKey0123456789abcdefghij
# The gateway's pools, created up front: radosgw creating them itself is slow.
TW_CEPH_RGW_POOLS=(.rgw.root default.rgw.log default.rgw.control default.rgw.meta
    default.rgw.buckets.index default.rgw.buckets.data default.rgw.buckets.non-ec)
# What tw_ceph_start creates in DIR (and wipes before creating a new cluster there).
TW_CEPH_ENTRIES=(ceph.conf monmap mon osd rgw log run crash)

# ceph / radosgw-admin against the cluster in DIR $1, bounded in time, without the
# caller's CEPH_ARGS.
tw__ceph_cli() {
    local dir="$1"
    shift
    timeout -k 5 "$TW_CEPH_TIMEOUT" env -u CEPH_ARGS -u CEPH_CONF \
        ceph -c "$dir/ceph.conf" --connect-timeout "$((TW_CEPH_TIMEOUT - 5))" "$@"
}
tw__ceph_rgw_admin() {
    local dir="$1"
    shift
    timeout -k 5 "$TW_CEPH_TIMEOUT" env -u CEPH_ARGS -u CEPH_CONF \
        radosgw-admin -c "$dir/ceph.conf" -n client.admin "$@"
}

# The pids of the processes started with -c DIR/ceph.conf, with their program's name: the
# daemons (ceph-mon, ceph-osd, radosgw) and the clients (ceph, radosgw-admin) of a start
# that was interrupted. Found in /proc, so nothing escapes: not a daemon whose pid a start
# killed halfway did not record, nor one whose pid file is stale.
tw__ceph_pids() {
    local conf="$1/ceph.conf" proc exe arg prev found
    for proc in /proc/[0-9]*; do
        [[ -r "$proc/cmdline" ]] || continue
        exe="" prev="" found=0
        while IFS= read -r -d '' arg; do
            if [[ -z "$exe" ]]; then
                exe="${arg##*/}"
                case "$exe" in
                python3*) exe="" ;; # /usr/bin/ceph is a python script: its name comes next
                ceph | ceph-mon | ceph-osd | radosgw | radosgw-admin) ;;
                *) break ;;
                esac
            elif [[ "$prev" == -c || "$prev" == --conf ]] && [[ "$arg" == "$conf" ]]; then
                found=1
                break
            fi
            prev="$arg"
        done <"$proc/cmdline" 2>/dev/null || true
        ((found)) && printf '%s %s\n' "${proc#/proc/}" "$exe"
    done
    return 0
}

# True while process $1 exists and is not a zombie.
tw__ceph_alive() {
    local state
    [[ -r "/proc/$1/stat" ]] || return 1
    state="$(sed -n 's/^.*) \([A-Z]\).*$/\1/p' "/proc/$1/stat" 2>/dev/null)" || return 1
    [[ -n "$state" && "$state" != Z && "$state" != X ]]
}

# Stop the processes of DIR $1 named $2 (ceph-mon, ceph-osd, radosgw, or the clients ceph
# and radosgw-admin): TERM, up to $3 seconds, then KILL and up to 5 seconds more.
tw__ceph_stop_daemon() {
    local dir="$1" name="$2" grace="$3" pids=() pid exe
    while read -r pid exe; do
        [[ "$exe" == "$name" ]] && pids+=("$pid")
    done < <(tw__ceph_pids "$dir")
    ((${#pids[@]} > 0)) || return 0
    tw_log "stopping $name (pid ${pids[*]})"
    kill -TERM "${pids[@]}" 2>/dev/null || true
    tw__ceph_wait_gone $((grace * 10)) "${pids[@]}" && return 0
    tw_warn "$name (pid ${pids[*]}) did not stop within $grace s, killing it"
    kill -KILL "${pids[@]}" 2>/dev/null || true
    tw__ceph_wait_gone 50 "${pids[@]}" && return 0
    tw_warn "$name (pid ${pids[*]}) is still there after SIGKILL"
    return 1
}

# Wait up to $1 tenths of a second until none of the pids that follow is alive.
tw__ceph_wait_gone() {
    local tries="$1" pid alive
    shift
    while :; do
        alive=0
        for pid in "$@"; do
            if tw__ceph_alive "$pid"; then
                alive=1
                break
            fi
        done
        ((alive)) || return 0
        ((tries-- > 0)) || return 1
        sleep 0.1
    done
}

tw_ceph_stop() {
    (($# == 1)) || tw_die "usage: tw_ceph_stop DIR"
    local dir status=0
    dir="$(realpath -m -- "$1")"
    tw__ceph_stop_daemon "$dir" ceph 2 || status=1
    tw__ceph_stop_daemon "$dir" radosgw-admin 2 || status=1
    tw__ceph_stop_daemon "$dir" radosgw 10 || status=1
    tw__ceph_stop_daemon "$dir" ceph-osd 10 || status=1
    tw__ceph_stop_daemon "$dir" ceph-mon 10 || status=1
    rm -f -- "$dir"/run/*.pid "$dir"/run/*.asok 2>/dev/null || true
    return "$status"
}

# Print the last lines of the logs of daemon $2 (mon.a, osd.0, client.rgw) in DIR $1.
tw__ceph_log_tail() {
    local dir="$1" name="$2" file
    for file in "$dir/log/$name.log" "$dir/log/$name.out"; do
        [[ -s "$file" ]] || continue
        printf '[timewarp] --- last lines of %s ---\n' "$file" >&2
        tail -n 25 -- "$file" >&2
    done
}

# Start daemon $3 (ceph-mon, ceph-osd, radosgw) of DIR $1 as $2 (mon.a ...) with the
# remaining arguments, in the background, its output in DIR/log/$2.out, its pid in
# DIR/run/$2.tw.pid (the daemon writes DIR/run/$2.pid itself once started).
tw__ceph_spawn() {
    local dir="$1" name="$2" exe="$3"
    shift 3
    # Started from a subshell, the daemon is not the caller's child (no zombie, nothing
    # for a bare `wait` to hang on); env execs it, so $! is its pid.
    (
        cd "$dir/run" || exit 1
        env -u CEPH_ARGS -u CEPH_CONF "$exe" -f -c "$dir/ceph.conf" "$@" \
            </dev/null >>"$dir/log/$name.out" 2>&1 &
        printf '%s\n' "$!" >"$dir/run/$name.tw.pid"
    )
}

# The pid recorded for daemon $2 of DIR $1, if it is still alive.
tw__ceph_spawned_alive() {
    local pid
    pid="$(cat -- "$1/run/$2.tw.pid" 2>/dev/null)" || return 1
    [[ "$pid" =~ ^[0-9]+$ ]] && tw__ceph_alive "$pid"
}

# Write DIR/ceph.conf for fsid $2 and monitor port $3.
tw__ceph_write_conf() {
    local dir="$1" fsid="$2" mon_port="$3"
    cat >"$dir/ceph.conf" <<CONF
# Written by scripts/lib/ceph.sh (TimeWarp): a throw-away one-node test cluster.
[global]
fsid = $fsid
mon host = v2:127.0.0.1:$mon_port
public addr = 127.0.0.1
cluster addr = 127.0.0.1
ms bind ipv6 = false
auth cluster required = none
auth service required = none
auth client required = none
keyring = $dir/keyring
run dir = $dir/run
crash dir = $dir/crash
log file = $dir/log/\$name.log
log to stderr = false
err to stderr = true
mon cluster log file = $dir/log/cluster.log
admin socket = $dir/run/\$name.\$pid.asok
pid file =
osd pool default size = 1
osd pool default min size = 1
osd pool default pg num = 8
osd pool default pgp num = 8
osd pool default pg autoscale mode = off
osd crush chooseleaf type = 0
mon allow pool size one = true
mon allow pool delete = true
mon warn on pool no redundancy = false
mon osd down out interval = 0
paxos propose interval = 0.01
# Without authentication only crc framing is possible; radosgw (a daemon) would ask the
# monitor for "secure" alone and never connect (get_initial_auth_request returned -13).
ms mon client mode = crc
[mon]
mon data = $dir/mon
# A taken port: fail at once (the default retries for 15 s), tw_ceph_start tries another.
ms bind retry count = 1
# A nearly full disk must not stop a test's monitor (the default stops it under 5% free).
mon data avail crit = 0
admin socket = $dir/run/\$name.asok
pid file = $dir/run/\$name.pid
[osd]
osd data = $dir/osd
osd objectstore = memstore
memstore device bytes = 1073741824
osd op num shards = 2
osd op num threads per shard = 1
admin socket = $dir/run/\$name.asok
pid file = $dir/run/\$name.pid
[client]
# A client whose first request waits for the OSD to come up asks for newer maps only at
# each tick: 5 s by default, which radosgw-admin would spend waiting right after start.
objecter tick interval = 0.2
[client.rgw]
rgw data = $dir/rgw
rgw init timeout = 30
rgw thread pool size = 32
rgw dynamic resharding = false
rgw enable usage log = false
rgw enable ops log = false
admin socket = $dir/run/\$name.asok
pid file = $dir/run/\$name.pid
CONF
}

# The SHA-256 of an empty payload. RGW requires x-amz-content-sha256 on SigV4 requests
# (without it: SignatureDoesNotMatch), and curl 7.88 does not send it by itself.
TW_CEPH_EMPTY_SHA256=e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855

# Sign a GET of the service (list my buckets) and print the HTTP status ("000" when
# there was no answer).
tw__ceph_s3_probe() {
    curl -s -o /dev/null -w '%{http_code}' --max-time 3 \
        --aws-sigv4 "aws:amz:$TW_S3_REGION:s3" --user "$TW_S3_ACCESS_KEY:$TW_S3_SECRET_KEY" \
        -H "x-amz-content-sha256: $TW_CEPH_EMPTY_SHA256" \
        "$TW_S3_ENDPOINT/" 2>/dev/null || true
}

tw__ceph_export() {
    export TW_CEPH_DIR="$1"
    export TW_S3_ENDPOINT="http://127.0.0.1:$2"
    export TW_S3_ACCESS_KEY="${TW_CEPH_ACCESS_KEY:-$TW_CEPH_DEFAULT_ACCESS_KEY}"
    export TW_S3_SECRET_KEY="${TW_CEPH_SECRET_KEY:-$TW_CEPH_DEFAULT_SECRET_KEY}"
    export TW_S3_REGION="${TW_CEPH_REGION:-default}"
}

# Fail tw_ceph_start: message $2, the tail of the logs of the daemons named after it,
# then stop whatever DIR $1 runs.
tw__ceph_fail() {
    local dir="$1" msg="$2" name
    shift 2
    for name in "$@"; do
        tw__ceph_log_tail "$dir" "$name"
    done
    tw_warn "$msg"
    tw_ceph_stop "$dir" || true
    return 1
}

# True when process $1 itself listens on TCP port $2. Connecting is not enough: when our
# daemon failed to bind, the port may be another cluster's, whose monitor would take our
# commands and whose gateway would answer our probe (with the same keys).
tw__ceph_listens() {
    if command -v ss >/dev/null 2>&1; then
        [[ "$(ss -Hltnp "sport = :$2" 2>/dev/null)" == *"pid=$1,"* ]]
    else
        tw__ceph_listens_proc "$1" "$2"
    fi
}

# The same without ss: the listening sockets of port $2 in /proc/net/tcp*, among the file
# descriptors of process $1.
tw__ceph_listens_proc() {
    local pid="$1" hex addr state inode sockets=() fd link
    printf -v hex ':%04X' "$2"
    while read -r _ addr _ state _ _ _ _ _ inode _; do
        [[ "$addr" == *"$hex" && "$state" == 0A ]] && sockets+=("socket:[$inode]")
    done < <(cat /proc/net/tcp /proc/net/tcp6 2>/dev/null)
    ((${#sockets[@]} > 0)) || return 1
    for fd in "/proc/$pid/fd/"*; do
        link="$(readlink -- "$fd" 2>/dev/null)" || continue
        for inode in "${sockets[@]}"; do
            [[ "$link" == "$inode" ]] && return 0
        done
    done
    return 1
}

# Wait up to $3 tenths of a second until daemon $4 of DIR $1 listens on port $2; fail at
# once when it is gone.
tw__ceph_wait_port() {
    local dir="$1" port="$2" tries="$3" name="$4" pid
    pid="$(cat -- "$dir/run/$name.tw.pid" 2>/dev/null)" || return 1
    while ((tries-- > 0)); do
        tw__ceph_alive "$pid" || return 1
        tw__ceph_listens "$pid" "$port" && return 0
        sleep 0.1
    done
    return 1
}

# Keep the logs of a daemon that failed to bind ($2 the name, $3 the attempt).
tw__ceph_set_aside_logs() {
    local dir="$1" name="$2" attempt="$3" file
    for file in "$dir/log/$name.log" "$dir/log/$name.out"; do
        [[ -e "$file" ]] && mv -f -- "$file" "$file.failed-$attempt"
    done
    return 0
}

# True when the logs of daemon $2 of DIR $1 say its port was taken.
tw__ceph_bind_failed() {
    grep -qsE 'Address already in use|unable to bind|failed to bind' \
        "$1/log/$2.log" "$1/log/$2.out"
}

# Create and start the monitor of DIR $1 (fsid $2) on a free port; write ceph.conf.
tw__ceph_start_mon() {
    local dir="$1" fsid="$2" scan_from=$TW_CEPH_FIRST_MON_PORT port attempt out
    for attempt in 1 2 3 4 5; do
        port="$(tw_free_port "$scan_from" $((TW_CEPH_FIRST_MON_PORT + TW_CEPH_PORT_RANGE)))" || {
            tw_warn "no free TCP port for the Ceph monitor in $TW_CEPH_FIRST_MON_PORT..$((TW_CEPH_FIRST_MON_PORT + TW_CEPH_PORT_RANGE - 1))"
            return 1
        }
        tw__ceph_write_conf "$dir" "$fsid" "$port" || return 1
        rm -rf -- "${dir:?}/mon" && mkdir -p -- "$dir/mon" || return 1
        out="$(timeout 20 monmaptool --create --clobber --fsid "$fsid" \
            --addv a "[v2:127.0.0.1:$port]" "$dir/monmap" 2>&1)" || {
            printf '%s\n' "$out" >&2
            tw_warn "monmaptool failed"
            return 1
        }
        out="$(timeout 20 env -u CEPH_ARGS -u CEPH_CONF ceph-mon -c "$dir/ceph.conf" \
            --mkfs -i a --monmap "$dir/monmap" 2>&1)" || {
            printf '%s\n' "$out" >&2
            tw_warn "ceph-mon --mkfs failed"
            return 1
        }
        tw_log "starting Ceph monitor ($dir) on 127.0.0.1:$port"
        tw__ceph_spawn "$dir" mon.a ceph-mon -i a
        tw__ceph_wait_port "$dir" "$port" 100 mon.a && return 0
        # Another process may take the port between the check and the bind: the next one.
        if ! tw__ceph_spawned_alive "$dir" mon.a && tw__ceph_bind_failed "$dir" mon.a; then
            tw_warn "port $port was taken (attempt $attempt), trying another"
            tw__ceph_set_aside_logs "$dir" mon.a "$attempt"
            scan_from=$((port + 1))
            continue
        fi
        tw__ceph_log_tail "$dir" mon.a
        tw_warn "the Ceph monitor did not start listening on 127.0.0.1:$port"
        return 1
    done
    tw_warn "the Ceph monitor found no usable port"
    return 1
}

# Start radosgw for DIR $1 on a free port and wait until it answers a signed request.
tw__ceph_start_rgw() {
    local dir="$1" scan_from=$TW_CEPH_FIRST_RGW_PORT port attempt code tries
    for attempt in 1 2 3 4 5; do
        port="$(tw_free_port "$scan_from" $((TW_CEPH_FIRST_RGW_PORT + TW_CEPH_PORT_RANGE)))" || {
            tw_warn "no free TCP port for radosgw in $TW_CEPH_FIRST_RGW_PORT..$((TW_CEPH_FIRST_RGW_PORT + TW_CEPH_PORT_RANGE - 1))"
            return 1
        }
        printf '%s\n' "$port" >"$dir/run/rgw.port"
        tw__ceph_export "$dir" "$port"
        tw_log "starting radosgw on 127.0.0.1:$port"
        tw__ceph_spawn "$dir" client.rgw radosgw -n client.rgw \
            --rgw-frontends "beast endpoint=127.0.0.1:$port"
        code=000
        # radosgw binds its port once it is ready to serve (after its own set-up).
        if tw__ceph_wait_port "$dir" "$port" $((TW_CEPH_READY_TIMEOUT * 10)) client.rgw; then
            for ((tries = 100; tries > 0; tries--)); do
                tw__ceph_spawned_alive "$dir" client.rgw || break
                code="$(tw__ceph_s3_probe)"
                [[ "$code" == 200 ]] && return 0
                sleep 0.1
            done
        fi
        if ! tw__ceph_spawned_alive "$dir" client.rgw && tw__ceph_bind_failed "$dir" client.rgw; then
            tw_warn "port $port was taken (attempt $attempt), trying another"
            tw__ceph_set_aside_logs "$dir" client.rgw "$attempt"
            scan_from=$((port + 1))
            continue
        fi
        tw__ceph_log_tail "$dir" client.rgw
        tw__ceph_log_tail "$dir" osd.0
        tw_warn "radosgw on port $port did not answer a signed request (last HTTP status $code)"
        return 1
    done
    tw_warn "radosgw found no usable port"
    return 1
}

tw_ceph_start() {
    if (($# != 1)); then
        tw_warn "usage: tw_ceph_start DIR"
        return 2
    fi
    local dir fsid osd_uuid entry out pool port commands
    local started=$SECONDS missing=()
    dir="$(realpath -m -- "$1")"
    for entry in ceph ceph-mon ceph-osd radosgw radosgw-admin monmaptool curl timeout; do
        command -v "$entry" >/dev/null 2>&1 || missing+=("$entry")
    done
    if ((${#missing[@]} > 0)); then
        tw_warn "missing commands: ${missing[*]} (packages ceph-mon ceph-osd radosgw ceph-common curl)"
        return 1
    fi

    # A cluster already running here whose gateway answers: reuse it.
    port="$(cat -- "$dir/run/rgw.port" 2>/dev/null)" || port=""
    if [[ "$port" =~ ^[0-9]+$ ]] && tw__ceph_wait_port "$dir" "$port" 1 client.rgw; then
        tw__ceph_export "$dir" "$port"
        if [[ "$(tw__ceph_s3_probe)" == 200 ]]; then
            tw_log "reusing the Ceph cluster running in $dir, S3 gateway $TW_S3_ENDPOINT"
            printf '%s\n' "$TW_S3_ENDPOINT"
            return 0
        fi
    fi

    # A fresh cluster: stop and wipe whatever an earlier one left here.
    mkdir -p -- "$dir" || return 1
    tw_ceph_stop "$dir" || return 1
    for entry in "${TW_CEPH_ENTRIES[@]}"; do
        rm -rf -- "${dir:?}/$entry" || return 1
    done
    mkdir -p -- "$dir/mon" "$dir/osd" "$dir/rgw" "$dir/log" "$dir/run" "$dir/crash" || return 1
    if (($(printf '%s' "$dir/run/client.rgw.asok" | wc -c) > 107)); then
        tw_warn "the path of $dir is too long for the daemons' admin sockets (they run without)"
    fi
    fsid="$(cat /proc/sys/kernel/random/uuid)" && osd_uuid="$(cat /proc/sys/kernel/random/uuid)" ||
        return 1

    if ! tw__ceph_start_mon "$dir" "$fsid"; then
        tw_ceph_stop "$dir" || true
        return 1
    fi

    # The OSD (memstore: no disk, no journal) is made without the monitor; the monitor
    # learns of it, and of the gateway's pools, in one run of the ceph command (one line
    # a command on stdin; that run's status tells nothing, its output does).
    out="$(timeout 20 env -u CEPH_ARGS -u CEPH_CONF ceph-osd -c "$dir/ceph.conf" \
        -i 0 --mkfs --osd-uuid "$osd_uuid" 2>&1)" || {
        printf '%s\n' "$out" >&2
        tw__ceph_fail "$dir" "ceph-osd --mkfs failed" osd.0
        return 1
    }
    commands="osd new $osd_uuid 0"$'\n'
    for pool in "${TW_CEPH_RGW_POOLS[@]}"; do
        commands+="osd pool create $pool 8 8"$'\n'
    done
    out="$(tw__ceph_cli "$dir" <<<"$commands" 2>&1)" || true
    entry=""
    [[ "$out" =~ (^|$'\n')0($'\n'|$) ]] || entry="osd.0"
    for pool in "${TW_CEPH_RGW_POOLS[@]}"; do
        [[ "$out" == *"pool '$pool' created"* || "$out" == *"pool '$pool' already exists"* ]] ||
            entry+=" $pool"
    done
    if [[ -n "$entry" ]]; then
        printf '%s\n' "$out" >&2
        tw__ceph_fail "$dir" "the monitor did not create:$entry" mon.a
        return 1
    fi
    tw_log "starting Ceph OSD (memstore)"
    tw__ceph_spawn "$dir" osd.0 ceph-osd -i 0

    # The S3 user (radosgw-admin also makes the default realm, zone group and zone); it
    # waits for the OSD.
    tw__ceph_export "$dir" 0
    out="$(tw__ceph_rgw_admin "$dir" user create --uid="$TW_CEPH_UID" \
        --display-name="TimeWarp tests" --access-key="$TW_S3_ACCESS_KEY" \
        --secret-key="$TW_S3_SECRET_KEY" 2>&1)" || {
        printf '%s\n' "$out" >&2
        tw__ceph_fail "$dir" "radosgw-admin user create failed" osd.0 mon.a
        return 1
    }

    if ! tw__ceph_start_rgw "$dir"; then
        tw_ceph_stop "$dir" || true
        return 1
    fi
    tw_log "Ceph S3 gateway ready at $TW_S3_ENDPOINT (region $TW_S3_REGION) after $((SECONDS - started)) s"
    printf '%s\n' "$TW_S3_ENDPOINT"
}
