//! A minimal QMP (QEMU Machine Protocol) client over a Unix socket.
//!
//! Why our own instead of a crate: we need five commands (`qmp_capabilities`, `query-status`,
//! `system_powerdown`, `system_reset`, `quit`, `inject-nmi`) on a line-delimited JSON protocol.
//! The QMP crates on crates.io (`qapi`, `qmp-client`) bring generated bindings for the whole
//! schema and their own async runtime glue; this file is the whole protocol we use, and its
//! message encoding is unit-tested below.
//!
//! Theory of operation: QEMU (`-qmp unix:SOCK,server=on,wait=off`) accepts one client at a
//! time. We connect per operation, read the greeting, negotiate capabilities, send one command
//! and read lines until its answer, skipping asynchronous events (`{"event": …}`) that QEMU may
//! interleave. A connection per operation keeps no state that can go stale when QEMU restarts.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;

/// How long one QMP exchange may take; QEMU answers in milliseconds even under TCG.
const QMP_TIMEOUT: Duration = Duration::from_secs(5);

#[derive(Debug, thiserror::Error)]
pub enum QmpError {
    #[error("cannot connect to QMP socket {socket}")]
    Connect {
        socket: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("QMP I/O on {socket} failed")]
    Io {
        socket: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("QMP on {socket} timed out during {command}")]
    Timeout { socket: PathBuf, command: String },
    #[error("QMP on {socket} closed the connection during {command}")]
    Closed { socket: PathBuf, command: String },
    #[error("QMP on {socket} sent a line that is not JSON: {line:?}")]
    BadMessage { socket: PathBuf, line: String },
    #[error("QMP command {command} on {socket} failed: {class}: {desc}")]
    Command {
        socket: PathBuf,
        command: String,
        class: String,
        desc: String,
    },
}

/// Encodes one QMP command as the single line QEMU expects.
pub(crate) fn encode_command(command: &str, arguments: Option<&Value>) -> String {
    let message = match arguments {
        Some(arguments) => json!({ "execute": command, "arguments": arguments }),
        None => json!({ "execute": command }),
    };
    format!("{message}\n")
}

/// What one line from QEMU means to a client waiting for a command's answer.
#[derive(Debug, PartialEq)]
pub(crate) enum Reply {
    Return(Value),
    Error {
        class: String,
        desc: String,
    },
    /// Greetings and asynchronous events: not the answer we wait for.
    Other,
}

pub(crate) fn decode_reply(message: &Value) -> Reply {
    if let Some(value) = message.get("return") {
        return Reply::Return(value.clone());
    }
    if let Some(error) = message.get("error") {
        let field = |name: &str| {
            error
                .get(name)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned()
        };
        return Reply::Error {
            class: field("class"),
            desc: field("desc"),
        };
    }
    Reply::Other
}

/// A QMP endpoint: the socket path of one QEMU process.
#[derive(Debug, Clone)]
pub struct Qmp {
    socket: PathBuf,
}

impl Qmp {
    pub fn new(socket: impl Into<PathBuf>) -> Self {
        Self {
            socket: socket.into(),
        }
    }

    pub fn socket(&self) -> &Path {
        &self.socket
    }

    /// Runs one command and returns its `return` value.
    pub async fn execute(
        &self,
        command: &str,
        arguments: Option<Value>,
    ) -> Result<Value, QmpError> {
        let exchange = self.exchange(command, arguments.as_ref());
        match tokio::time::timeout(QMP_TIMEOUT, exchange).await {
            Ok(result) => result,
            Err(_elapsed) => Err(QmpError::Timeout {
                socket: self.socket.clone(),
                command: command.to_owned(),
            }),
        }
    }

    /// `query-status`'s `status` field: "running", "paused", "shutdown", …
    pub async fn query_status(&self) -> Result<String, QmpError> {
        let value = self.execute("query-status", None).await?;
        Ok(value
            .get("status")
            .and_then(Value::as_str)
            .unwrap_or("unknown")
            .to_owned())
    }

    async fn exchange(&self, command: &str, arguments: Option<&Value>) -> Result<Value, QmpError> {
        let stream =
            UnixStream::connect(&self.socket)
                .await
                .map_err(|source| QmpError::Connect {
                    socket: self.socket.clone(),
                    source,
                })?;
        let (read_half, mut write_half) = stream.into_split();
        let mut lines = BufReader::new(read_half).lines();

        // QEMU speaks first (the greeting), then refuses every command until capabilities
        // are negotiated.
        self.read_message(&mut lines, "greeting").await?;
        self.send(&mut write_half, "qmp_capabilities", None).await?;
        self.read_answer(&mut lines, "qmp_capabilities").await?;
        self.send(&mut write_half, command, arguments).await?;
        self.read_answer(&mut lines, command).await
    }

    async fn send(
        &self,
        writer: &mut tokio::net::unix::OwnedWriteHalf,
        command: &str,
        arguments: Option<&Value>,
    ) -> Result<(), QmpError> {
        writer
            .write_all(encode_command(command, arguments).as_bytes())
            .await
            .map_err(|source| QmpError::Io {
                socket: self.socket.clone(),
                source,
            })
    }

    async fn read_message(
        &self,
        lines: &mut tokio::io::Lines<BufReader<tokio::net::unix::OwnedReadHalf>>,
        command: &str,
    ) -> Result<Value, QmpError> {
        let line = lines
            .next_line()
            .await
            .map_err(|source| QmpError::Io {
                socket: self.socket.clone(),
                source,
            })?
            .ok_or_else(|| QmpError::Closed {
                socket: self.socket.clone(),
                command: command.to_owned(),
            })?;
        serde_json::from_str(&line).map_err(|_| QmpError::BadMessage {
            socket: self.socket.clone(),
            line,
        })
    }

    async fn read_answer(
        &self,
        lines: &mut tokio::io::Lines<BufReader<tokio::net::unix::OwnedReadHalf>>,
        command: &str,
    ) -> Result<Value, QmpError> {
        loop {
            let message = self.read_message(lines, command).await?;
            match decode_reply(&message) {
                Reply::Return(value) => return Ok(value),
                Reply::Error { class, desc } => {
                    return Err(QmpError::Command {
                        socket: self.socket.clone(),
                        command: command.to_owned(),
                        class,
                        desc,
                    });
                }
                Reply::Other => continue,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_one_json_line() {
        assert_eq!(
            encode_command("query-status", None),
            "{\"execute\":\"query-status\"}\n"
        );
        let line = encode_command(
            "qom-set",
            Some(&json!({"path": "/machine/peripheral/net0", "property": "bootindex", "value": 1})),
        );
        assert!(line.ends_with('\n') && !line.trim_end().contains('\n'));
        let parsed: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(parsed["execute"], "qom-set");
        assert_eq!(parsed["arguments"]["value"], 1);
    }

    #[test]
    fn replies_are_told_apart_from_events() {
        let greeting = json!({"QMP": {"version": {}, "capabilities": []}});
        assert_eq!(decode_reply(&greeting), Reply::Other);
        let event = json!({"event": "RESET", "data": {"guest": false}, "timestamp": {}});
        assert_eq!(decode_reply(&event), Reply::Other);
        let answer = json!({"return": {"status": "running", "running": true}});
        assert_eq!(
            decode_reply(&answer),
            Reply::Return(json!({"status": "running", "running": true}))
        );
        let error = json!({"error": {"class": "CommandNotFound", "desc": "nope"}});
        assert_eq!(
            decode_reply(&error),
            Reply::Error {
                class: "CommandNotFound".into(),
                desc: "nope".into()
            }
        );
    }

    #[tokio::test]
    async fn talks_to_a_fake_qemu() {
        let dir = tempfile::tempdir().unwrap();
        let socket = dir.path().join("qmp.sock");
        let listener = tokio::net::UnixListener::bind(&socket).unwrap();
        let server = tokio::spawn(async move {
            let (stream, _) = listener.accept().await.unwrap();
            let (read_half, mut write_half) = stream.into_split();
            let mut lines = BufReader::new(read_half).lines();
            write_half
                .write_all(b"{\"QMP\": {\"version\": {}, \"capabilities\": []}}\n")
                .await
                .unwrap();
            let first = lines.next_line().await.unwrap().unwrap();
            assert!(first.contains("qmp_capabilities"));
            write_half.write_all(b"{\"return\": {}}\n").await.unwrap();
            let second = lines.next_line().await.unwrap().unwrap();
            assert!(second.contains("query-status"));
            write_half
                .write_all(b"{\"event\": \"STOP\", \"timestamp\": {}}\n{\"return\": {\"status\": \"running\"}}\n")
                .await
                .unwrap();
        });
        let status = Qmp::new(&socket).query_status().await.unwrap();
        assert_eq!(status, "running");
        server.await.unwrap();
    }
}
