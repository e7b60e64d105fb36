# shellcheck shell=bash
# Helpers to run a private PostgreSQL cluster for TimeWarp. Source this file.
#
#   tw_pg_bindir          print the PostgreSQL server bin directory (newest installed)
#   tw_pg_start DATADIR   create the cluster if needed, start it (or reuse it when it is
#                         already running), export PGHOST PGPORT PGUSER TW_PG_DATADIR and
#                         print the port. Call it directly, not in $(...), so the exports
#                         reach the caller.
#   tw_pg_stop DATADIR    stop the cluster (fast shutdown) if it is running
#   tw_pg_createdb NAME   create database NAME on $PGHOST:$PGPORT if it does not exist
#
# The server listens on 127.0.0.1 only, on a free port from 54320 upward, with its unix
# socket in DATADIR, trust authentication, superuser "postgres", and logs to
# DATADIR/server.log. As root, initdb/pg_ctl run as the system user "timewarp" (created
# if absent), which owns DATADIR.
#
# Environment:
#   TW_PG_FAST=1   fsync, synchronous_commit and full_page_writes off (throw-away clusters)

# shellcheck source=scripts/lib/common.sh
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

TW_PG_SYSTEM_USER=timewarp-pg
TW_PG_FIRST_PORT=54320
TW_PG_PORT_RANGE=200

# Newest /usr/lib/postgresql/*/bin with an initdb, else pg_config --bindir.
tw_pg_bindir() {
    local dir best=""
    while IFS= read -r dir; do
        [[ -x "$dir/initdb" ]] && best="$dir"
    done < <(compgen -G '/usr/lib/postgresql/*/bin' | sort -V)
    if [[ -z "$best" ]] && command -v pg_config >/dev/null 2>&1; then
        dir="$(pg_config --bindir 2>/dev/null)" || dir=""
        [[ -n "$dir" && -x "$dir/initdb" ]] && best="$dir"
    fi
    if [[ -z "$best" ]]; then
        tw_warn "no PostgreSQL server binaries found (looked in /usr/lib/postgresql/*/bin and pg_config --bindir)"
        return 1
    fi
    printf '%s\n' "$best"
}

# Run a command as user $1, from /, without the caller's libpq environment.
tw__pg_as() {
    local user="$1"
    shift
    local clean=(env -u PGHOST -u PGHOSTADDR -u PGPORT -u PGUSER -u PGDATABASE
        -u PGSERVICE -u PGOPTIONS -u PGDATA)
    if [[ "$user" == "$(id -un)" ]]; then
        (cd / && "${clean[@]}" "$@")
    elif command -v runuser >/dev/null 2>&1; then
        (cd / && runuser -u "$user" -- "${clean[@]}" "$@")
    else
        (cd / && su -s /bin/bash "$user" -c "$(printf '%q ' "${clean[@]}" "$@")")
    fi
}

# Create the unprivileged system user that owns clusters started by root.
tw__pg_ensure_user() {
    id -u "$TW_PG_SYSTEM_USER" >/dev/null 2>&1 && return 0
    tw_log "creating system user '$TW_PG_SYSTEM_USER' to run PostgreSQL"
    useradd --system --user-group --no-create-home --home-dir /nonexistent \
        --shell /usr/sbin/nologin "$TW_PG_SYSTEM_USER" 2>/dev/null ||
        id -u "$TW_PG_SYSTEM_USER" >/dev/null 2>&1 ||
        tw_die "could not create system user '$TW_PG_SYSTEM_USER'"
}

# The user that runs the server for DATADIR $1: the current user unless we are root;
# as root, the owner of an existing cluster, else the TimeWarp system user.
tw__pg_owner() {
    local owner
    if ((EUID != 0)); then
        id -un
        return
    fi
    if [[ -f "$1/PG_VERSION" ]]; then
        owner="$(stat -c %U -- "$1")"
        if [[ "$owner" != root && "$owner" != UNKNOWN ]]; then
            printf '%s\n' "$owner"
            return
        fi
    fi
    printf '%s\n' "$TW_PG_SYSTEM_USER"
}

# As root: make sure user $1 can reach directory $2, granting search (o+x, not read)
# on the ancestors that block it.
tw__pg_ensure_reachable() {
    local user="$1" dir="$2" p ancestors=()
    tw__pg_as "$user" test -x "$dir" && return 0
    p="$dir"
    while [[ "$p" != / ]]; do
        p="$(dirname -- "$p")"
        ancestors=("$p" "${ancestors[@]}")
    done
    for p in "${ancestors[@]}"; do
        if ! tw__pg_as "$user" test -x "$p"; then
            tw_log "granting search permission (o+x) on $p so '$user' can reach $dir"
            chmod o+x -- "$p" || tw_die "cannot chmod o+x $p"
        fi
    done
    tw__pg_as "$user" test -x "$dir" || tw_die "user '$user' still cannot reach $dir"
}

# Write DATADIR/timewarp.conf (included from postgresql.conf) for port $2.
tw__pg_write_conf() {
    local datadir="$1" port="$2" user="$3" conf="$1/timewarp.conf" sockdir durable=on
    # A unix socket path must fit in sun_path (107 bytes + NUL); otherwise TCP only.
    if (($(printf '%s' "$datadir/.s.PGSQL.$port" | wc -c) <= 107)); then
        sockdir="${datadir//\'/\'\'}"
    else
        tw_warn "path of $datadir too long for a unix socket; TCP only"
        sockdir=""
    fi
    [[ "${TW_PG_FAST:-0}" == 1 ]] && durable=off
    cat >"$conf" <<CONF
# Rewritten by scripts/lib/pg.sh at every start.
port = $port
listen_addresses = '127.0.0.1'
unix_socket_directories = '$sockdir'
max_connections = 200
logging_collector = off
fsync = $durable
synchronous_commit = $durable
full_page_writes = $durable
CONF
    if ((EUID == 0)); then
        chown "$user:$(id -gn "$user")" "$conf"
    fi
    chmod 600 "$conf"
}

# Export the connection environment for port $1 and DATADIR $2, then print the port.
tw__pg_export() {
    export PGHOST=127.0.0.1 PGPORT="$1" PGUSER=postgres TW_PG_DATADIR="$2"
    printf '%s\n' "$1"
}

tw_pg_start() {
    (($# == 1)) || tw_die "usage: tw_pg_start DATADIR"
    local datadir bindir user group port prev log offset attempt out locale_opt
    local scan_from="$TW_PG_FIRST_PORT"
    datadir="$(realpath -m -- "$1")"
    bindir="$(tw_pg_bindir)" || tw_die "PostgreSQL server binaries are missing"

    ((EUID == 0)) && tw__pg_ensure_user
    user="$(tw__pg_owner "$datadir")"
    group="$(id -gn "$user")"

    # The data directory: owned by the server user, mode 0700, reachable by it.
    mkdir -p -- "$datadir"
    if ((EUID == 0)); then
        if [[ -f "$datadir/PG_VERSION" && "$(stat -c %U -- "$datadir")" != "$user" ]]; then
            chown -R "$user:$group" -- "$datadir"
        else
            chown "$user:$group" -- "$datadir"
        fi
        tw__pg_ensure_reachable "$user" "$datadir"
    fi
    chmod 700 -- "$datadir"

    if [[ ! -f "$datadir/PG_VERSION" ]]; then
        if [[ -n "$(ls -A -- "$datadir")" ]]; then
            tw_die "$datadir is not empty and holds no PostgreSQL cluster"
        fi
        if locale -a 2>/dev/null | grep -qix 'c\.utf-\?8'; then
            locale_opt=--locale=C.UTF-8
        else
            locale_opt=--no-locale
        fi
        tw_log "creating PostgreSQL cluster in $datadir"
        out="$(tw__pg_as "$user" "$bindir/initdb" -D "$datadir" --auth=trust \
            --username=postgres -E UTF8 "$locale_opt" 2>&1)" || {
            printf '%s\n' "$out" >&2
            tw_die "initdb failed for $datadir"
        }
        printf "\ninclude_if_exists = 'timewarp.conf'\n" >>"$datadir/postgresql.conf"
    fi

    # Reuse a cluster that is already running.
    if tw__pg_as "$user" "$bindir/pg_ctl" status -D "$datadir" >/dev/null 2>&1; then
        port="$(sed -n 4p "$datadir/postmaster.pid")"
        [[ "$port" =~ ^[0-9]+$ ]] || tw_die "cannot read the port from $datadir/postmaster.pid"
        "$bindir/pg_isready" -q -h 127.0.0.1 -p "$port" -t 60 ||
            tw_die "cluster in $datadir is running but not accepting connections on port $port"
        tw_log "reusing running cluster in $datadir on port $port"
        tw__pg_export "$port" "$datadir"
        return 0
    fi

    # Prefer the port used last time, else the first free one from 54320. Another
    # process may grab a port between the check and the bind: then try the next one.
    prev="$(sed -n 's/^port = \([0-9]\+\)$/\1/p' "$datadir/timewarp.conf" 2>/dev/null || true)"
    port=""
    if [[ -n "$prev" ]] && tw_port_free "$prev"; then
        port="$prev"
    fi
    log="$datadir/server.log"
    for attempt in 1 2 3 4 5 6 7 8 9 10; do
        if [[ -z "$port" ]]; then
            port="$(tw_free_port "$scan_from" $((TW_PG_FIRST_PORT + TW_PG_PORT_RANGE)))" ||
                tw_die "no free TCP port in $TW_PG_FIRST_PORT..$((TW_PG_FIRST_PORT + TW_PG_PORT_RANGE - 1))"
        fi
        tw__pg_write_conf "$datadir" "$port" "$user"
        offset="$(stat -c %s -- "$log" 2>/dev/null || echo 0)"
        tw_log "starting PostgreSQL ($datadir) on 127.0.0.1:$port${TW_PG_FAST:+ (TW_PG_FAST=$TW_PG_FAST)}"
        if tw__pg_as "$user" "$bindir/pg_ctl" start -D "$datadir" -l "$log" -w -t 60 -s >&2; then
            tw__pg_export "$port" "$datadir"
            return 0
        fi
        out="$(tail -c +"$((offset + 1))" "$log" 2>/dev/null || true)"
        if grep -qE 'could not bind|Address already in use|could not create any TCP/IP sockets' <<<"$out" &&
            ! tw__pg_as "$user" "$bindir/pg_ctl" status -D "$datadir" >/dev/null 2>&1; then
            tw_warn "port $port was taken (attempt $attempt), trying another"
            scan_from=$((port + 1)) port=""
            continue
        fi
        printf '%s\n' "$out" | tail -n 30 >&2
        tw_die "PostgreSQL failed to start; see $log"
    done
    tw_die "PostgreSQL failed to start: no usable port found"
}

tw_pg_stop() {
    (($# == 1)) || tw_die "usage: tw_pg_stop DATADIR"
    local datadir bindir user
    datadir="$(realpath -m -- "$1")"
    if [[ ! -f "$datadir/PG_VERSION" ]]; then
        tw_log "no cluster in $datadir, nothing to stop"
        return 0
    fi
    bindir="$(tw_pg_bindir)" || tw_die "PostgreSQL server binaries are missing"
    user="$(tw__pg_owner "$datadir")"
    if ! tw__pg_as "$user" "$bindir/pg_ctl" status -D "$datadir" >/dev/null 2>&1; then
        tw_log "cluster in $datadir is not running"
        return 0
    fi
    tw_log "stopping PostgreSQL ($datadir)"
    if ! tw__pg_as "$user" "$bindir/pg_ctl" stop -D "$datadir" -m fast -w -t 60 -s >&2; then
        tw_warn "fast shutdown failed, using immediate shutdown"
        tw__pg_as "$user" "$bindir/pg_ctl" stop -D "$datadir" -m immediate -w -t 30 -s >&2 ||
            tw_die "could not stop PostgreSQL in $datadir"
    fi
}

tw_pg_createdb() {
    (($# == 1)) || tw_die "usage: tw_pg_createdb NAME"
    local name="$1" bindir exists out
    [[ -n "${PGPORT:-}" ]] || tw_die "tw_pg_createdb: PGPORT is not set (start a cluster first)"
    bindir="$(tw_pg_bindir)" || tw_die "PostgreSQL client binaries are missing"
    # -d names the maintenance database explicitly; :'name' quotes the value safely.
    exists="$("$bindir/psql" -X -q -tA -v ON_ERROR_STOP=1 -v name="$name" -d postgres \
        <<<"SELECT 1 FROM pg_database WHERE datname = :'name'")" ||
        tw_die "cannot query databases on $PGHOST:$PGPORT"
    if [[ "$exists" == 1 ]]; then
        return 0
    fi
    tw_log "creating database '$name'"
    out="$("$bindir/createdb" -- "$name" 2>&1)" || {
        # Lost a race with another creator? Then the database exists now.
        exists="$("$bindir/psql" -X -q -tA -v name="$name" -d postgres \
            <<<"SELECT 1 FROM pg_database WHERE datname = :'name'")"
        [[ "$exists" == 1 ]] || tw_die "createdb '$name' failed: $out"
    }
}
