//! Ferric's HTTP API.
