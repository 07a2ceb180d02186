//! The ramdisk agent's side of the conversation, conductor half (`reference/ironic.md` §2.8,
//! §3): minting the agent token at lookup and taking heartbeats.
//!
//! Theory of operation: the agent finds its node (`/v1/lookup`), receives a token once, and
//! from then on proves itself with that token on every heartbeat. The token lives in the
//! node's `driver_internal_info.agent_secret_token` and is wiped whenever the agent the node
//! talks to changes (reboots by Ferric, aborts, tear-down), so a stale ramdisk cannot drive a
//! node. A heartbeat records where the agent listens (`agent_url`) and when it was last
//! heard of, and — when the node waits for its agent (`wait call-back`, `clean wait`,
//! `service wait`, `rescue wait`) — moves the node on.
//!
//! The token is compared in constant time; a wrong one is `Forbidden`, which the API answers 403
//! and logs with the node and the peer's address. A flow whose environment must be prepared first
//! (the agent booted for cleaning) marks `<kind>_preparing` (`steps.rs`), so the callback resumes
//! at the current step rather than after it.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use chrono::Utc;
use ferric_model::ProvisionState;
use ferric_model::resources::{Ident, Node};
use serde_json::Value;
use uuid::Uuid;

use crate::flows::{Job, spawn};
use crate::task::{Cause, Task};
use crate::{Conductor, ConductorError};

/// `driver_internal_info` keys the agent protocol uses.
pub const AGENT_TOKEN_KEY: &str = "agent_secret_token";
pub const AGENT_URL_KEY: &str = "agent_url";
pub const AGENT_VERSION_KEY: &str = "agent_version";
pub const AGENT_LAST_HEARTBEAT_KEY: &str = "agent_last_heartbeat";
pub const AGENT_VERIFY_CA_KEY: &str = "agent_verify_ca";

/// Ironic's words for a heartbeat whose token is missing or wrong.
pub const INVALID_TOKEN: &str = "Invalid or missing agent token received.";

pub use ferric_model::action::Heartbeat;

/// The token a lookup hands out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AgentToken {
    /// A fresh token: shown to this caller and never again.
    Minted(String),
    /// The node already has one; the caller sees `******`.
    AlreadyIssued,
}

/// A new random token: 32 bytes from the OS, URL-safe base64 (43 characters), as Ironic's.
pub(crate) fn new_token() -> Result<String, ConductorError> {
    let mut bytes = [0u8; 32];
    getrandom::fill(&mut bytes).map_err(|error| {
        ConductorError::Conflict(format!(
            "The operating system could not supply random bytes for an agent token: {error}"
        ))
    })?;
    Ok(URL_SAFE_NO_PAD.encode(bytes))
}

/// Compares two tokens in time independent of where they first differ.
fn same_token(expected: &str, given: &str) -> bool {
    let (expected, given) = (expected.as_bytes(), given.as_bytes());
    expected.len() == given.len()
        && expected
            .iter()
            .zip(given)
            .fold(0u8, |diff, (a, b)| diff | (a ^ b))
            == 0
}

/// The token the node's agent must present, if one was issued.
pub fn agent_token(node: &Node) -> Option<&str> {
    node.driver_internal_info
        .get(AGENT_TOKEN_KEY)
        .and_then(Value::as_str)
}

/// Whether the node takes heartbeats and lookups in its current state. `fast_track` is the
/// site's setting; the node's `driver_info.fast_track` overrides it.
pub fn agent_allowed(node: &Node, fast_track: bool) -> bool {
    let state = node.provision_state;
    if ferric_drivers::fast_track::enabled(node, fast_track) {
        state.allows_fast_track_lookup()
    } else {
        state.allows_agent_lookup()
    }
}

impl Conductor {
    /// Mints the agent token of `node` at its agent's first lookup, or says one exists
    /// (§3). Takes the node's lease without waiting: a busy node answers 409 and the agent
    /// retries.
    pub async fn agent_lookup_token(&self, node: Uuid) -> Result<AgentToken, ConductorError> {
        let inner = &self.inner;
        let current = inner.store.node_get(&Ident::Uuid(node)).await?;
        if agent_token(&current).is_some() {
            return Ok(AgentToken::AlreadyIssued);
        }
        let mut task = Task::acquire(inner, node).await?;
        let result = async {
            if agent_token(&task.node).is_some() {
                return Ok(AgentToken::AlreadyIssued);
            }
            let token = new_token()?;
            task.node
                .driver_internal_info
                .insert(AGENT_TOKEN_KEY.to_owned(), token.clone().into());
            task.save().await?;
            Ok(AgentToken::Minted(token))
        }
        .await;
        task.release().await;
        result
    }

    /// Takes a heartbeat from the agent of `node`: checks its token, records the agent, and
    /// moves a node that waits for its agent on. A node some task works on right now keeps
    /// working (the heartbeat is only checked) unless its agent is not known yet, in which
    /// case the agent hears 409 and retries soon.
    pub async fn heartbeat(&self, node: Uuid, beat: Heartbeat) -> Result<(), ConductorError> {
        let current = self.inner.store.node_get(&Ident::Uuid(node)).await?;
        self.heartbeat_read(&current, beat).await
    }

    /// [`Conductor::heartbeat`] on a node the caller has just read (the API's record): the
    /// checks that need no lease run on that record, so the node is read once more only, under
    /// its lease, where the checks run again on what it is now.
    pub async fn heartbeat_read(
        &self,
        current: &Node,
        beat: Heartbeat,
    ) -> Result<(), ConductorError> {
        let inner = &self.inner;
        let node = current.uuid;
        check_heartbeat(current, &beat, inner.config.fast_track)?;
        check_tls(&beat, inner.config.agent_require_tls)?;
        let permit = inner.take_worker()?;
        let mut task = match Task::acquire(inner, node).await {
            Ok(task) => task,
            Err(ConductorError::NodeLocked { .. })
                if current.driver_internal_info.contains_key(AGENT_URL_KEY) =>
            {
                tracing::debug!(node = %node, "heartbeat while the node is busy; only checked");
                return Ok(());
            }
            Err(error) => return Err(error),
        };
        let result = async {
            check_heartbeat(&task.node, &beat, inner.config.fast_track)?;
            record(&mut task.node, &beat);
            let state = task.node.provision_state;
            let resumes = matches!(
                state,
                ProvisionState::WaitCallBack
                    | ProvisionState::CleanWait
                    | ProvisionState::ServiceWait
                    | ProvisionState::RescueWait
            );
            if resumes {
                // The heartbeat is the callback the node was waiting for.
                tracing::info!(node = %node, state = %state, "agent is up; continuing");
                task.fire(ferric_model::Event::Resume, Cause::Conductor)
                    .await?;
                Ok(true)
            } else {
                // Heartbeats reset the callback deadline of waits that do not end with one
                // (`inspect wait` ends with the inspection data).
                task.node.provision_updated_at = Some(task.inner.store.now());
                task.save().await?;
                Ok(false)
            }
        }
        .await;
        match result {
            Ok(true) => {
                spawn(task, Job::Drive { resume: true }, permit);
                Ok(())
            }
            Ok(false) => {
                task.release().await;
                Ok(())
            }
            Err(error) => {
                task.release().await;
                Err(error)
            }
        }
    }
}

/// The checks of §2.8 that do not need the lease: the state, the token, the callback URL.
fn check_heartbeat(node: &Node, beat: &Heartbeat, fast_track: bool) -> Result<(), ConductorError> {
    if !agent_allowed(node, fast_track) {
        return Err(ConductorError::Conflict(format!(
            "Node {} is in state \"{}\", where it does not take heartbeats from an agent.",
            node.uuid, node.provision_state
        )));
    }
    let valid = agent_token(node).is_some_and(|expected| same_token(expected, &beat.agent_token));
    if !valid {
        // Forbidden, not Invalid: the API answers 403 and logs who sent it.
        return Err(ConductorError::Forbidden(INVALID_TOKEN.to_owned()));
    }
    let recorded = node
        .driver_internal_info
        .get(AGENT_URL_KEY)
        .and_then(Value::as_str);
    if let Some(recorded) = recorded
        && !beat.callback_url.is_empty()
        && recorded != beat.callback_url
    {
        return Err(ConductorError::Invalid(format!(
            "Detected change in ramdisk provided callback_url (was {recorded}, now {}); the \
             agent must look the node up again.",
            beat.callback_url
        )));
    }
    if let (Some(recorded), Some(given)) = (
        node.driver_internal_info
            .get(AGENT_VERIFY_CA_KEY)
            .and_then(Value::as_str),
        beat.agent_verify_ca.as_deref(),
    ) && recorded != given
    {
        return Err(ConductorError::Invalid(
            "The agent's TLS certificate changed since its first heartbeat; refusing it."
                .to_owned(),
        ));
    }
    Ok(())
}

/// The TLS checks of a heartbeat: with `agent_require_tls` the callback URL must be
/// `https://` (Ironic's words), and a certificate sent for the conductor to trust the agent by
/// must be one.
fn check_tls(beat: &Heartbeat, require_tls: bool) -> Result<(), ConductorError> {
    if require_tls
        && !beat.callback_url.is_empty()
        && !beat
            .callback_url
            .to_ascii_lowercase()
            .starts_with("https://")
    {
        return Err(ConductorError::Invalid(format!(
            "Agent callback URL must use https:// (agent_require_tls is set), got {}; boot an \
             agent with TLS (ferric-agent and ironic-python-agent generate a certificate \
             themselves).",
            beat.callback_url
        )));
    }
    if let Some(pem) = &beat.agent_verify_ca {
        ferric_drivers::agent_client::check_certificate(pem).map_err(|error| {
            ConductorError::Invalid(format!(
                "The agent's TLS certificate (agent_verify_ca) cannot be used: {error}."
            ))
        })?;
        if !beat.callback_url.is_empty()
            && !beat
                .callback_url
                .to_ascii_lowercase()
                .starts_with("https://")
        {
            return Err(ConductorError::Invalid(format!(
                "The agent sent a TLS certificate (agent_verify_ca) with the callback URL {}, \
                 which is not https://.",
                beat.callback_url
            )));
        }
    }
    Ok(())
}

/// Writes the heartbeat's bookkeeping into `driver_internal_info`.
fn record(node: &mut Node, beat: &Heartbeat) {
    let info = &mut node.driver_internal_info;
    if !beat.callback_url.is_empty() {
        info.insert(AGENT_URL_KEY.to_owned(), beat.callback_url.clone().into());
    }
    if let Some(version) = &beat.agent_version {
        info.insert(AGENT_VERSION_KEY.to_owned(), version.clone().into());
    }
    if let Some(ca) = &beat.agent_verify_ca {
        info.insert(AGENT_VERIFY_CA_KEY.to_owned(), ca.clone().into());
    }
    for (key, value) in [
        ("agent_status", &beat.agent_status),
        ("agent_status_message", &beat.agent_status_message),
    ] {
        if let Some(value) = value {
            info.insert(key.to_owned(), value.clone().into());
        }
    }
    info.insert(
        AGENT_LAST_HEARTBEAT_KEY.to_owned(),
        Utc::now().to_rfc3339().into(),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_long_random_and_url_safe() {
        let first = new_token().expect("token");
        let second = new_token().expect("token");
        assert_eq!(first.len(), 43);
        assert_ne!(first, second);
        assert!(
            first
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        );
    }

    #[test]
    fn token_comparison_is_exact() {
        assert!(same_token("abc", "abc"));
        assert!(!same_token("abc", "abd"));
        assert!(!same_token("abc", "abcd"));
        assert!(!same_token("abc", ""));
    }

    fn waiting_node(token: Option<&str>) -> Node {
        let mut node = Node::new(Uuid::nil(), "fake-hardware", ProvisionState::WaitCallBack);
        if let Some(token) = token {
            node.driver_internal_info
                .insert(AGENT_TOKEN_KEY.into(), token.into());
        }
        node
    }

    #[test]
    fn heartbeats_need_the_token_the_state_and_a_stable_url() {
        let beat = Heartbeat {
            callback_url: "http://10.0.0.5:9999".into(),
            agent_token: "secret".into(),
            ..Heartbeat::default()
        };
        assert!(check_heartbeat(&waiting_node(Some("secret")), &beat, false).is_ok());
        let error = check_heartbeat(&waiting_node(None), &beat, false).unwrap_err();
        assert!(
            matches!(&error, ConductorError::Forbidden(message) if message == INVALID_TOKEN),
            "{error}"
        );
        assert!(matches!(
            check_heartbeat(&waiting_node(Some("other")), &beat, false),
            Err(ConductorError::Forbidden(_))
        ));

        let mut moved = waiting_node(Some("secret"));
        moved
            .driver_internal_info
            .insert(AGENT_URL_KEY.into(), "http://10.0.0.6:9999".into());
        let error = check_heartbeat(&moved, &beat, false).unwrap_err();
        assert!(error.to_string().contains("callback_url"), "{error}");

        let mut available = waiting_node(Some("secret"));
        available.provision_state = ProvisionState::Available;
        assert!(matches!(
            check_heartbeat(&available, &beat, false),
            Err(ConductorError::Conflict(_))
        ));
        assert!(check_heartbeat(&available, &beat, true).is_ok());
    }

    #[test]
    fn heartbeats_are_checked_for_tls_as_agent_require_tls_says() {
        let plain = Heartbeat {
            callback_url: "http://10.0.0.5:9999".into(),
            ..Heartbeat::default()
        };
        assert!(check_tls(&plain, false).is_ok());
        let error = check_tls(&plain, true).unwrap_err();
        assert!(error.to_string().contains("must use https://"), "{error}");
        let bad_certificate = Heartbeat {
            callback_url: "https://10.0.0.5:9999".into(),
            agent_verify_ca: Some("-----BEGIN CERTIFICATE-----\nnope".into()),
            ..Heartbeat::default()
        };
        let error = check_tls(&bad_certificate, true).unwrap_err();
        assert!(error.to_string().contains("agent_verify_ca"), "{error}");
    }

    #[test]
    fn a_heartbeat_records_the_agent() {
        let mut node = waiting_node(Some("secret"));
        record(
            &mut node,
            &Heartbeat {
                callback_url: "http://10.0.0.5:9999".into(),
                agent_token: "secret".into(),
                agent_version: Some("ferric-agent 0.1".into()),
                ..Heartbeat::default()
            },
        );
        assert_eq!(
            node.driver_internal_info[AGENT_URL_KEY],
            "http://10.0.0.5:9999"
        );
        assert_eq!(
            node.driver_internal_info[AGENT_VERSION_KEY],
            "ferric-agent 0.1"
        );
        assert!(
            node.driver_internal_info
                .contains_key(AGENT_LAST_HEARTBEAT_KEY)
        );
    }
}
