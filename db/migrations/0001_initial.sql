-- The master queue, the audit trail of batches, the live schedulers and the status view.
-- Paths are stored escaped (ARCHITECTURE.md, "Path escaping"), so any Linux file name fits
-- in text.

CREATE TABLE timewarp.schedulers (
    id                     bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    host                   text        NOT NULL,
    pid                    integer     NOT NULL,
    started_at             timestamptz NOT NULL DEFAULT now(),
    heartbeat_at           timestamptz NOT NULL DEFAULT now(),
    stopped_at             timestamptz,
    strategy               text        NOT NULL,
    batch_size             integer     NOT NULL,
    archivers              integer     NOT NULL DEFAULT 0,
    busy_consumers         integer     NOT NULL DEFAULT 0,
    idle_consumers         integer     NOT NULL DEFAULT 0,
    busy_high_water        integer     NOT NULL DEFAULT 0,
    batch_queue_length     integer     NOT NULL DEFAULT 0,
    batch_queue_high_water integer     NOT NULL DEFAULT 0,
    items_done             bigint      NOT NULL DEFAULT 0,
    items_failed           bigint      NOT NULL DEFAULT 0
);

CREATE TABLE timewarp.batches (
    id           bigint      PRIMARY KEY,
    scheduler_id bigint      NOT NULL REFERENCES timewarp.schedulers (id),
    strategy     text        NOT NULL,
    requested    integer     NOT NULL,
    size         integer     NOT NULL,
    claimed_at   timestamptz NOT NULL DEFAULT now(),
    drained_at   timestamptz
);
CREATE SEQUENCE timewarp.batch_ids OWNED BY timewarp.batches.id;

CREATE TABLE timewarp.items (
    id            bigint      GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    op            text        NOT NULL CHECK (op IN ('UPDATE', 'STAT', 'DELETE', 'MOVE')),
    path          text        NOT NULL,
    dest_path     text,
    source_root   text        NOT NULL DEFAULT '',
    status        text        NOT NULL DEFAULT 'NEW'
                              CHECK (status IN ('NEW', 'DISPATCHED', 'COMPLETED', 'FAILED')),
    priority      integer     NOT NULL DEFAULT 0,
    size          bigint,
    mtime         timestamptz,
    enqueued_at   timestamptz NOT NULL DEFAULT now(),
    not_before    timestamptz NOT NULL DEFAULT now(),
    dispatched_at timestamptz,
    started_at    timestamptz,
    finished_at   timestamptz,
    attempts      integer     NOT NULL DEFAULT 0,
    last_error    text,
    scheduler_id  bigint,
    batch_id      bigint,
    lease_until   timestamptz,
    archive_bytes bigint,
    cpu_us        bigint,
    CHECK ((op = 'MOVE') = (dest_path IS NOT NULL))
);

-- Claims: one partial index per claim order, each matching the claim predicate
-- (status = 'NEW'); the not_before test is applied to the few rows the scan visits.
CREATE INDEX items_claim_fifo ON timewarp.items (id) WHERE status = 'NEW';
CREATE INDEX items_claim_priority ON timewarp.items (priority DESC, id) WHERE status = 'NEW';
CREATE INDEX items_claim_fair ON timewarp.items (source_root, id) WHERE status = 'NEW';
-- When does the next delayed retry fall due; how many are claimable now.
CREATE INDEX items_new_not_before ON timewarp.items (not_before) WHERE status = 'NEW';
-- Lease renewal and recovery.
CREATE INDEX items_dispatched ON timewarp.items (lease_until, scheduler_id) WHERE status = 'DISPATCHED';
-- History of a path.
CREATE INDEX items_path ON timewarp.items (path);
-- Failures and recent completions by time.
CREATE INDEX items_failed ON timewarp.items (finished_at) WHERE status = 'FAILED';
CREATE INDEX items_completed ON timewarp.items (finished_at) WHERE status = 'COMPLETED';

-- Wake listeners (the monitor) whenever items become claimable: inserted, or returned to
-- NEW by a retry, a lease recovery, a stop or by hand.
CREATE FUNCTION timewarp.notify_items_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('timewarp_items', 'insert');
    RETURN NULL;
END $$;

CREATE FUNCTION timewarp.notify_items_renewed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF EXISTS (SELECT 1 FROM renewed WHERE status = 'NEW') THEN
        PERFORM pg_notify('timewarp_items', 'update');
    END IF;
    RETURN NULL;
END $$;

CREATE TRIGGER items_inserted AFTER INSERT ON timewarp.items
    FOR EACH STATEMENT EXECUTE FUNCTION timewarp.notify_items_inserted();
CREATE TRIGGER items_renewed AFTER UPDATE ON timewarp.items
    REFERENCING NEW TABLE AS renewed
    FOR EACH STATEMENT EXECUTE FUNCTION timewarp.notify_items_renewed();

CREATE VIEW timewarp.queue_status AS
SELECT
    (SELECT count(*) FROM timewarp.items WHERE status = 'NEW' AND not_before <= now()) AS claimable,
    (SELECT count(*) FROM timewarp.items WHERE status = 'NEW' AND not_before > now())  AS delayed,
    (SELECT count(*) FROM timewarp.items WHERE status = 'DISPATCHED')                  AS dispatched,
    (SELECT count(*) FROM timewarp.items WHERE status = 'COMPLETED')                   AS completed,
    (SELECT count(*) FROM timewarp.items WHERE status = 'FAILED')                      AS failed,
    now() - (SELECT min(enqueued_at) FROM timewarp.items
              WHERE status = 'NEW' AND not_before <= now())                           AS oldest_claimable_age,
    (SELECT min(not_before) FROM timewarp.items
      WHERE status = 'NEW' AND not_before > now())                                    AS next_retry_at,
    (SELECT count(*) FROM timewarp.items
      WHERE status = 'COMPLETED' AND finished_at > now() - interval '1 minute')       AS completed_last_minute,
    (SELECT count(*) FROM timewarp.items
      WHERE status = 'FAILED' AND finished_at > now() - interval '1 hour')            AS failed_last_hour;
