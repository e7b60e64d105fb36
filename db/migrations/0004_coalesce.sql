-- Coalescing support: is a MOVE pending that involves this path (as its source or
-- destination, or as an ancestor directory of either)? Changes to such a path must keep
-- their order relative to the move, so they are not folded together.
CREATE INDEX items_pending_moves ON timewarp.items (id)
    WHERE op = 'MOVE' AND status IN ('NEW', 'DISPATCHED');

CREATE FUNCTION timewarp.move_pending(p text) RETURNS boolean
LANGUAGE sql STABLE AS $$
    SELECT EXISTS (
        SELECT 1 FROM timewarp.items m
         WHERE m.op = 'MOVE' AND m.status IN ('NEW', 'DISPATCHED')
           AND (m.path = p OR m.dest_path = p
                OR left(p, length(m.path) + 1) = m.path || '/'
                OR left(p, length(m.dest_path) + 1) = m.dest_path || '/'))
$$;
