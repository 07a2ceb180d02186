//! `ferric node console NODE`: attach to a node's serial console over the API's WebSocket
//! (`GET /v1/nodes/{node}/console/stream`), or enable, disable or show it
//! (`/v1/nodes/{node}/states/console`).
//!
//! Attached, the terminal is put in raw mode (when stdin is one) so every key reaches the
//! machine; `~.` at the start of a line or Ctrl-] leaves (as ssh and telnet do). With stdin not
//! a terminal (scripts, tests) input is forwarded as it comes and its end does not detach:
//! `--timeout` or the server closing the console ends the session.

use std::io::{IsTerminal, Read, Write};
use std::net::TcpStream;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::json;
use tungstenite::client::IntoClientRequest;
use tungstenite::handshake::HandshakeError;
use tungstenite::http::HeaderValue;
use tungstenite::protocol::frame::coding::CloseCode;
use tungstenite::{Message, WebSocket};

use crate::context::node_path;
use crate::{CliError, Context};

/// Ctrl-]: telnet's escape character.
const CTRL_BRACKET: u8 = 0x1D;

/// `ferric node console`.
#[derive(Debug, clap::Args)]
pub(crate) struct ConsoleArgs {
    /// Name or UUID of the node.
    node: String,
    /// Enable the console (PUT …/states/console {"enabled": true}) and return.
    #[arg(long, conflicts_with_all = ["disable", "show"])]
    enable: bool,
    /// Disable the console and return.
    #[arg(long, conflicts_with_all = ["enable", "show"])]
    disable: bool,
    /// Show whether the console is enabled and where it is relayed (console_info).
    #[arg(long, conflicts_with_all = ["enable", "disable"])]
    show: bool,
    /// Detach after this many seconds (for scripts; attached sessions otherwise last until
    /// the escape sequence or until the console is disabled).
    #[arg(long, value_name = "SECONDS")]
    timeout: Option<u64>,
}

pub(crate) fn run(context: &Context, args: ConsoleArgs) -> Result<(), CliError> {
    let client = &context.client;
    let path = format!("{}/states/console", node_path(&args.node));
    if args.enable || args.disable {
        client.put(&path, &json!({"enabled": args.enable}))?;
        return Ok(());
    }
    if args.show {
        let record = client.get(&path, &[])?;
        return context.show(&record, None);
    }
    attach(context, &args)
}

/// Undoes raw mode however the session ends.
struct RawMode;

impl RawMode {
    fn enable() -> Result<Option<Self>, CliError> {
        if !std::io::stdin().is_terminal() {
            return Ok(None);
        }
        crossterm::terminal::enable_raw_mode().map_err(|error| {
            CliError::Output(format!("cannot put the terminal in raw mode: {error}"))
        })?;
        Ok(Some(Self))
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        let _ = crossterm::terminal::disable_raw_mode();
    }
}

/// What the escape-sequence watcher decided about a chunk of keystrokes.
#[derive(Debug, PartialEq, Eq)]
enum Keys {
    Send(Vec<u8>),
    /// Send these, then leave.
    Leave(Vec<u8>),
}

/// Finds `~.` at the start of a line and Ctrl-] in what is typed; `at_line_start` carries
/// across chunks. A `~` at a line start is held back until the next key shows it is not the
/// escape (then both are sent).
#[derive(Debug)]
struct Escape {
    at_line_start: bool,
    tilde_pending: bool,
}

impl Escape {
    fn new() -> Self {
        Self {
            at_line_start: true,
            tilde_pending: false,
        }
    }

    fn feed(&mut self, chunk: &[u8]) -> Keys {
        let mut out = Vec::with_capacity(chunk.len());
        for &byte in chunk {
            if byte == CTRL_BRACKET {
                return Keys::Leave(out);
            }
            if self.tilde_pending {
                self.tilde_pending = false;
                if byte == b'.' {
                    return Keys::Leave(out);
                }
                out.push(b'~');
            } else if self.at_line_start && byte == b'~' {
                self.tilde_pending = true;
                self.at_line_start = false;
                continue;
            }
            out.push(byte);
            self.at_line_start = matches!(byte, b'\r' | b'\n');
        }
        Keys::Send(out)
    }
}

fn stream_url(api: &str, node: &str) -> Result<String, CliError> {
    let rest = api.strip_prefix("http://").ok_or_else(|| {
        CliError::Usage(format!(
            "ferric node console attaches over plain http:// only for now, and the API is at \
             {api}; attach through the web UI, or to the TCP relay `ferric node console {node} \
             --show` names (from a host that reaches it)"
        ))
    })?;
    Ok(format!("ws://{rest}{}/console/stream", node_path(node)))
}

fn connect(context: &Context, node: &str) -> Result<WebSocket<TcpStream>, CliError> {
    let connection = context.client.connection();
    let url = stream_url(&connection.url, node)?;
    let failed = |reason: String| CliError::Http {
        url: url.clone(),
        reason,
    };
    let mut request = url
        .as_str()
        .into_client_request()
        .map_err(|error| failed(error.to_string()))?;
    let headers = request.headers_mut();
    if let Ok(version) = HeaderValue::from_str(&connection.api_version) {
        headers.insert("X-OpenStack-Ironic-API-Version", version);
    }
    if let Some(username) = &connection.username {
        use base64::Engine as _;
        let pair = format!(
            "{username}:{}",
            connection.password.as_deref().unwrap_or_default()
        );
        let token = base64::engine::general_purpose::STANDARD.encode(pair);
        if let Ok(value) = HeaderValue::from_str(&format!("Basic {token}")) {
            headers.insert("Authorization", value);
        }
    }
    if let Some(token) = &connection.token
        && let Ok(value) = HeaderValue::from_str(token)
    {
        headers.insert("X-Auth-Token", value);
    }
    let uri = request.uri();
    let host = (
        uri.host().unwrap_or_default().to_owned(),
        uri.port_u16().unwrap_or(80),
    );
    let stream = TcpStream::connect(host).map_err(|error| CliError::Connect {
        url: connection.url.clone(),
        reason: error.to_string(),
    })?;
    let (socket, _) = tungstenite::client(request, stream).map_err(|error| match error {
        HandshakeError::Failure(tungstenite::Error::Http(response)) => {
            let status = response.status().as_u16();
            let body = response
                .body()
                .as_deref()
                .map(String::from_utf8_lossy)
                .unwrap_or_default()
                .into_owned();
            CliError::Api {
                status,
                message: crate::client::error_message(&body).unwrap_or(body),
            }
        }
        HandshakeError::Failure(other) => failed(other.to_string()),
        HandshakeError::Interrupted(_) => failed("the WebSocket handshake was interrupted".into()),
    })?;
    Ok(socket)
}

fn attach(context: &Context, args: &ConsoleArgs) -> Result<(), CliError> {
    let mut socket = connect(context, &args.node)?;
    socket
        .get_ref()
        .set_read_timeout(Some(Duration::from_millis(50)))
        .map_err(|error| CliError::Output(error.to_string()))?;
    let interactive = std::io::stdin().is_terminal();
    if interactive {
        eprint!(
            "[attached to the console of {}; leave with ~. at the start of a line or Ctrl-]]\r\n",
            args.node
        );
    }
    let _raw = RawMode::enable()?;
    let (keys_tx, keys) = mpsc::channel::<Vec<u8>>();
    std::thread::spawn(move || {
        let mut stdin = std::io::stdin().lock();
        let mut buffer = [0u8; 1024];
        loop {
            match stdin.read(&mut buffer) {
                Ok(0) | Err(_) => return,
                Ok(length) => {
                    if keys_tx.send(buffer[..length].to_vec()).is_err() {
                        return;
                    }
                }
            }
        }
    });
    let deadline = args
        .timeout
        .map(|seconds| Instant::now() + Duration::from_secs(seconds));
    let mut escape = Escape::new();
    let mut stdout = std::io::stdout().lock();
    let output_error = |error: std::io::Error| CliError::Output(error.to_string());
    loop {
        if deadline.is_some_and(|deadline| Instant::now() >= deadline) {
            let _ = socket.close(None);
            return Ok(());
        }
        while let Ok(chunk) = keys.try_recv() {
            let (send, leave) = match escape.feed(&chunk) {
                Keys::Send(send) => (send, false),
                Keys::Leave(send) => (send, true),
            };
            if !send.is_empty() {
                socket
                    .send(Message::Binary(send.into()))
                    .map_err(|error| CliError::Output(error.to_string()))?;
            }
            if leave {
                let _ = socket.close(None);
                if interactive {
                    eprint!("\r\n[detached]\r\n");
                }
                return Ok(());
            }
        }
        match socket.read() {
            Ok(Message::Binary(bytes)) => {
                stdout.write_all(&bytes).map_err(output_error)?;
                stdout.flush().map_err(output_error)?;
            }
            Ok(Message::Text(text)) => {
                stdout.write_all(text.as_bytes()).map_err(output_error)?;
                stdout.flush().map_err(output_error)?;
            }
            Ok(Message::Close(frame)) => {
                let reason = frame.map(|frame| (frame.code, frame.reason.to_string()));
                return match reason {
                    Some((CloseCode::Policy, reason)) => Err(CliError::Api {
                        status: 403,
                        message: format!("the console refused input: {reason}"),
                    }),
                    Some((_, reason)) if !reason.is_empty() => {
                        eprint!("\r\n[console closed: {reason}]\r\n");
                        Ok(())
                    }
                    _ => Ok(()),
                };
            }
            Ok(_) => {}
            Err(tungstenite::Error::Io(error))
                if matches!(
                    error.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) => {}
            Err(tungstenite::Error::ConnectionClosed | tungstenite::Error::AlreadyClosed) => {
                return Ok(());
            }
            Err(error) => {
                return Err(CliError::Http {
                    url: context.client.url().to_owned(),
                    reason: error.to_string(),
                });
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tilde_dot_at_a_line_start_leaves() {
        let mut escape = Escape::new();
        assert_eq!(escape.feed(b"ls\r"), Keys::Send(b"ls\r".to_vec()));
        assert_eq!(escape.feed(b"~."), Keys::Leave(Vec::new()));
    }

    #[test]
    fn a_tilde_elsewhere_or_followed_by_another_key_is_sent() {
        let mut escape = Escape::new();
        assert_eq!(escape.feed(b"a~."), Keys::Send(b"a~.".to_vec()));
        let mut escape = Escape::new();
        assert_eq!(escape.feed(b"~"), Keys::Send(Vec::new()));
        assert_eq!(escape.feed(b"x"), Keys::Send(b"~x".to_vec()));
    }

    #[test]
    fn ctrl_bracket_leaves_after_what_came_before() {
        let mut escape = Escape::new();
        assert_eq!(escape.feed(b"ab\x1dcd"), Keys::Leave(b"ab".to_vec()));
    }

    #[test]
    fn the_stream_url_follows_the_api_url() {
        assert_eq!(
            stream_url("http://127.0.0.1:6385", "n1").unwrap(),
            "ws://127.0.0.1:6385/v1/nodes/n1/console/stream"
        );
        assert!(stream_url("https://api", "n1").is_err());
    }
}
