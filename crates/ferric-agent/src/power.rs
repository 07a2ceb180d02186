//! `standby.power_off`, `standby.run_image` (reboot) and `standby.sync`.
//!
//! Power actions are real only in the ramdisk: `ferric ramdisk build` puts the marker
//! [`RAMDISK_MARKER`] into the initramfs, and `main` turns it into `PowerMode::Real`. Anywhere
//! else (a developer's machine, a test) they log what they would do and succeed, so running the
//! agent by hand can never switch the host off. `--dry-power` forces the dry mode in a ramdisk.

use std::time::Duration;

use serde_json::Value;

use crate::agent::Invocation;
use crate::commands::{CommandError, message_result};
use crate::config::PowerMode;

/// Present only inside an initramfs built by `ferric ramdisk build`.
pub const RAMDISK_MARKER: &str = "/etc/ferric-ramdisk";

#[derive(Debug, Clone, Copy)]
enum Action {
    PowerOff,
    Reboot,
}

fn act(
    invocation: &Invocation,
    action: Action,
    command: &str,
) -> Result<Option<Value>, CommandError> {
    rustix::fs::sync();
    match invocation.agent.config.power {
        PowerMode::Dry => {
            tracing::warn!(
                ?action,
                "dry power mode: not powering the machine off or rebooting"
            );
            Ok(Some(message_result(
                command,
                &format!("{action:?} skipped (dry power mode)"),
            )))
        }
        PowerMode::Real => {
            tracing::info!(?action, "disks synced; acting in 1 s");
            // Let the command's result reach the conductor's poll before the machine goes.
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_secs(1));
                let command = match action {
                    Action::PowerOff => rustix::system::RebootCommand::PowerOff,
                    Action::Reboot => rustix::system::RebootCommand::Restart,
                };
                if let Err(error) = rustix::system::reboot(command) {
                    tracing::error!(?action, "reboot(2) failed: {error}");
                }
            });
            Ok(Some(message_result(command, &format!("{action:?} in 1 s"))))
        }
    }
}

pub(crate) fn power_off_command(invocation: &Invocation) -> Result<Option<Value>, CommandError> {
    act(invocation, Action::PowerOff, "power_off")
}

pub(crate) fn run_image_command(invocation: &Invocation) -> Result<Option<Value>, CommandError> {
    act(invocation, Action::Reboot, "run_image")
}

pub(crate) fn sync_command(_: &Invocation) -> Result<Option<Value>, CommandError> {
    rustix::fs::sync();
    Ok(None)
}
