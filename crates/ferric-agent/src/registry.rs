//! The command registry: every `extension.command` the agent knows, with IPA's names, its
//! mode and its handler; and running one ([`Agent::execute`]): checked, recorded in the
//! agent's history, run on the blocking pool. Above the handlers, which know only the
//! vocabulary of `commands.rs` and the agent's state (`agent.rs`).

use std::sync::Arc;

use serde_json::Value;

use crate::agent::{Agent, Invocation};
use crate::commands::{CommandError, CommandResult, Params, Progress};

/// Why a command was not started (the API maps each to a status code).
#[derive(Debug, thiserror::Error)]
pub enum ExecuteError {
    #[error(transparent)]
    Lookup(#[from] LookupError),
    #[error("Invalid command parameters: {}", .0.details)]
    InvalidParams(CommandError),
    #[error("Agent is busy")]
    Busy,
}

/// A command handler: a blocking function (run on the blocking pool).
pub type Handler = fn(&Invocation) -> Result<Option<Value>, CommandError>;

/// Whether the HTTP call waits for the command.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// Finishes before the HTTP response.
    Sync,
    /// Answers `RUNNING` at once; polled with `GET /v1/commands`.
    Async,
}

/// One entry of the registry.
#[derive(Debug)]
pub struct CommandSpec {
    /// `extension.command`.
    pub name: &'static str,
    pub mode: Mode,
    /// Checks the parameters before the command is recorded (→ 400).
    pub validate: fn(&Params) -> Result<(), CommandError>,
    pub run: Handler,
}

fn any_params(_: &Params) -> Result<(), CommandError> {
    Ok(())
}

/// Every command the agent knows, with IPA's names.
pub static REGISTRY: &[CommandSpec] = &[
    CommandSpec {
        name: "standby.prepare_image",
        mode: Mode::Async,
        validate: crate::image::validate_prepare_image,
        run: crate::image::prepare_image_command,
    },
    CommandSpec {
        name: "standby.power_off",
        mode: Mode::Async,
        validate: any_params,
        run: crate::power::power_off_command,
    },
    CommandSpec {
        name: "standby.run_image",
        mode: Mode::Async,
        validate: any_params,
        run: crate::power::run_image_command,
    },
    CommandSpec {
        name: "standby.sync",
        mode: Mode::Sync,
        validate: any_params,
        run: crate::power::sync_command,
    },
    CommandSpec {
        name: "standby.get_partition_uuids",
        mode: Mode::Sync,
        validate: any_params,
        run: crate::image::partition_uuids_command,
    },
    CommandSpec {
        name: "image.install_bootloader",
        mode: Mode::Async,
        validate: crate::image::bootloader::validate_install_bootloader,
        run: crate::image::bootloader::install_bootloader_command,
    },
    CommandSpec {
        name: "clean.get_clean_steps",
        mode: Mode::Sync,
        validate: any_params,
        run: crate::steps::get_clean_steps_command,
    },
    CommandSpec {
        name: "clean.execute_clean_step",
        mode: Mode::Async,
        validate: crate::steps::validate_execute_step,
        run: crate::steps::execute_clean_step_command,
    },
    CommandSpec {
        name: "deploy.get_deploy_steps",
        mode: Mode::Sync,
        validate: any_params,
        run: crate::steps::get_deploy_steps_command,
    },
    CommandSpec {
        name: "deploy.execute_deploy_step",
        mode: Mode::Async,
        validate: crate::steps::validate_execute_step,
        run: crate::steps::execute_deploy_step_command,
    },
    CommandSpec {
        name: "service.get_service_steps",
        mode: Mode::Sync,
        validate: any_params,
        run: crate::steps::get_service_steps_command,
    },
    CommandSpec {
        name: "service.execute_service_step",
        mode: Mode::Async,
        validate: crate::steps::validate_execute_step,
        run: crate::steps::execute_service_step_command,
    },
    CommandSpec {
        name: "rescue.finalize_rescue",
        mode: Mode::Sync,
        validate: crate::rescue::validate,
        run: crate::rescue::finalize_rescue_command,
    },
    CommandSpec {
        name: "poll.get_hardware_info",
        mode: Mode::Sync,
        validate: any_params,
        run: crate::inventory::get_hardware_info_command,
    },
    CommandSpec {
        name: "poll.list_hardware_info",
        mode: Mode::Sync,
        validate: any_params,
        run: crate::inventory::get_hardware_info_command,
    },
    CommandSpec {
        name: "log.collect_system_logs",
        mode: Mode::Sync,
        validate: any_params,
        run: crate::logs::collect_system_logs_command,
    },
];

/// Why a command name was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LookupError {
    /// No command of that extension (404 in IPA).
    #[error("Extension {0} not found")]
    UnknownExtension(String),
    /// The extension exists, the command does not (400).
    #[error("Command {command} not found in extension {extension}")]
    UnknownCommand { extension: String, command: String },
    /// Not of the form `extension.command` (400).
    #[error("Invalid command name {0:?}: expected <extension>.<command>")]
    Malformed(String),
}

/// Finds a command by its full name.
pub fn find(name: &str) -> Result<&'static CommandSpec, LookupError> {
    let Some((extension, command)) = name.split_once('.') else {
        return Err(LookupError::Malformed(name.to_owned()));
    };
    if let Some(spec) = REGISTRY.iter().find(|spec| spec.name == name) {
        return Ok(spec);
    }
    let prefix = format!("{extension}.");
    if REGISTRY.iter().any(|spec| spec.name.starts_with(&prefix)) {
        Err(LookupError::UnknownCommand {
            extension: extension.to_owned(),
            command: command.to_owned(),
        })
    } else {
        Err(LookupError::UnknownExtension(extension.to_owned()))
    }
}

impl Agent {
    /// Starts a command. Synchronous commands finish before this returns; asynchronous ones
    /// run on and are awaited only when `wait` is set.
    pub async fn execute(
        self: &Arc<Self>,
        name: &str,
        params: Params,
        wait: bool,
    ) -> Result<CommandResult, ExecuteError> {
        let spec = find(name)?;
        (spec.validate)(&params).map_err(ExecuteError::InvalidParams)?;
        let short_name = name.split_once('.').map_or(name, |(_, command)| command);
        let record = self.begin_command(short_name).ok_or(ExecuteError::Busy)?;
        tracing::info!(command = name, id = %record.id(), "command started");
        let invocation = Invocation {
            agent: self.clone(),
            params,
            progress: Progress::new(record.clone()),
        };
        let run = spec.run;
        let agent = self.clone();
        let task_record = record.clone();
        let command_name = name.to_owned();
        let task = tokio::spawn(async move {
            let outcome = tokio::task::spawn_blocking(move || run(&invocation))
                .await
                .unwrap_or_else(|error| {
                    tracing::error!(command = %command_name, "command panicked: {error}");
                    Err(CommandError::internal(format!(
                        "the command {command_name} stopped unexpectedly"
                    )))
                });
            match &outcome {
                Ok(_) => tracing::info!(command = %command_name, "command succeeded"),
                Err(error) => tracing::warn!(
                    command = %command_name,
                    kind = %error.kind,
                    "command failed: {}", error.details
                ),
            }
            let stops = spec.name == "rescue.finalize_rescue" && outcome.is_ok();
            task_record.finish(outcome);
            if spec.mode == Mode::Async {
                agent.heartbeat_now.notify_one();
            }
            if stops {
                // The machine is its owner's now: stop serving once the answer is out, as
                // IPA does.
                let agent = agent.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                    tracing::info!("rescued: the agent stops serving");
                    agent.stop.notify_one();
                });
            }
        });
        if spec.mode == Mode::Sync || wait {
            let _ = task.await;
        }
        Ok(record.snapshot())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_resolve_like_ipa() {
        assert!(find("standby.prepare_image").is_ok());
        assert!(matches!(
            find("standby.nope"),
            Err(LookupError::UnknownCommand { .. })
        ));
        assert!(matches!(
            find("nope.x"),
            Err(LookupError::UnknownExtension(_))
        ));
        assert!(matches!(find("nodot"), Err(LookupError::Malformed(_))));
    }
}
