-- The host whose queue each change is in (the configuration's host_id): a scheduler claims
-- its own host's changes and those queued before changes had a host (''), so hosts that
-- archive their own sources can share one database (ARCHITECTURE.md, "Object store"). A
-- constant default: no row is rewritten.
ALTER TABLE timewarp.items ADD COLUMN host text NOT NULL DEFAULT '';
