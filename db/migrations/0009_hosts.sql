-- Every host on one database, for `timewarp status` (ARCHITECTURE.md, "Object store"):
-- the queue's counters kept by host as well as by status, and each monitor's row naming
-- its host_id and what its archive has not shipped yet.

-- Writers are held off while the counters are rebuilt by host: the new triggers go on from
-- exactly these counts.
LOCK TABLE timewarp.items IN SHARE MODE;

DELETE FROM timewarp.item_counts;
ALTER TABLE timewarp.item_counts ADD COLUMN host text NOT NULL DEFAULT '';
ALTER TABLE timewarp.item_counts DROP CONSTRAINT item_counts_pkey;
ALTER TABLE timewarp.item_counts ADD PRIMARY KEY (host, status, slot);
INSERT INTO timewarp.item_counts (host, status, slot, n)
SELECT host, status, 0, count(*) FROM timewarp.items GROUP BY host, status;

-- As in 0003, by host and status. Counter rows are always locked in (host, status) order,
-- so two writers sharing a slot cannot deadlock on them.
CREATE OR REPLACE FUNCTION timewarp.count_items() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    my_slot integer := pg_backend_pid() % 16;
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO timewarp.item_counts AS c (host, status, slot, n)
        SELECT host, status, my_slot, count(*) FROM counted_new
         GROUP BY host, status ORDER BY host, status
        ON CONFLICT (host, status, slot) DO UPDATE SET n = c.n + excluded.n;
    ELSIF TG_OP = 'UPDATE' THEN
        INSERT INTO timewarp.item_counts AS c (host, status, slot, n)
        SELECT host, status, my_slot, sum(d)
          FROM (SELECT host, status, -1 AS d FROM counted_old
                UNION ALL
                SELECT host, status, 1 FROM counted_new) changes
         GROUP BY host, status HAVING sum(d) <> 0 ORDER BY host, status
        ON CONFLICT (host, status, slot) DO UPDATE SET n = c.n + excluded.n;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO timewarp.item_counts AS c (host, status, slot, n)
        SELECT host, status, my_slot, -count(*) FROM counted_old
         GROUP BY host, status ORDER BY host, status
        ON CONFLICT (host, status, slot) DO UPDATE SET n = c.n + excluded.n;
    ELSIF TG_OP = 'TRUNCATE' THEN
        DELETE FROM timewarp.item_counts;
    END IF;
    RETURN NULL;
END $$;

DROP FUNCTION timewarp.recount_items();
CREATE FUNCTION timewarp.recount_items() RETURNS SETOF timewarp.item_counts
LANGUAGE plpgsql AS $$
BEGIN
    LOCK TABLE timewarp.items IN SHARE MODE;
    DELETE FROM timewarp.item_counts;
    INSERT INTO timewarp.item_counts (host, status, slot, n)
    SELECT host, status, 0, count(*) FROM timewarp.items GROUP BY host, status;
    RETURN QUERY SELECT * FROM timewarp.item_counts ORDER BY host, status;
END $$;

-- The monitor's host_id (`host` is the machine's name), and what its archive has not
-- shipped to its pack store, as the monitor last read it (after each shipping run). NULL
-- shipping columns: no store configured, or not read yet.
ALTER TABLE timewarp.monitors
    ADD COLUMN host_id                text NOT NULL DEFAULT '',
    ADD COLUMN ship_store             text,         -- <endpoint>/<bucket>/<prefix>
    ADD COLUMN ship_read_at           timestamptz,  -- when the figures below were read
    ADD COLUMN ship_packs_pending     bigint,
    ADD COLUMN ship_bytes_pending     bigint,
    ADD COLUMN ship_oldest_pending_at timestamptz,  -- the oldest unshipped pack's birth
    ADD COLUMN ship_removals_pending  bigint,
    ADD COLUMN ship_last_shipped_at   timestamptz,
    ADD COLUMN catalog_shipped_at     timestamptz,  -- the store's newest catalog snapshot
    ADD COLUMN ship_error             text;         -- the last run's failure, or why unread

-- Each host's queue: its counters summed (host '': items queued before items had a host).
CREATE VIEW timewarp.host_counts AS
SELECT host,
       coalesce(sum(n) FILTER (WHERE status = 'NEW'), 0)::bigint        AS new,
       coalesce(sum(n) FILTER (WHERE status = 'DISPATCHED'), 0)::bigint AS dispatched,
       coalesce(sum(n) FILTER (WHERE status = 'COMPLETED'), 0)::bigint  AS completed,
       coalesce(sum(n) FILTER (WHERE status = 'FAILED'), 0)::bigint     AS failed
  FROM timewarp.item_counts
 GROUP BY host;
