# The TimeWarp side of the benchmarks that run it as a user does (bench/peers, bench/ship):
# timewarp-monitor started on a tree with a database of its own, its queue watched until it
# drained, the monitor stopped and its database dropped. Sourced; the caller sets `bin`
# (the programs), `log` (commands' output), `bench_name` (its databases' prefix), the array
# `databases` (every database made, for its cleanup to drop), `monitor_pid` (empty), and
# has scripts/lib/common.sh's tw_die. Every database name is tw_<bench_name>_<pid>_<n>.

calc() { awk "BEGIN { printf \"%.2f\", $* }"; }
mib() { calc "$1 / 1048576"; }

tw_db=
sql() { psql "$TIMEWARP_TEST_DATABASE dbname=$tw_db" -XAtqc "$1"; }

# Starts timewarp-monitor (defaults: 2 archivers, zstd level 2) on tree $1, archive $2, with
# a database of its own; sets monitor_pid and started (epoch seconds).
tw_start() {
    tw_db="tw_${bench_name}_$$_${#databases[@]}"
    psql "$TIMEWARP_TEST_DATABASE" -XAtqc "CREATE DATABASE $tw_db" >/dev/null
    databases+=("$tw_db")
    started=$EPOCHREALTIME
    TIMEWARP_DATABASE="$TIMEWARP_TEST_DATABASE dbname=$tw_db" "$bin/timewarp-monitor" --no-config \
        --backup-root="$2" --source="$1" --log-level=warn 2>>"$log" &
    monitor_pid=$!
}
# Drops the database of the TimeWarp run that has just stopped: left behind, its tables'
# autovacuum (a few tenths of a second of CPU) would run during a later tool's backup.
tw_drop_db() {
    psql "$TIMEWARP_TEST_DATABASE" -XAtqc "DROP DATABASE IF EXISTS $tw_db WITH (FORCE)" >/dev/null
}
tw_stop() {
    kill "$monitor_pid"
    wait "$monitor_pid" || true
    monitor_pid=
    watch_stop
}

# The drain is watched through one psql session kept open (a psql started for each look
# costs about 27 ms of CPU here, taken from the backup being measured; restic and Borg are
# timed by their own exit). watch_sql QUERY sets watch_row to the query's last row, empty
# when it failed (the schema not made yet).
watch_db=
watch_row=
watch_sql() {
    if [[ "$watch_db" != "$tw_db" ]]; then
        watch_stop
        coproc WATCH { psql "$TIMEWARP_TEST_DATABASE dbname=$tw_db" -XAtq 2>/dev/null; }
        watch_db=$tw_db
    fi
    printf '%s;\n\\echo __end__\n' "$1" >&"${WATCH[1]}"
    local line
    watch_row=
    while IFS= read -r line <&"${WATCH[0]}"; do
        [[ "$line" == __end__ ]] && break
        watch_row=$line
    done
}
watch_stop() {
    [[ -n "$watch_db" ]] || return 0
    { printf '\\q\n' >&"${WATCH[1]}"; } 2>/dev/null || true
    wait "$WATCH_PID" 2>/dev/null || true
    watch_db=
}
tw_last_id() { sql "SELECT coalesce(max(id), 0) FROM timewarp.items"; }

# Waits (at most an hour) until the monitor's catch-up is done, items after id $1 exist,
# none is NEW or DISPATCHED, and nothing changed for 2 s; sets finished (epoch seconds of
# the last item's completion) and failed (items FAILED).
# While work is pending it looks only at the per-status counters (timewarp.item_counts, a
# few rows): the full look below reads every item, up to 20 ms of the server's CPU here
# in the middle of a first backup, five times a second, taken from the backup measured.
tw_wait_drained() {
    local state last='' stable_since=$SECONDS deadline=$((SECONDS + 3600)) catchup pending total
    while ((SECONDS < deadline)); do
        watch_sql "SELECT (SELECT count(*) FROM timewarp.monitors WHERE catchup_finished_at IS NOT NULL),
                          (SELECT coalesce(sum(n), 0) FROM timewarp.item_counts
                            WHERE status IN ('NEW', 'DISPATCHED'))"
        IFS='|' read -r catchup pending <<<"$watch_row"
        state=
        if [[ -n "$watch_row" && "$catchup" -ge 1 && "$pending" -eq 0 ]]; then
            watch_sql "SELECT (SELECT count(*) FROM timewarp.monitors WHERE catchup_finished_at IS NOT NULL),
                              count(*) FILTER (WHERE status IN ('NEW', 'DISPATCHED')), count(*),
                              coalesce(max(id), 0),
                              coalesce(extract(epoch FROM max(finished_at)), 0),
                              count(*) FILTER (WHERE status = 'FAILED')
                         FROM timewarp.items WHERE id > $1"
            state=$watch_row
        fi
        IFS='|' read -r catchup pending total _ finished failed <<<"$state"
        if [[ -n "$state" && "$catchup" -ge 1 && "$pending" -eq 0 && "$total" -gt 0 ]]; then
            [[ "$state" == "$last" ]] || stable_since=$SECONDS
            ((SECONDS - stable_since >= 2)) && return 0
        else
            stable_since=$SECONDS
        fi
        last=$state
        kill -0 "$monitor_pid" 2>/dev/null || { tail -n 20 "$log"; tw_die "timewarp-monitor exited"; }
        sleep 0.2
    done
    tw_die "the queue did not drain within an hour"
}
