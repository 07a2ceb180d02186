-- Conductor liveness by lock (issue 42). A conductor that registers while holding its name's
-- lock (a session advisory lock on PostgreSQL, a file lock beside a SQLite file) marks its row;
-- such a conductor is online only while its lock is held. Rows of earlier releases, which
-- take no lock, keep the mark's default and are judged by their heartbeat alone.

ALTER TABLE conductors ADD COLUMN liveness_lock BOOLEAN NOT NULL DEFAULT FALSE;
