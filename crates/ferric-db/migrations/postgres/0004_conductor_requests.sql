-- Scale-out (issue 10): work an API process hands to the conductor that owns a node, and
-- abort requests that reach whichever conductor's worker holds the node.

CREATE TABLE conductor_requests (
    id         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    conductor  TEXT NOT NULL,
    node_uuid  UUID NOT NULL,
    body       TEXT NOT NULL,
    created_at TIMESTAMPTZ NOT NULL,
    deadline   TIMESTAMPTZ NOT NULL,
    claimed_at TIMESTAMPTZ,
    reply      TEXT,
    replied_at TIMESTAMPTZ
);

CREATE INDEX conductor_requests_pending_idx ON conductor_requests (conductor, id)
    WHERE claimed_at IS NULL;

CREATE TABLE node_abort_requests (
    node_uuid    UUID PRIMARY KEY REFERENCES nodes (uuid) ON DELETE CASCADE,
    requested_at TIMESTAMPTZ NOT NULL
);
