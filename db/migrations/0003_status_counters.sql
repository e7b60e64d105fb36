-- Fast status with millions of rows: live per-status counts kept by triggers, a status
-- view that reads them instead of counting the table, and an index for the history of a
-- MOVE's destination.
--
-- timewarp.item_counts holds, per status, the change in row count made by each writer.
-- Rows are spread over 16 slots (by backend pid) so that concurrent writers (several
-- schedulers, the monitor, `timewarp enqueue`) rarely wait on the same counter row; the
-- count of a status is the sum over its slots. Every INSERT, UPDATE, DELETE and TRUNCATE
-- of timewarp.items keeps the sums exact, in the same transaction as the change.

CREATE TABLE timewarp.item_counts (
    status text    NOT NULL,
    slot   integer NOT NULL,
    n      bigint  NOT NULL,
    PRIMARY KEY (status, slot)
);

-- Statement-level: one upsert per status touched, whatever the number of rows. Counter
-- rows are always locked in status order, so two writers sharing a slot cannot deadlock
-- on them.
CREATE FUNCTION timewarp.count_items() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    my_slot integer := pg_backend_pid() % 16;
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO timewarp.item_counts AS c (status, slot, n)
        SELECT status, my_slot, count(*) FROM counted_new GROUP BY status ORDER BY status
        ON CONFLICT (status, slot) DO UPDATE SET n = c.n + excluded.n;
    ELSIF TG_OP = 'UPDATE' THEN
        INSERT INTO timewarp.item_counts AS c (status, slot, n)
        SELECT status, my_slot, sum(d)
          FROM (SELECT status, -1 AS d FROM counted_old
                UNION ALL
                SELECT status, 1 FROM counted_new) changes
         GROUP BY status HAVING sum(d) <> 0 ORDER BY status
        ON CONFLICT (status, slot) DO UPDATE SET n = c.n + excluded.n;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO timewarp.item_counts AS c (status, slot, n)
        SELECT status, my_slot, -count(*) FROM counted_old GROUP BY status ORDER BY status
        ON CONFLICT (status, slot) DO UPDATE SET n = c.n + excluded.n;
    ELSIF TG_OP = 'TRUNCATE' THEN
        DELETE FROM timewarp.item_counts;
    END IF;
    RETURN NULL;
END $$;

-- Creating the triggers locks timewarp.items against writes until this migration commits,
-- so the initial counts below are exactly those the triggers go on from.
CREATE TRIGGER items_counted_insert AFTER INSERT ON timewarp.items
    REFERENCING NEW TABLE AS counted_new
    FOR EACH STATEMENT EXECUTE FUNCTION timewarp.count_items();
CREATE TRIGGER items_counted_update AFTER UPDATE ON timewarp.items
    REFERENCING OLD TABLE AS counted_old NEW TABLE AS counted_new
    FOR EACH STATEMENT EXECUTE FUNCTION timewarp.count_items();
CREATE TRIGGER items_counted_delete AFTER DELETE ON timewarp.items
    REFERENCING OLD TABLE AS counted_old
    FOR EACH STATEMENT EXECUTE FUNCTION timewarp.count_items();
CREATE TRIGGER items_counted_truncate AFTER TRUNCATE ON timewarp.items
    FOR EACH STATEMENT EXECUTE FUNCTION timewarp.count_items();

INSERT INTO timewarp.item_counts (status, slot, n)
SELECT status, 0, count(*) FROM timewarp.items GROUP BY status;

-- Recounts from the table, should the counters ever be doubted (they are kept by the
-- triggers above; a session with session_replication_role = replica skips triggers).
-- Blocks writers to timewarp.items while it counts. Returns the new counts.
CREATE FUNCTION timewarp.recount_items() RETURNS SETOF timewarp.item_counts
LANGUAGE plpgsql AS $$
BEGIN
    LOCK TABLE timewarp.items IN SHARE MODE;
    DELETE FROM timewarp.item_counts;
    INSERT INTO timewarp.item_counts (status, slot, n)
    SELECT status, 0, count(*) FROM timewarp.items GROUP BY status;
    RETURN QUERY SELECT * FROM timewarp.item_counts ORDER BY status;
END $$;

-- Same columns as before (0001), now cheap at any table size: totals come from the
-- counters; only the delayed retries, the last minute's completions and the last hour's
-- failures are counted, each through its own small partial-index range. The oldest
-- claimable item is looked for among the first claimable ids (ids follow queueing order).
CREATE OR REPLACE VIEW timewarp.queue_status AS
WITH totals AS (
    SELECT coalesce(sum(n) FILTER (WHERE status = 'NEW'), 0)::bigint        AS new,
           coalesce(sum(n) FILTER (WHERE status = 'DISPATCHED'), 0)::bigint AS dispatched,
           coalesce(sum(n) FILTER (WHERE status = 'COMPLETED'), 0)::bigint  AS completed,
           coalesce(sum(n) FILTER (WHERE status = 'FAILED'), 0)::bigint     AS failed
      FROM timewarp.item_counts),
delayed AS (
    SELECT count(*) AS n, min(not_before) AS next
      FROM timewarp.items WHERE status = 'NEW' AND not_before > now())
SELECT
    greatest(t.new - d.n, 0)::bigint                                               AS claimable,
    d.n                                                                            AS delayed,
    t.dispatched                                                                   AS dispatched,
    t.completed                                                                    AS completed,
    t.failed                                                                       AS failed,
    now() - (SELECT min(enqueued_at) FROM (
                SELECT enqueued_at FROM timewarp.items
                 WHERE status = 'NEW' AND not_before <= now()
                 ORDER BY id LIMIT 100) first_claimable)                           AS oldest_claimable_age,
    d.next                                                                         AS next_retry_at,
    (SELECT count(*) FROM timewarp.items
      WHERE status = 'COMPLETED' AND finished_at > now() - interval '1 minute')    AS completed_last_minute,
    (SELECT count(*) FROM timewarp.items
      WHERE status = 'FAILED' AND finished_at > now() - interval '1 hour')         AS failed_last_hour
FROM totals t CROSS JOIN delayed d;

-- History of a path includes the MOVEs that renamed something to it.
CREATE INDEX items_dest_path ON timewarp.items (dest_path) WHERE dest_path IS NOT NULL;
