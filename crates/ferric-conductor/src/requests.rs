//! The API ↔ conductor hand-off across processes (issue 10; ARCHITECTURE.md "The API ↔
//! conductor hand-off" says why it is a table and what happens when either side dies).
//!
//! Theory of operation: the API holds a [`Handoff`], never a conductor directly. For each
//! action on a node it asks the hash ring (`ring.rs`) who owns the node. When the owner is
//! this process's own conductor (role `all`, and always on SQLite) the call is the plain
//! in-process one. Otherwise the action is serialized into a `conductor_requests` row
//! addressed to the owner and the owner is woken by `NOTIFY`; the owner's request server
//! ([`spawn_server`]) claims the row, runs the very same [`Conductor`] method — which returns
//! once the first transition is durable — and writes the reply, which wakes the waiting API
//! process. An owner that does not answer before [`ConductorConfig::request_timeout`] gets a
//! 503 that names it; a request nobody claimed by then is withdrawn so it never runs late.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::{TimeDelta, Utc};
use ferric_db::{MEMBERSHIP_CHANNEL, REPLIES_CHANNEL, REQUESTS_CHANNEL, Store};
use ferric_drivers::vmedia::{VmediaDevice, VmediaSlot};
use ferric_drivers::{
    BootDevice, BootDeviceSetting, BootMode, DriverError, Drivers, PowerAction, StepCall,
};
use ferric_model::Verb;
use ferric_model::resources::{Ident, InterfaceKind, JsonObject};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::Notify;
use uuid::Uuid;

use crate::{
    AgentToken, Conductor, ConductorConfig, ConductorError, Heartbeat, Inner, Membership,
    NodeValidation, ProvisionArgs, ReconcilerStatus, ValidationResult, VendorReply, lock,
};

/// How often each side looks at the table even without a notification (a listener that
/// reconnected may have missed some).
const POLL: Duration = Duration::from_millis(500);

/// One action, as it travels in a request row.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
enum Action {
    Provision {
        verb: Verb,
        configdrive: Option<Value>,
        clean_steps: Option<Vec<JsonObject>>,
        deploy_steps: Option<Vec<JsonObject>>,
        service_steps: Option<Vec<JsonObject>>,
        rescue_password: Option<String>,
        disable_ramdisk: Option<bool>,
    },
    SetPower {
        power: String,
        timeout_ms: Option<u64>,
    },
    SetBootDevice {
        device: String,
        persistent: bool,
    },
    GetBootDevice,
    SupportedBootDevices,
    SetBootMode {
        mode: String,
    },
    SetSecureBoot {
        enabled: bool,
    },
    InjectNmi,
    VmediaAttach {
        device: String,
        url: String,
    },
    VmediaDetach {
        devices: Vec<String>,
    },
    VmediaList,
    VendorPassthru {
        method: String,
        http_method: String,
        args: JsonObject,
    },
    Validate,
    ContinueNode,
    Heartbeat {
        callback_url: String,
        agent_token: String,
        agent_version: Option<String>,
        agent_verify_ca: Option<String>,
        agent_status: Option<String>,
        agent_status_message: Option<String>,
    },
    AgentLookupToken,
    AbortDeployment,
    ContinueInspection {
        payload: Value,
        mint_token: bool,
    },
    // ---- Serial consoles (issue 24; the lead ports these to the typed Action at merge) ----
    SetConsole {
        enabled: bool,
    },
    ConsoleInfo,
    // ---- end of serial consoles ----
}

/// A conductor's answer, as it travels back.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
enum Reply {
    Done { value: Value },
    Failed { error: WireError },
}

/// [`ConductorError`] on the wire: what the API needs to answer the same status and words.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
enum WireError {
    NodeLocked { node: Uuid, holder: String },
    NoFreeWorker { workers: usize },
    Invalid { message: String },
    Forbidden { message: String },
    Conflict { message: String },
    NothingRunning { message: String },
    NodeNotFound { ident: String },
    DriverCaller { message: String },
    DriverFailed { message: String },
    Internal { message: String },
    ShuttingDown,
    Unavailable { message: String },
}

impl From<&ConductorError> for WireError {
    fn from(error: &ConductorError) -> Self {
        match error {
            ConductorError::NodeLocked { node, holder } => Self::NodeLocked {
                node: *node,
                holder: holder.clone(),
            },
            ConductorError::NoFreeWorker { workers } => Self::NoFreeWorker { workers: *workers },
            ConductorError::Invalid(message) => Self::Invalid {
                message: message.clone(),
            },
            ConductorError::Forbidden(message) => Self::Forbidden {
                message: message.clone(),
            },
            ConductorError::Conflict(message) => Self::Conflict {
                message: message.clone(),
            },
            ConductorError::NothingRunning(message) => Self::NothingRunning {
                message: message.clone(),
            },
            ConductorError::NodeNotFound(ident) => Self::NodeNotFound {
                ident: ident.clone(),
            },
            ConductorError::Driver(error) if error.is_caller_error() => Self::DriverCaller {
                message: error.to_string(),
            },
            ConductorError::Driver(error) => Self::DriverFailed {
                message: error.to_string(),
            },
            ConductorError::ShuttingDown => Self::ShuttingDown,
            ConductorError::Unavailable(message) => Self::Unavailable {
                message: message.clone(),
            },
            // The details stay in the conductor's log; the API answers a generic 500.
            ConductorError::Storage(_)
            | ConductorError::Remote(_)
            | ConductorError::NameTaken { .. } => Self::Internal {
                message: format!("{error:#}"),
            },
        }
    }
}

impl WireError {
    fn into_error(self, conductor: &str) -> ConductorError {
        match self {
            Self::NodeLocked { node, holder } => ConductorError::NodeLocked { node, holder },
            Self::NoFreeWorker { workers } => ConductorError::NoFreeWorker { workers },
            Self::Invalid { message } => ConductorError::Invalid(message),
            Self::Forbidden { message } => ConductorError::Forbidden(message),
            Self::Conflict { message } => ConductorError::Conflict(message),
            Self::NothingRunning { message } => ConductorError::NothingRunning(message),
            Self::NodeNotFound { ident } => ConductorError::NodeNotFound(ident),
            Self::DriverCaller { message } => {
                ConductorError::Driver(DriverError::InvalidParameter(message))
            }
            Self::DriverFailed { message } => ConductorError::Driver(DriverError::Failed(message)),
            Self::Internal { message } => {
                ConductorError::Remote(format!("conductor {conductor}: {message}"))
            }
            Self::ShuttingDown => ConductorError::ShuttingDown,
            Self::Unavailable { message } => ConductorError::Unavailable(message),
        }
    }
}

fn steps_json(steps: Option<Vec<StepCall>>) -> Option<Vec<JsonObject>> {
    steps.map(|steps| steps.iter().map(StepCall::to_json).collect())
}

fn steps_from_json(steps: Option<Vec<JsonObject>>) -> Result<Option<Vec<StepCall>>, String> {
    steps
        .map(|steps| {
            steps
                .iter()
                .map(|step| {
                    StepCall::from_json(step).ok_or_else(|| format!("malformed step {step:?}"))
                })
                .collect()
        })
        .transpose()
}

fn vmedia_device(name: &str) -> Option<VmediaDevice> {
    name.parse().ok()
}

fn boot_device(name: &str) -> Option<BootDevice> {
    BootDevice::ALL
        .into_iter()
        .find(|device| device.as_str() == name)
}

/// Runs `action` on `node` with this process's conductor: what a request server does with a
/// claimed request.
async fn execute(
    conductor: &Conductor,
    node: Uuid,
    action: Action,
) -> Result<Value, ConductorError> {
    let malformed = |what: String| {
        ConductorError::Remote(format!(
            "a request from an API process was malformed: {what}"
        ))
    };
    match action {
        Action::Provision {
            verb,
            configdrive,
            clean_steps,
            deploy_steps,
            service_steps,
            rescue_password,
            disable_ramdisk,
        } => {
            let args = ProvisionArgs {
                configdrive,
                clean_steps: steps_from_json(clean_steps).map_err(malformed)?,
                deploy_steps: steps_from_json(deploy_steps).map_err(malformed)?,
                service_steps: steps_from_json(service_steps).map_err(malformed)?,
                rescue_password,
                disable_ramdisk,
            };
            conductor.provision(node, verb, args).await?;
            Ok(Value::Null)
        }
        Action::SetPower { power, timeout_ms } => {
            let action: PowerAction = power
                .parse()
                .map_err(|()| malformed(format!("power action {power:?}")))?;
            conductor
                .set_power(node, action, timeout_ms.map(Duration::from_millis))
                .await?;
            Ok(Value::Null)
        }
        Action::SetBootDevice { device, persistent } => {
            let device =
                boot_device(&device).ok_or_else(|| malformed(format!("boot device {device:?}")))?;
            conductor.set_boot_device(node, device, persistent).await?;
            Ok(Value::Null)
        }
        Action::SetBootMode { mode } => {
            let mode: BootMode = mode
                .parse()
                .map_err(|_| malformed(format!("boot mode {mode:?}")))?;
            conductor.set_boot_mode(node, mode).await?;
            Ok(Value::Null)
        }
        Action::SetSecureBoot { enabled } => {
            conductor.set_secure_boot(node, enabled).await?;
            Ok(Value::Null)
        }
        Action::InjectNmi => {
            conductor.inject_nmi(node).await?;
            Ok(Value::Null)
        }
        Action::VmediaAttach { device, url } => {
            let device =
                vmedia_device(&device).ok_or_else(|| malformed(format!("device {device:?}")))?;
            conductor.vmedia_attach(node, device, &url).await?;
            Ok(Value::Null)
        }
        Action::VmediaDetach { devices } => {
            let devices = devices
                .iter()
                .map(|name| {
                    vmedia_device(name).ok_or_else(|| malformed(format!("device {name:?}")))
                })
                .collect::<Result<Vec<_>, _>>()?;
            conductor.vmedia_detach(node, &devices).await?;
            Ok(Value::Null)
        }
        Action::VmediaList => {
            let slots = conductor.vmedia_list(node).await?;
            Ok(Value::Array(
                slots.iter().map(VmediaSlot::to_json).collect(),
            ))
        }
        Action::VendorPassthru {
            method,
            http_method,
            args,
        } => {
            let reply = conductor
                .vendor_passthru(node, &method, &http_method, args)
                .await?;
            serde_json::to_value(reply)
                .map_err(|error| malformed(format!("vendor passthru reply: {error}")))
        }
        Action::GetBootDevice => {
            let setting = conductor.get_boot_device(node).await?;
            Ok(serde_json::json!({
                "device": setting.device.map(BootDevice::as_str),
                "persistent": setting.persistent,
            }))
        }
        Action::SupportedBootDevices => {
            let devices = conductor.supported_boot_devices(node).await?;
            Ok(devices.iter().map(|device| device.as_str()).collect())
        }
        Action::Validate => {
            let answers = conductor.validate(node).await?;
            let mut body = serde_json::Map::new();
            for (kind, answer) in answers {
                body.insert(
                    kind.as_str().to_owned(),
                    serde_json::json!({"result": answer.result, "reason": answer.reason}),
                );
            }
            Ok(Value::Object(body))
        }
        Action::ContinueNode => {
            conductor.continue_node(node).await?;
            Ok(Value::Null)
        }
        Action::Heartbeat {
            callback_url,
            agent_token,
            agent_version,
            agent_verify_ca,
            agent_status,
            agent_status_message,
        } => {
            let beat = Heartbeat {
                callback_url,
                agent_token,
                agent_version,
                agent_verify_ca,
                agent_status,
                agent_status_message,
            };
            conductor.heartbeat(node, beat).await?;
            Ok(Value::Null)
        }
        Action::AgentLookupToken => match conductor.agent_lookup_token(node).await? {
            AgentToken::Minted(token) => Ok(Value::String(token)),
            AgentToken::AlreadyIssued => Ok(Value::Null),
        },
        Action::AbortDeployment => {
            conductor.abort_deployment(node).await?;
            Ok(Value::Null)
        }
        Action::ContinueInspection {
            payload,
            mint_token,
        } => Ok(conductor
            .continue_inspection(node, payload, mint_token)
            .await?
            .map_or(Value::Null, Value::String)),
        // ---- Serial consoles (issue 24) ----
        Action::SetConsole { enabled } => {
            conductor.set_console(node, enabled).await?;
            Ok(Value::Null)
        }
        Action::ConsoleInfo => Ok(console_info_json(
            conductor.console_info(node).await?.as_ref(),
        )),
        // ---- end of serial consoles ----
    }
}

// ---- Serial consoles (issue 24) ----

fn console_info_json(info: Option<&crate::ConsoleInfo>) -> Value {
    info.map_or(
        Value::Null,
        |info| serde_json::json!({"type": info.kind, "url": info.url}),
    )
}

fn console_info_from_json(value: Value) -> Result<Option<crate::ConsoleInfo>, String> {
    if value.is_null() {
        return Ok(None);
    }
    let url = value
        .get("url")
        .and_then(Value::as_str)
        .ok_or("console info without a url")?;
    Ok(Some(crate::ConsoleInfo {
        kind: "socat",
        url: url.to_owned(),
    }))
}

impl Handoff {
    /// [`Conductor::set_console`] on the node's owner.
    pub async fn set_console(&self, node: Uuid, enabled: bool) -> Result<(), ConductorError> {
        self.dispatch(
            node,
            || Action::SetConsole { enabled },
            |conductor| async move { conductor.set_console(node, enabled).await },
            unit,
        )
        .await
    }

    /// [`Conductor::console_info`] on the node's owner.
    pub async fn console_info(
        &self,
        node: Uuid,
    ) -> Result<Option<crate::ConsoleInfo>, ConductorError> {
        self.dispatch(
            node,
            || Action::ConsoleInfo,
            |conductor| async move { conductor.console_info(node).await },
            console_info_from_json,
        )
        .await
    }

    /// The node's console relayed by this process's conductor, for the API's WebSocket;
    /// `Err` names the conductor that relays it when that is another process.
    pub async fn local_console(
        &self,
        node: Uuid,
    ) -> Result<Option<Arc<crate::ConsoleHub>>, ConductorError> {
        match (self.route(node).await?, &self.inner.local) {
            (None, Some(conductor)) => {
                if conductor.console(node).is_none() {
                    // Enabled but not started yet here (restart, take-over): start it now.
                    conductor.console_info(node).await?;
                }
                Ok(conductor.console(node))
            }
            (Some(owner), _) => Err(ConductorError::Conflict(format!(
                "The console of node {node} is relayed by conductor {owner}; connect to the                  API of that conductor's process, or to the TCP relay GET                  …/states/console names."
            ))),
            (None, None) => Err(ConductorError::Unavailable(
                "This API process runs no conductor and none is alive; start one.".to_owned(),
            )),
        }
    }
}

// ---- end of serial consoles ----

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
async fn recv(listener: &mut Option<ferric_db::Listener>) -> Option<(String, String)> {
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
    let reply = match serde_json::from_str::<Action>(&request.body) {
        Ok(action) => match execute(conductor, request.node, action).await {
            Ok(value) => Reply::Done { value },
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
        Err(error) => Reply::Failed {
            error: WireError::Internal {
                message: format!("cannot read the request: {error}"),
            },
        },
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
    let before = Utc::now()
        - TimeDelta::from_std(inner.config.request_timeout * 2).unwrap_or(TimeDelta::minutes(1));
    if let Err(error) = inner.store.conductor_request_purge(before).await {
        tracing::warn!(error = %error, "could not purge old conductor requests");
    }
}

/// What the API holds instead of a conductor: hands each action to the node's owner, in this
/// process or another. Cheap to clone.
#[derive(Clone)]
pub struct Handoff {
    inner: Arc<HandoffInner>,
}

impl std::fmt::Debug for Handoff {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handoff")
            .field("hostname", &self.inner.config.hostname)
            .field("local", &self.inner.local.is_some())
            .finish_non_exhaustive()
    }
}

struct HandoffInner {
    store: Store,
    /// This process's conductor (role `all`); `None` in an API-only process.
    local: Option<Conductor>,
    membership: Membership,
    drivers: Drivers,
    config: ConductorConfig,
    /// Requests waiting for a reply, woken by the reply listener.
    waiting: Mutex<HashMap<i64, Arc<Notify>>>,
}

impl From<Conductor> for Handoff {
    /// Everything in this process: the single-process server and the API's tests.
    fn from(conductor: Conductor) -> Self {
        Self::new(
            conductor.inner.store.clone(),
            Some(conductor.clone()),
            conductor.membership().clone(),
            conductor.drivers().clone(),
            conductor.config().clone(),
        )
    }
}

impl Handoff {
    /// A hand-off over `store`. `local` is this process's conductor, if it runs one; `config`
    /// gives the request deadline and the settings the API shows agents (for an API-only
    /// process, the conductor settings it was started with).
    pub fn new(
        store: Store,
        local: Option<Conductor>,
        membership: Membership,
        drivers: Drivers,
        config: ConductorConfig,
    ) -> Self {
        Self {
            inner: Arc::new(HandoffInner {
                store,
                local,
                membership,
                drivers,
                config,
                waiting: Mutex::new(HashMap::new()),
            }),
        }
    }

    /// Starts listening for replies and membership changes, and re-reads the membership
    /// every heartbeat interval until `shutdown` (an API-only process has no conductor to do
    /// it). Call once, in a server; in-process use needs none of it.
    pub async fn start(
        &self,
        shutdown: tokio_util::sync::CancellationToken,
    ) -> Result<(), ConductorError> {
        self.inner.membership.refresh().await?;
        let mut listener = self
            .inner
            .store
            .listen(&[REPLIES_CHANNEL, MEMBERSHIP_CHANNEL])
            .await?;
        let handoff = self.clone();
        let period = self.inner.config.heartbeat_interval;
        tokio::spawn(async move {
            let mut refresh = tokio::time::interval(period);
            loop {
                tokio::select! {
                    () = shutdown.cancelled() => return,
                    _ = refresh.tick() => handoff.refresh().await,
                    notification = recv(&mut listener) => match notification {
                        Some((channel, payload)) if channel == REPLIES_CHANNEL => {
                            if let Ok(id) = payload.parse::<i64>()
                                && let Some(waiter) = lock(&handoff.inner.waiting).get(&id)
                            {
                                waiter.notify_one();
                            }
                        }
                        Some(_) => handoff.refresh().await,
                        None => {}
                    },
                }
            }
        });
        Ok(())
    }

    async fn refresh(&self) {
        // A conductor in this process keeps the shared view fresh itself.
        if self.inner.local.is_some() {
            return;
        }
        if let Err(error) = self.inner.membership.refresh().await {
            tracing::warn!(error = %error, "could not re-read the conductors");
        }
    }

    /// This process's name: its conductor's hostname.
    pub fn hostname(&self) -> &str {
        &self.inner.config.hostname
    }

    pub fn drivers(&self) -> &Drivers {
        &self.inner.drivers
    }

    pub fn config(&self) -> &ConductorConfig {
        &self.inner.config
    }

    pub fn membership(&self) -> &Membership {
        &self.inner.membership
    }

    /// This process's conductor, if it runs one.
    pub fn local(&self) -> Option<&Conductor> {
        self.inner.local.as_ref()
    }

    /// Free workers of this process's conductor (0 without one).
    pub fn free_workers(&self) -> usize {
        self.inner.local.as_ref().map_or(0, Conductor::free_workers)
    }

    /// The worker pool of this process's conductor, for `GET /metrics` (none without one).
    pub fn worker_pool(&self) -> Option<ferric_metrics::WorkerPool> {
        self.inner.local.as_ref().map(Conductor::worker_pool)
    }

    /// The reconcilers of this process's conductor (none without one).
    pub fn reconciler_status(&self) -> Vec<ReconcilerStatus> {
        self.inner
            .local
            .as_ref()
            .map(Conductor::reconciler_status)
            .unwrap_or_default()
    }

    /// Where `node`'s work goes: `Ok(None)` for this process's conductor, `Ok(Some(host))`
    /// for another.
    async fn route(&self, node: Uuid) -> Result<Option<String>, ConductorError> {
        let rings = self.inner.membership.rings();
        let local = self.inner.local.as_ref();
        if !rings.is_loaded() && local.is_some() {
            return Ok(None);
        }
        let record = self.inner.store.node_get(&Ident::Uuid(node)).await?;
        match rings.owner(&record) {
            Some(owner) if local.is_some_and(|local| local.hostname() == owner) => Ok(None),
            Some(owner) => Ok(Some(owner.to_owned())),
            // Nobody alive serves it by the ring, but this process's conductor would (its own
            // heartbeat may just be late): better it than nobody.
            None if local.is_some_and(|local| {
                local.config().conductor_group == record.conductor_group
                    && local.drivers().get(&record.driver).is_some()
            }) =>
            {
                Ok(None)
            }
            None => Err(ConductorError::Unavailable(format!(
                "No alive conductor serves hardware type \"{}\" in conductor group \"{}\"; \
                 start one (or fix the node's driver or conductor_group) and retry.",
                record.driver, record.conductor_group
            ))),
        }
    }

    /// Hands `action` to `conductor` and waits for its reply.
    async fn remote(
        &self,
        conductor: &str,
        node: Uuid,
        action: &Action,
    ) -> Result<Value, ConductorError> {
        let store = &self.inner.store;
        let body = serde_json::to_string(action)
            .map_err(|error| ConductorError::Remote(format!("cannot encode a request: {error}")))?;
        let timeout = self.inner.config.request_timeout;
        let deadline = Utc::now() + TimeDelta::from_std(timeout).unwrap_or(TimeDelta::seconds(30));
        let id = store
            .conductor_request_create(conductor, node, &body, deadline)
            .await?;
        let waiter = Arc::new(Notify::new());
        lock(&self.inner.waiting).insert(id, waiter.clone());
        let result = self.wait_reply(conductor, id, &waiter, timeout).await;
        lock(&self.inner.waiting).remove(&id);
        result
    }

    async fn wait_reply(
        &self,
        conductor: &str,
        id: i64,
        waiter: &Notify,
        timeout: Duration,
    ) -> Result<Value, ConductorError> {
        let store = &self.inner.store;
        let started = tokio::time::Instant::now();
        // A claimed request gets as long again: it is running and its answer is close.
        let mut limit = timeout;
        loop {
            if let Some(request) = store.conductor_request_get(id).await? {
                if let Some(reply) = request.reply {
                    let _ = store.conductor_request_delete(id).await;
                    let reply: Reply = serde_json::from_str(&reply).map_err(|error| {
                        ConductorError::Remote(format!(
                            "conductor {conductor} answered something unreadable: {error}"
                        ))
                    })?;
                    return match reply {
                        Reply::Done { value } => Ok(value),
                        Reply::Failed { error } => Err(error.into_error(conductor)),
                    };
                }
                if started.elapsed() >= limit {
                    if store.conductor_request_withdraw(id).await? {
                        return Err(ConductorError::Unavailable(format!(
                            "Conductor {conductor}, which owns the node, did not answer within \
                             {} s (it may be down or overloaded); nothing was done. Retry.",
                            timeout.as_secs()
                        )));
                    }
                    if limit > timeout {
                        return Err(ConductorError::Unavailable(format!(
                            "Conductor {conductor}, which owns the node, took the request but \
                             did not answer within {} s; check the node's state before \
                             retrying.",
                            limit.as_secs()
                        )));
                    }
                    limit = timeout * 2;
                }
            } else {
                return Err(ConductorError::Unavailable(format!(
                    "The request to conductor {conductor} disappeared before it answered; \
                     check the node's state and retry."
                )));
            }
            let _ = tokio::time::timeout(POLL, waiter.notified()).await;
        }
    }

    /// Runs `action` on the owner of `node`: in process, or handed over.
    async fn dispatch<T, L, LF, R>(
        &self,
        node: Uuid,
        action: impl FnOnce() -> Action,
        local: L,
        decode: R,
    ) -> Result<T, ConductorError>
    where
        L: FnOnce(Conductor) -> LF,
        LF: Future<Output = Result<T, ConductorError>>,
        R: FnOnce(Value) -> Result<T, String>,
    {
        match (self.route(node).await?, &self.inner.local) {
            (None, Some(conductor)) => local(conductor.clone()).await,
            (Some(owner), _) => {
                let value = self.remote(&owner, node, &action()).await?;
                decode(value).map_err(|error| {
                    ConductorError::Remote(format!("conductor {owner} answered oddly: {error}"))
                })
            }
            (None, None) => Err(ConductorError::Unavailable(
                "This API process runs no conductor and none is alive; start one.".to_owned(),
            )),
        }
    }

    /// [`Conductor::provision`] on the node's owner.
    pub async fn provision(
        &self,
        node: Uuid,
        verb: Verb,
        args: ProvisionArgs,
    ) -> Result<(), ConductorError> {
        let wire = args.clone();
        self.dispatch(
            node,
            || Action::Provision {
                verb,
                configdrive: wire.configdrive,
                clean_steps: steps_json(wire.clean_steps),
                deploy_steps: steps_json(wire.deploy_steps),
                service_steps: steps_json(wire.service_steps),
                rescue_password: wire.rescue_password,
                disable_ramdisk: wire.disable_ramdisk,
            },
            |conductor| async move { conductor.provision(node, verb, args).await },
            unit,
        )
        .await
    }

    /// [`Conductor::set_power`] on the node's owner.
    pub async fn set_power(
        &self,
        node: Uuid,
        action: PowerAction,
        timeout: Option<Duration>,
    ) -> Result<(), ConductorError> {
        self.dispatch(
            node,
            || Action::SetPower {
                power: action.as_str().to_owned(),
                timeout_ms: timeout
                    .map(|timeout| u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX)),
            },
            |conductor| async move { conductor.set_power(node, action, timeout).await },
            unit,
        )
        .await
    }

    /// [`Conductor::set_boot_device`] on the node's owner.
    pub async fn set_boot_device(
        &self,
        node: Uuid,
        device: BootDevice,
        persistent: bool,
    ) -> Result<(), ConductorError> {
        self.dispatch(
            node,
            || Action::SetBootDevice {
                device: device.as_str().to_owned(),
                persistent,
            },
            |conductor| async move { conductor.set_boot_device(node, device, persistent).await },
            unit,
        )
        .await
    }

    /// [`Conductor::set_boot_mode`] on the node's owner.
    pub async fn set_boot_mode(&self, node: Uuid, mode: BootMode) -> Result<(), ConductorError> {
        self.dispatch(
            node,
            || Action::SetBootMode {
                mode: mode.as_str().to_owned(),
            },
            |conductor| async move { conductor.set_boot_mode(node, mode).await },
            unit,
        )
        .await
    }

    /// [`Conductor::set_secure_boot`] on the node's owner.
    pub async fn set_secure_boot(&self, node: Uuid, enabled: bool) -> Result<(), ConductorError> {
        self.dispatch(
            node,
            || Action::SetSecureBoot { enabled },
            |conductor| async move { conductor.set_secure_boot(node, enabled).await },
            unit,
        )
        .await
    }

    /// [`Conductor::inject_nmi`] on the node's owner.
    pub async fn inject_nmi(&self, node: Uuid) -> Result<(), ConductorError> {
        self.dispatch(
            node,
            || Action::InjectNmi,
            |conductor| async move { conductor.inject_nmi(node).await },
            unit,
        )
        .await
    }

    /// [`Conductor::vmedia_attach`] on the node's owner.
    pub async fn vmedia_attach(
        &self,
        node: Uuid,
        device: VmediaDevice,
        url: &str,
    ) -> Result<(), ConductorError> {
        self.dispatch(
            node,
            || Action::VmediaAttach {
                device: device.as_str().to_owned(),
                url: url.to_owned(),
            },
            |conductor| async move { conductor.vmedia_attach(node, device, url).await },
            unit,
        )
        .await
    }

    /// [`Conductor::vmedia_detach`] on the node's owner.
    pub async fn vmedia_detach(
        &self,
        node: Uuid,
        devices: &[VmediaDevice],
    ) -> Result<(), ConductorError> {
        self.dispatch(
            node,
            || Action::VmediaDetach {
                devices: devices
                    .iter()
                    .map(|device| device.as_str().to_owned())
                    .collect(),
            },
            |conductor| async move { conductor.vmedia_detach(node, devices).await },
            unit,
        )
        .await
    }

    /// [`Conductor::vmedia_list`] on the node's owner, as the API shows it.
    pub async fn vmedia_list(&self, node: Uuid) -> Result<Vec<Value>, ConductorError> {
        self.dispatch(
            node,
            || Action::VmediaList,
            |conductor| async move {
                Ok(conductor
                    .vmedia_list(node)
                    .await?
                    .iter()
                    .map(VmediaSlot::to_json)
                    .collect())
            },
            |value| {
                value
                    .as_array()
                    .cloned()
                    .ok_or_else(|| "not a list".to_owned())
            },
        )
        .await
    }

    /// [`Conductor::vendor_passthru`] on the node's owner.
    pub async fn vendor_passthru(
        &self,
        node: Uuid,
        method: &str,
        http_method: &str,
        args: JsonObject,
    ) -> Result<VendorReply, ConductorError> {
        let wire = args.clone();
        self.dispatch(
            node,
            || Action::VendorPassthru {
                method: method.to_owned(),
                http_method: http_method.to_owned(),
                args: wire,
            },
            |conductor| async move {
                conductor
                    .vendor_passthru(node, method, http_method, args)
                    .await
            },
            |value| serde_json::from_value(value).map_err(|error| error.to_string()),
        )
        .await
    }

    /// A driver-level vendor passthru call (`/v1/drivers/{driver}/vendor_passthru`): it
    /// concerns no node, so it runs in this process with the enabled hardware types.
    pub async fn driver_vendor_passthru(
        &self,
        driver: &str,
        method: &str,
        http_method: &str,
        args: JsonObject,
    ) -> Result<VendorReply, ConductorError> {
        crate::vendor::driver_vendor_passthru(
            &self.inner.drivers,
            driver,
            method,
            http_method,
            args,
        )
        .await
    }

    /// [`Conductor::get_boot_device`] on the node's owner.
    pub async fn get_boot_device(&self, node: Uuid) -> Result<BootDeviceSetting, ConductorError> {
        self.dispatch(
            node,
            || Action::GetBootDevice,
            |conductor| async move { conductor.get_boot_device(node).await },
            |value| {
                let device = match value["device"].as_str() {
                    Some(name) => Some(boot_device(name).ok_or("unknown boot device")?),
                    None => None,
                };
                Ok(BootDeviceSetting {
                    device,
                    persistent: value["persistent"].as_bool(),
                })
            },
        )
        .await
    }

    /// [`Conductor::supported_boot_devices`] on the node's owner.
    pub async fn supported_boot_devices(
        &self,
        node: Uuid,
    ) -> Result<Vec<BootDevice>, ConductorError> {
        self.dispatch(
            node,
            || Action::SupportedBootDevices,
            |conductor| async move { conductor.supported_boot_devices(node).await },
            |value| {
                value
                    .as_array()
                    .ok_or("not a list")?
                    .iter()
                    .map(|name| {
                        name.as_str()
                            .and_then(boot_device)
                            .ok_or_else(|| format!("unknown boot device {name}"))
                    })
                    .collect()
            },
        )
        .await
    }

    /// [`Conductor::validate`] on the node's owner.
    pub async fn validate(&self, node: Uuid) -> Result<NodeValidation, ConductorError> {
        self.dispatch(
            node,
            || Action::Validate,
            |conductor| async move { conductor.validate(node).await },
            |value| {
                let mut answers = NodeValidation::new();
                for (name, answer) in value.as_object().ok_or("not an object")? {
                    let kind = InterfaceKind::from_name(name)
                        .ok_or_else(|| format!("unknown interface {name}"))?;
                    answers.insert(
                        kind,
                        ValidationResult {
                            result: answer["result"].as_bool().unwrap_or(false),
                            reason: answer["reason"].as_str().map(str::to_owned),
                        },
                    );
                }
                Ok(answers)
            },
        )
        .await
    }

    /// [`Conductor::continue_node`] on the node's owner.
    pub async fn continue_node(&self, node: Uuid) -> Result<(), ConductorError> {
        self.dispatch(
            node,
            || Action::ContinueNode,
            |conductor| async move { conductor.continue_node(node).await },
            unit,
        )
        .await
    }

    /// [`Conductor::heartbeat`] on the node's owner: an agent's heartbeat may reach any API
    /// process.
    pub async fn heartbeat(&self, node: Uuid, beat: Heartbeat) -> Result<(), ConductorError> {
        let wire = beat.clone();
        self.dispatch(
            node,
            || Action::Heartbeat {
                callback_url: wire.callback_url,
                agent_token: wire.agent_token,
                agent_version: wire.agent_version,
                agent_verify_ca: wire.agent_verify_ca,
                agent_status: wire.agent_status,
                agent_status_message: wire.agent_status_message,
            },
            |conductor| async move { conductor.heartbeat(node, beat).await },
            unit,
        )
        .await
    }

    /// [`Conductor::agent_lookup_token`] on the node's owner.
    pub async fn agent_lookup_token(&self, node: Uuid) -> Result<AgentToken, ConductorError> {
        self.dispatch(
            node,
            || Action::AgentLookupToken,
            |conductor| async move { conductor.agent_lookup_token(node).await },
            |value| {
                Ok(match value {
                    Value::String(token) => AgentToken::Minted(token),
                    _ => AgentToken::AlreadyIssued,
                })
            },
        )
        .await
    }

    /// [`Conductor::abort_deployment`] on the node's owner.
    pub async fn abort_deployment(&self, node: Uuid) -> Result<(), ConductorError> {
        self.dispatch(
            node,
            || Action::AbortDeployment,
            |conductor| async move { conductor.abort_deployment(node).await },
            unit,
        )
        .await
    }

    /// [`Conductor::continue_inspection`] on the node's owner.
    pub async fn continue_inspection(
        &self,
        node: Uuid,
        payload: Value,
        mint_token: bool,
    ) -> Result<Option<String>, ConductorError> {
        let wire = payload.clone();
        self.dispatch(
            node,
            || Action::ContinueInspection {
                payload: wire,
                mint_token,
            },
            |conductor| async move {
                conductor
                    .continue_inspection(node, payload, mint_token)
                    .await
            },
            |value| Ok(value.as_str().map(str::to_owned)),
        )
        .await
    }
}

fn unit(_: Value) -> Result<(), String> {
    Ok(())
}
