//! [`CliError`]: everything a client command can fail with, each variant saying what to do.

/// Everything a command can fail with; shown as `ferric: <message>` and exit code 1.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    #[error(
        "cannot connect to the Bare Metal API at {url} ({reason}). Is `ferric server` running \
         there? Start it with `ferric server`, or point the CLI at it with --url or FERRIC_URL."
    )]
    Connect { url: String, reason: String },
    /// The API refused the request; `message` is its own words.
    #[error("{message} (HTTP {status})")]
    Api { status: u16, message: String },
    #[error("the request to {url} failed: {reason}")]
    Http { url: String, reason: String },
    #[error("the answer from {url} is not JSON: {reason}")]
    Decode { url: String, reason: String },
    #[error("{0}")]
    Usage(String),
    #[error("cannot write the output: {0}")]
    Output(String),
    /// A followed node landed in a failed state (or elsewhere than the verb leads).
    #[error("node {node} is in provision state '{state}': {last_error}")]
    NodeFailed {
        node: String,
        state: String,
        last_error: String,
    },
    /// An allocation the API could not satisfy.
    #[error("allocation {allocation} failed: {last_error}")]
    AllocationFailed {
        allocation: String,
        last_error: String,
    },
    #[error(
        "gave up waiting for node {node} after {seconds} s: it is in '{state}' (target {target}); \
         it goes on without the CLI, follow it with `ferric node show {node}`"
    )]
    WaitTimeout {
        node: String,
        seconds: u64,
        state: String,
        target: String,
    },
}

impl CliError {
    /// The innermost cause's words: reqwest's outer layers only repeat the URL.
    pub(crate) fn reason(error: &(dyn std::error::Error + 'static)) -> String {
        let mut root = error;
        while let Some(source) = root.source() {
            root = source;
        }
        root.to_string()
    }
}
