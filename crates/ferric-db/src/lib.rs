//! Ferric's storage layer: one interface over SQLite and PostgreSQL.
