-- Fencing (issue 42). Every grant of a node lease takes a new number from one sequence, larger
-- than any earlier grant's; a conductor's writes for the node name the number it holds, so one
-- whose lease was taken over meanwhile writes nothing. Leases granted by earlier releases keep
-- 0, which no new grant uses.

CREATE SEQUENCE node_lease_generation;

ALTER TABLE node_leases ADD COLUMN generation BIGINT NOT NULL DEFAULT 0;
