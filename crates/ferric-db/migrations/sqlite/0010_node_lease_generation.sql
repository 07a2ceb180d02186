-- Fencing (issue 42). Every grant of a node lease takes a new number from one counter, larger
-- than any earlier grant's; a conductor's writes for the node name the number it holds, so one
-- whose lease was taken over meanwhile writes nothing. Leases granted by earlier releases keep
-- 0, which no new grant uses. SQLite has no sequences: the counter is a table of one row
-- (created by the first grant).

CREATE TABLE node_lease_generation (
    id    INTEGER PRIMARY KEY CHECK (id = 1),
    value INTEGER NOT NULL
);

ALTER TABLE node_leases ADD COLUMN generation INTEGER NOT NULL DEFAULT 0;
