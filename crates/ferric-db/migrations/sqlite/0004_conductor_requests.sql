-- Scale-out (issue 10): work an API process hands to the conductor that owns a node, and
-- abort requests that reach whichever conductor's worker holds the node.

CREATE TABLE conductor_requests (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    conductor  TEXT NOT NULL,
    node_uuid  TEXT NOT NULL,
    body       TEXT NOT NULL,
    created_at TEXT NOT NULL,
    deadline   TEXT NOT NULL,
    claimed_at TEXT,
    reply      TEXT,
    replied_at TEXT
);

CREATE INDEX conductor_requests_pending_idx ON conductor_requests (conductor, id)
    WHERE claimed_at IS NULL;

CREATE TABLE node_abort_requests (
    node_uuid    TEXT PRIMARY KEY REFERENCES nodes (uuid) ON DELETE CASCADE,
    requested_at TEXT NOT NULL
);
