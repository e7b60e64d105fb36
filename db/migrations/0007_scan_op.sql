-- The op SCAN: one item for a directory and its entries (not what lies in its
-- subdirectories), which a scan queues for a directory where many entries differ from the
-- archive instead of one item per entry (archive/FORMAT.md, "Operations"). The check is
-- only widened, so every row meets it; validating it reads the table once.
ALTER TABLE timewarp.items DROP CONSTRAINT items_op_check;
ALTER TABLE timewarp.items ADD CONSTRAINT items_op_check
    CHECK (op IN ('UPDATE', 'STAT', 'DELETE', 'MOVE', 'SCAN')) NOT VALID;
ALTER TABLE timewarp.items VALIDATE CONSTRAINT items_op_check;
