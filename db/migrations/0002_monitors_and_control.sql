-- The running monitors (one row each, refreshed by its heartbeat) and the operator's
-- instructions to them (`timewarp archivers N`), so a person with psql can see whether the
-- monitor runs, how many directories it watches, whether its start-up catch-up is done,
-- and how many archivers were asked for.

CREATE TABLE timewarp.monitors (
    id                  bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    host                text        NOT NULL,
    pid                 integer     NOT NULL,
    source_dirs         text[]      NOT NULL DEFAULT '{}',  -- escaped
    started_at          timestamptz NOT NULL DEFAULT now(),
    heartbeat_at        timestamptz NOT NULL DEFAULT now(),
    stopped_at          timestamptz,
    catchup_finished_at timestamptz,            -- changes made while stopped are queued
    watches             integer     NOT NULL DEFAULT 0,  -- directories watched (inotify)
    unwatched_dirs      integer     NOT NULL DEFAULT 0,  -- directories polled instead
    events              bigint      NOT NULL DEFAULT 0,  -- inotify events read
    changes             bigint      NOT NULL DEFAULT 0,  -- changes found (before coalescing)
    items_queued        bigint      NOT NULL DEFAULT 0,  -- items inserted
    rescans             integer     NOT NULL DEFAULT 0,  -- full rescans (queue overflows)
    archivers           integer     NOT NULL DEFAULT 0,  -- archivers asked of its scheduler
    scheduler_pid       integer,
    scheduler_restarts  integer     NOT NULL DEFAULT 0
);

-- One row per setting an operator changes at run time; every running monitor applies a
-- row newer than what it has in force (at start, its configuration is in force).
CREATE TABLE timewarp.control (
    name   text        PRIMARY KEY CHECK (name IN ('archivers')),
    value  text        NOT NULL,
    set_at timestamptz NOT NULL DEFAULT now()
);

CREATE FUNCTION timewarp.notify_control() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('timewarp_control', NEW.name);
    RETURN NULL;
END $$;

CREATE TRIGGER control_changed AFTER INSERT OR UPDATE ON timewarp.control
    FOR EACH ROW EXECUTE FUNCTION timewarp.notify_control();
