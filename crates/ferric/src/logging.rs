//! Log set-up: `tracing` to stderr, as text or JSON lines, filtered by `log_level`.

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;

use crate::config::{LogFormat, Settings};

pub(crate) fn init(settings: &Settings) {
    let filter = EnvFilter::try_new(&settings.log_level).unwrap_or_else(|error| {
        eprintln!(
            "ferric: ignoring log_level {:?}: {error}",
            settings.log_level
        );
        EnvFilter::new("info")
    });
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // Colour codes only for people at a terminal, never into log files or journald.
        .with_ansi(std::io::stderr().is_terminal());
    match settings.log_format {
        LogFormat::Text => builder.init(),
        LogFormat::Json => builder.json().flatten_event(true).init(),
    }
}
