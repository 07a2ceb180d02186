-- Runbook traits and description (API 1.112). A runbook's traits are one JSON list, read and
-- written whole like a node's. Existing runbooks were usable on nodes with their name as a
-- trait: that trait becomes their list.

ALTER TABLE runbooks ADD COLUMN traits TEXT NOT NULL DEFAULT '[]';
ALTER TABLE runbooks ADD COLUMN description TEXT;

UPDATE runbooks SET traits = json_array(name);
