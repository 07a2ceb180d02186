//! The vocabulary of commands: parameters, errors, progress and the result objects of IPA's
//! protocol (§4.1: `id`, `command_name`, `command_status`, `command_error`,
//! `command_result`). Every handler uses it; the registry of commands is `registry.rs`.

use std::sync::{Arc, Mutex, PoisonError};

use serde::Serialize;
use serde_json::{Value, json};
use tokio::sync::watch;

/// A command's parameters: always a JSON object.
pub type Params = serde_json::Map<String, Value>;

/// Where a command stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum CommandStatus {
    Running,
    Succeeded,
    Failed,
    /// A clean step was asked for with another hardware manager version than ours.
    CleanVersionMismatch,
}

/// The error object of a failed command, as IPA serialises its `RESTError`s.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CommandError {
    /// The error class, e.g. `ImageChecksumError`.
    #[serde(rename = "type")]
    pub kind: String,
    /// An HTTP-like code (400 for bad parameters, 500 otherwise).
    pub code: u16,
    /// A short message.
    pub message: String,
    /// What happened, with the values that matter.
    pub details: String,
    /// Marks the clean-version mismatch, which has a status of its own.
    #[serde(skip)]
    pub version_mismatch: bool,
}

impl CommandError {
    /// A failure of kind `kind` (500).
    pub fn new(kind: &str, message: &str, details: impl Into<String>) -> CommandError {
        CommandError {
            kind: kind.to_owned(),
            code: 500,
            message: message.to_owned(),
            details: details.into(),
            version_mismatch: false,
        }
    }

    /// The parameters are wrong (400): checked before the command starts.
    pub fn invalid_params(details: impl Into<String>) -> CommandError {
        CommandError {
            code: 400,
            ..CommandError::new(
                "InvalidCommandParamsError",
                "Invalid command parameters",
                details,
            )
        }
    }

    /// Anything else that went wrong inside a command.
    pub fn internal(details: impl Into<String>) -> CommandError {
        CommandError::new("CommandExecutionError", "Command execution failed", details)
    }
}

/// One command's result as the API shows it.
#[derive(Debug, Clone, Serialize)]
pub struct CommandResult {
    pub id: String,
    pub command_name: String,
    pub command_status: CommandStatus,
    pub command_error: Option<CommandError>,
    pub command_result: Option<Value>,
}

/// A command in the agent's history: its result, updated while it runs, and a signal for
/// `?wait=true`.
#[derive(Debug)]
pub struct Record {
    result: Mutex<CommandResult>,
    done: watch::Sender<bool>,
}

impl Record {
    pub(crate) fn new(command_name: &str) -> Arc<Record> {
        let (done, _) = watch::channel(false);
        Arc::new(Record {
            result: Mutex::new(CommandResult {
                id: uuid::Uuid::new_v4().to_string(),
                command_name: command_name.to_owned(),
                command_status: CommandStatus::Running,
                command_error: None,
                command_result: None,
            }),
            done,
        })
    }

    /// A copy of the result as it is now.
    pub fn snapshot(&self) -> CommandResult {
        self.result
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    pub(crate) fn is_running(&self) -> bool {
        self.snapshot().command_status == CommandStatus::Running
    }

    pub(crate) fn id(&self) -> String {
        self.snapshot().id
    }

    /// Records the outcome and wakes the waiters.
    pub(crate) fn finish(&self, outcome: Result<Option<Value>, CommandError>) {
        {
            let mut result = self.result.lock().unwrap_or_else(PoisonError::into_inner);
            match outcome {
                Ok(value) => {
                    result.command_status = CommandStatus::Succeeded;
                    result.command_result = value;
                }
                Err(error) => {
                    result.command_status = if error.version_mismatch {
                        CommandStatus::CleanVersionMismatch
                    } else {
                        CommandStatus::Failed
                    };
                    result.command_error = Some(error);
                }
            }
        }
        self.done.send_replace(true);
    }

    /// Waits until the command has finished.
    pub async fn wait(&self) {
        let mut done = self.done.subscribe();
        // The sender lives in `self`, so the channel cannot close while we wait.
        let _ = done.wait_for(|finished| *finished).await;
    }
}

/// A running command's handle for reporting progress: sets `command_result` while the status
/// is still `RUNNING` (e.g. `{"bytes_written": …, "total": …}`).
#[derive(Debug, Clone)]
pub struct Progress(Arc<Record>);

impl Progress {
    pub(crate) fn new(record: Arc<Record>) -> Progress {
        Progress(record)
    }

    /// A handle that reports nowhere (for code paths run outside a command).
    pub fn detached() -> Progress {
        Progress(Record::new("detached"))
    }

    /// Replaces the command's interim result.
    pub fn set(&self, value: Value) {
        let mut result = self.0.result.lock().unwrap_or_else(PoisonError::into_inner);
        if result.command_status == CommandStatus::Running {
            result.command_result = Some(value);
        }
    }
}

/// Wraps a plain message as IPA does: `{"result": "<command>: <text>"}`.
pub fn message_result(command: &str, text: &str) -> Value {
    json!({ "result": format!("{command}: {text}") })
}

/// Reads a required string parameter.
pub fn string_param<'a>(params: &'a Params, key: &str) -> Result<&'a str, CommandError> {
    params
        .get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| CommandError::invalid_params(format!("parameter {key:?} must be a string")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_serialise_with_ipa_field_names() {
        let record = Record::new("sync");
        record.finish(Err(CommandError::internal("boom")));
        let value = serde_json::to_value(record.snapshot()).expect("serialise");
        assert_eq!(value["command_status"], "FAILED");
        assert_eq!(value["command_error"]["type"], "CommandExecutionError");
        assert_eq!(value["command_error"]["details"], "boom");
        assert_eq!(value["command_result"], Value::Null);
    }
}
