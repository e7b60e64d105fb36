-- Database errors a process keeps meeting: a statement the server refuses (a violated
-- constraint, a missing privilege, a bug), not an outage. How many since the process
-- started, and the one still failing with the time it began, so `timewarp status` shows a
-- scheduler or a monitor stuck on one while the rest of its work goes on.
ALTER TABLE timewarp.schedulers
    ADD COLUMN db_errors      bigint NOT NULL DEFAULT 0,
    ADD COLUMN db_error       text,
    ADD COLUMN db_error_since timestamptz;

ALTER TABLE timewarp.monitors
    ADD COLUMN db_errors      bigint NOT NULL DEFAULT 0,
    ADD COLUMN db_error       text,
    ADD COLUMN db_error_since timestamptz;
