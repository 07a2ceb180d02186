//! The conductor's side of the hand-off: the request server that claims the requests
//! addressed to this conductor, runs each through [`Conductor::execute`] — the one place an
//! [`Action`] becomes a call — and writes the reply.

use std::sync::Arc;
use std::time::Duration;

use chrono::TimeDelta;
use ferric_db::{MEMBERSHIP_CHANNEL, REQUESTS_CHANNEL};
use ferric_model::action::{self, Action, ActionReply, HandoffError};
use uuid::Uuid;

use super::POLL;
use super::wire::{Reply, WireError};
use crate::{AgentToken, Conductor, ConductorError, Inner};

impl Conductor {
    /// Runs `action` on `node`: what the API asks of the node's owner, whether it is this
    /// process (called directly) or another (through a request row).
    pub async fn execute(&self, node: Uuid, action: Action) -> Result<ActionReply, ConductorError> {
        match action {
            Action::Provision { verb, args } => self.provision(node, verb, args).await?,
            Action::SetPower { power, timeout_ms } => {
                self.set_power(node, power, timeout_ms.map(Duration::from_millis))
                    .await?;
            }
            Action::SetBootDevice { device, persistent } => {
                self.set_boot_device(node, device, persistent).await?;
            }
            Action::GetBootDevice => {
                return Ok(ActionReply::BootDevice(self.get_boot_device(node).await?));
            }
            Action::SupportedBootDevices => {
                return Ok(ActionReply::BootDevices(
                    self.supported_boot_devices(node).await?,
                ));
            }
            Action::SetBootMode { mode } => self.set_boot_mode(node, mode).await?,
            Action::SetSecureBoot { enabled } => self.set_secure_boot(node, enabled).await?,
            Action::InjectNmi => self.inject_nmi(node).await?,
            Action::VmediaAttach { device, url } => {
                self.vmedia_attach(node, device, &url).await?;
            }
            Action::VmediaDetach { devices } => self.vmedia_detach(node, &devices).await?,
            Action::VmediaList => return Ok(ActionReply::Vmedia(self.vmedia_list(node).await?)),
            Action::VendorPassthru {
                method,
                http_method,
                args,
            } => {
                return Ok(ActionReply::Vendor(
                    self.vendor_passthru(node, &method, &http_method, args)
                        .await?,
                ));
            }
            Action::Validate => return Ok(ActionReply::Validation(self.validate(node).await?)),
            Action::ContinueNode => self.continue_node(node).await?,
            Action::Heartbeat(beat) => self.heartbeat(node, beat).await?,
            Action::AgentLookupToken => {
                return Ok(ActionReply::Token(
                    match self.agent_lookup_token(node).await? {
                        AgentToken::Minted(token) => Some(token),
                        AgentToken::AlreadyIssued => None,
                    },
                ));
            }
            Action::AbortDeployment => self.abort_deployment(node).await?,
            Action::ContinueInspection {
                payload,
                mint_token,
            } => {
                return Ok(ActionReply::Token(
                    self.continue_inspection(node, payload, mint_token).await?,
                ));
            }
            Action::VendorMethods => {
                return Ok(ActionReply::Methods(self.vendor_methods(node).await?));
            }
            Action::SetConsole { enabled } => self.set_console(node, enabled).await?,
            Action::ConsoleInfo => {
                return Ok(ActionReply::Console(self.console_info(node).await?.map_or(
                    serde_json::Value::Null,
                    |info| serde_json::json!({"type": info.kind, "url": info.url}),
                )));
            }
            Action::ValidateRaidTarget { target } => {
                self.validate_raid_target(node, &target).await?;
            }
            Action::Indicators => {
                return Ok(ActionReply::Indicators(self.indicators(node).await?));
            }
            Action::GetIndicator { component, name } => {
                return Ok(ActionReply::IndicatorState(
                    self.indicator_state(node, &component, &name).await?,
                ));
            }
            Action::SetIndicator {
                component,
                name,
                state,
            } => {
                self.set_indicator_state(node, &component, &name, state)
                    .await?
            }
        }
        Ok(ActionReply::Done)
    }
}

/// Starts the conductor's request server: listens for requests addressed to it, and polls.
/// Stops when the conductor shuts down (after which new requests wait for the API's deadline
/// and are withdrawn, or go to the node's next owner).
pub(crate) async fn spawn_server(inner: Arc<Inner>) -> Result<(), ConductorError> {
    let mut listener = inner
        .store
        .listen(&[REQUESTS_CHANNEL, MEMBERSHIP_CHANNEL])
        .await?;
    tokio::spawn(async move {
        let conductor = Conductor {
            inner: inner.clone(),
        };
        loop {
            // Claim everything addressed to us; each request runs on its own task so a slow
            // one (a BMC read) does not hold up the rest.
            loop {
                if inner.shutdown.is_cancelled() {
                    return;
                }
                match inner
                    .store
                    .conductor_request_claim(&inner.config.hostname)
                    .await
                {
                    Ok(Some(request)) => {
                        let conductor = conductor.clone();
                        tokio::spawn(async move { serve(&conductor, request).await });
                    }
                    Ok(None) => break,
                    Err(error) => {
                        tracing::warn!(error = %error, "could not claim conductor requests");
                        break;
                    }
                }
            }
            let membership_changed = tokio::select! {
                () = inner.shutdown.cancelled() => return,
                () = tokio::time::sleep(POLL) => false,
                notification = recv(&mut listener) => {
                    notification.is_some_and(|(channel, _)| channel == MEMBERSHIP_CHANNEL)
                }
            };
            if membership_changed && let Err(error) = inner.refresh_membership().await {
                tracing::warn!(error = %error, "could not re-read the conductors");
            }
        }
    });
    Ok(())
}

/// The next notification, or never when there is no listener (it would be polled only).
pub(super) async fn recv(listener: &mut Option<ferric_db::Listener>) -> Option<(String, String)> {
    match listener {
        Some(listener) => match listener.recv().await {
            Ok(notification) => notification,
            Err(error) => {
                tracing::warn!(error = %error, "notification listener failed; polling");
                tokio::time::sleep(POLL).await;
                None
            }
        },
        None => std::future::pending().await,
    }
}

/// Runs one claimed request and writes its reply.
async fn serve(conductor: &Conductor, request: ferric_db::ConductorRequest) {
    let reply = match action::decode(&request.body) {
        Ok((_, action)) => match conductor.execute(request.node, action).await {
            Ok(reply) => Reply::Done {
                value: reply.to_value(),
            },
            Err(error) => {
                if matches!(
                    error,
                    ConductorError::Storage(_) | ConductorError::Remote(_)
                ) {
                    tracing::error!(node = %request.node, error = %error, "handed-over request failed");
                }
                Reply::Failed {
                    error: WireError::from(&error),
                }
            }
        },
        // Only a newer sender's version is above ours, and it knows this error kind.
        Err(error @ HandoffError::Unsupported { .. }) => {
            tracing::warn!(node = %request.node, error = %error, "refused a request from a newer process");
            Reply::Failed {
                error: WireError::Unsupported {
                    message: error.to_string(),
                },
            }
        }
        Err(error) => {
            tracing::error!(node = %request.node, error = %error, "could not read a handed-over request");
            Reply::Failed {
                error: WireError::unreadable(error),
            }
        }
    };
    let text = serde_json::to_string(&reply).unwrap_or_else(|error| {
        format!(r#"{{"outcome":"failed","error":{{"kind":"internal","message":"{error}"}}}}"#)
    });
    if let Err(error) = conductor
        .inner
        .store
        .conductor_request_reply(request.id, &text)
        .await
    {
        // The API times out with 503; the action itself took effect (or not) as recorded.
        tracing::error!(request = request.id, error = %error, "could not write a request's reply");
    }
}

/// Drops requests whose deadline passed long ago (replies nobody read: the API process died).
pub(crate) async fn purge(inner: &Inner) {
    let before = inner.store.now()
        - TimeDelta::from_std(inner.config.request_timeout * 2).unwrap_or(TimeDelta::minutes(1));
    if let Err(error) = inner.store.conductor_request_purge(before).await {
        tracing::warn!(error = %error, "could not purge old conductor requests");
    }
}
