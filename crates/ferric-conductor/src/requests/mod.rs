//! The API ↔ conductor hand-off across processes (issue 10; operator view in
//! `docs/scale-out.md`).
//!
//! Theory of operation: the API holds a [`Handoff`], never a conductor directly, and asks
//! everything of the conductor as one typed [`Action`] through [`Handoff::call`]. For each
//! action on a node it asks the hash ring (`ring.rs`) who owns the node. When the owner is
//! this process's own conductor (role `all`, and always on SQLite) the call is the plain
//! in-process [`Conductor::execute`]. Otherwise the action is serialized (`ferric_model::action`:
//! versioned, and pinned to an older version during a rolling upgrade) into a
//! `conductor_requests` row addressed to the owner and the owner is woken by `NOTIFY`; the
//! owner's request server (`server.rs`) claims the row, runs the very same
//! [`Conductor::execute`] — which returns once the first transition is durable — and writes
//! the reply (`wire.rs`), which wakes the waiting API process. An owner that does not answer
//! before [`ConductorConfig::request_timeout`] gets a 503 that names it; a request nobody
//! claimed by then is withdrawn so it never runs late.
//!
//! `PUT …/states/provision` is routed by the node the API has just read ([`Handoff::call_read`]),
//! so the hand-off reads no node row of its own. Both sides also poll every 0.5 s, so a
//! notification lost while a listener reconnects only delays a request. An error relayed from
//! another conductor keeps only its text (its fields, such as the failed `Component`, are `None`).
//!
//! Why a table and not a direct call (HTTP, RPC) to the owner: PostgreSQL is already the one thing
//! every process reaches, so conductors need no listening port, address registry, TLS or
//! credentials of their own; a request is durable and inspectable (`SELECT * FROM
//! conductor_requests`); claiming is a compare-and-set like the leases, so two conductors never run
//! one request. The cost is a few statements and about 1 ms of `NOTIFY` latency per request, small
//! next to the work a request starts.
//!
//! What happens when a side dies mid-request:
//!
//! - The owner dies before claiming (or is too slow): at `request_timeout` the API withdraws the
//!   row (`DELETE … WHERE claimed_at IS NULL`), so it can never run later, and answers 503
//!   "conductor X did not answer; nothing was done; retry". By then the ring has usually dropped X
//!   and the retry goes to the new owner.
//! - The owner claims and dies before replying: the request may or may not have made its first
//!   transition. The API waits a second `request_timeout`, then answers 503 "took the request but
//!   did not answer; check the node's state". If the transition was made, the node sits in a
//!   transient state under X's lapsing lease and the new owner's recovery fails it with
//!   `last_error`, as after any crash; if not, nothing happened.
//! - The API process dies before the reply: the conductor runs the request anyway (as if the client
//!   had disconnected after sending it; the node's history records it), and the unread reply is
//!   purged with the row two request timeouts after its deadline.
//! - A ring disagreement (one process already dropped a conductor, another not yet) is harmless:
//!   any conductor may run any request, because the node's lease, not the ring, serializes work.

mod server;
mod wire;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use chrono::TimeDelta;
use ferric_db::{MEMBERSHIP_CHANNEL, REPLIES_CHANNEL, Store};
use ferric_drivers::Drivers;
use ferric_model::Verb;
use ferric_model::action::{Action, ActionReply, HandoffError};
use ferric_model::resources::{Ident, JsonObject, Node};
use ferric_model::values::{
    BootDevice, BootDeviceSetting, BootMode, Indicator, IndicatorState, PowerAction, VmediaDevice,
    VmediaSlot,
};
use serde_json::Value;
use tokio::sync::Notify;
use uuid::Uuid;

use server::recv;
pub(crate) use server::{purge, spawn_server};
use wire::Reply;

use crate::{
    AgentToken, Conductor, ConductorConfig, ConductorError, Heartbeat, Membership, NodeValidation,
    ProvisionArgs, ReconcilerStatus, VendorReply, lock,
};

/// How often each side looks at the table even without a notification (a listener that
/// reconnected may have missed some).
const POLL: Duration = Duration::from_millis(500);

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
    /// every [`crate::ring::LIVENESS_INTERVAL`] until `shutdown` (an API-only process has no conductor to do
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
        // A conductor that died loses its lock at once: look every second, not only at
        // heartbeats, so its nodes move on promptly.
        let period = crate::ring::LIVENESS_INTERVAL.min(self.inner.config.heartbeat_interval);
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
        if !rings.is_loaded() && self.inner.local.is_some() {
            return Ok(None);
        }
        let record = self.inner.store.node_get(&Ident::Uuid(node)).await?;
        self.route_record(&record)
    }

    /// [`Handoff::route`] for a node the caller has just read (its driver, conductor group
    /// and UUID are what the ring needs; a node moved meanwhile is the owner's to refuse).
    fn route_record(&self, record: &Node) -> Result<Option<String>, ConductorError> {
        let rings = self.inner.membership.rings();
        let local = self.inner.local.as_ref();
        if !rings.is_loaded() && local.is_some() {
            return Ok(None);
        }
        match rings.owner(record) {
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
        let body = self.inner.config.handoff.encode(action).map_err(refused)?;
        let timeout = self.inner.config.request_timeout;
        let deadline = store.now() + TimeDelta::from_std(timeout).unwrap_or(TimeDelta::seconds(30));
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

    /// Runs `action` on the owner of `node`: in this process, or handed over to the owner
    /// and waited for. The one way the API asks anything of a node's conductor.
    pub async fn call(&self, node: Uuid, action: Action) -> Result<ActionReply, ConductorError> {
        let owner = self.route(node).await?;
        self.call_owner(owner, node, action).await
    }

    /// [`Handoff::call`] on a node the caller has just read: routed by that record, one
    /// read of the node less.
    pub async fn call_read(
        &self,
        node: &Node,
        action: Action,
    ) -> Result<ActionReply, ConductorError> {
        let owner = self.route_record(node)?;
        self.call_owner(owner, node.uuid, action).await
    }

    async fn call_owner(
        &self,
        owner: Option<String>,
        node: Uuid,
        action: Action,
    ) -> Result<ActionReply, ConductorError> {
        match (owner, &self.inner.local) {
            (None, Some(conductor)) => conductor.execute(node, action).await,
            // Pinned below the action's version, the owner may not know it; what touches no
            // hardware this process can answer itself.
            (Some(_), _)
                if action.runs_anywhere() && self.inner.config.handoff.check(&action).is_err() =>
            {
                crate::catalog::run_here(&self.inner.store, &self.inner.drivers, node, &action)
                    .await
            }
            (Some(owner), _) => {
                let value = self.remote(&owner, node, &action).await?;
                ActionReply::from_value(&action, value).map_err(|error| {
                    ConductorError::Remote(format!("conductor {owner} answered oddly: {error}"))
                })
            }
            (None, None) => Err(ConductorError::Unavailable(
                "This API process runs no conductor and none is alive; start one.".to_owned(),
            )),
        }
    }

    /// [`Handoff::call`] for an action that returns nothing.
    async fn call_done(&self, node: Uuid, action: Action) -> Result<(), ConductorError> {
        self.call(node, action).await.map(drop)
    }

    // What follows are typed shorthands for `call`, one line each, for the API's handlers.

    /// [`Conductor::provision`] on the owner of `node`, as the API has just read it.
    pub async fn provision(
        &self,
        node: &Node,
        verb: Verb,
        args: ProvisionArgs,
    ) -> Result<(), ConductorError> {
        self.call_read(node, Action::Provision { verb, args })
            .await
            .map(drop)
    }

    /// [`Conductor::set_power`] on the node's owner.
    pub async fn set_power(
        &self,
        node: Uuid,
        power: PowerAction,
        timeout: Option<Duration>,
    ) -> Result<(), ConductorError> {
        self.call_done(node, Action::set_power(power, timeout))
            .await
    }

    /// [`Conductor::set_boot_device`] on the node's owner.
    pub async fn set_boot_device(
        &self,
        node: Uuid,
        device: BootDevice,
        persistent: bool,
    ) -> Result<(), ConductorError> {
        self.call_done(node, Action::SetBootDevice { device, persistent })
            .await
    }

    /// [`Conductor::set_boot_mode`] on the node's owner.
    pub async fn set_boot_mode(&self, node: Uuid, mode: BootMode) -> Result<(), ConductorError> {
        self.call_done(node, Action::SetBootMode { mode }).await
    }

    /// [`Conductor::set_secure_boot`] on the node's owner.
    pub async fn set_secure_boot(&self, node: Uuid, enabled: bool) -> Result<(), ConductorError> {
        self.call_done(node, Action::SetSecureBoot { enabled })
            .await
    }

    /// [`Conductor::inject_nmi`] on the node's owner.
    pub async fn inject_nmi(&self, node: Uuid) -> Result<(), ConductorError> {
        self.call_done(node, Action::InjectNmi).await
    }

    /// [`Conductor::indicators`] on the node's owner.
    pub async fn indicators(&self, node: Uuid) -> Result<Vec<Indicator>, ConductorError> {
        match self.call(node, Action::Indicators).await? {
            ActionReply::Indicators(indicators) => Ok(indicators),
            other => Err(unexpected(&other)),
        }
    }

    /// [`Conductor::indicator_state`] on the node's owner.
    pub async fn indicator_state(
        &self,
        node: Uuid,
        component: &str,
        name: &str,
    ) -> Result<IndicatorState, ConductorError> {
        let action = Action::GetIndicator {
            component: component.to_owned(),
            name: name.to_owned(),
        };
        match self.call(node, action).await? {
            ActionReply::IndicatorState(state) => Ok(state),
            other => Err(unexpected(&other)),
        }
    }

    /// [`Conductor::set_indicator_state`] on the node's owner.
    pub async fn set_indicator_state(
        &self,
        node: Uuid,
        component: &str,
        name: &str,
        state: IndicatorState,
    ) -> Result<(), ConductorError> {
        let action = Action::SetIndicator {
            component: component.to_owned(),
            name: name.to_owned(),
            state,
        };
        self.call_done(node, action).await
    }

    /// [`Conductor::vmedia_attach`] on the node's owner.
    pub async fn vmedia_attach(
        &self,
        node: Uuid,
        device: VmediaDevice,
        url: &str,
    ) -> Result<(), ConductorError> {
        let url = url.to_owned();
        self.call_done(node, Action::VmediaAttach { device, url })
            .await
    }

    /// [`Conductor::vmedia_detach`] on the node's owner.
    pub async fn vmedia_detach(
        &self,
        node: Uuid,
        devices: &[VmediaDevice],
    ) -> Result<(), ConductorError> {
        let devices = devices.to_vec();
        self.call_done(node, Action::VmediaDetach { devices }).await
    }

    /// [`Conductor::vmedia_list`] on the node's owner, as the API shows it.
    pub async fn vmedia_list(&self, node: Uuid) -> Result<Vec<Value>, ConductorError> {
        match self.call(node, Action::VmediaList).await? {
            ActionReply::Vmedia(slots) => Ok(slots.iter().map(VmediaSlot::to_json).collect()),
            other => Err(unexpected(&other)),
        }
    }

    /// [`Conductor::vendor_passthru`] on the node's owner.
    pub async fn vendor_passthru(
        &self,
        node: Uuid,
        method: &str,
        http_method: &str,
        args: JsonObject,
    ) -> Result<VendorReply, ConductorError> {
        let action = Action::VendorPassthru {
            method: method.to_owned(),
            http_method: http_method.to_owned(),
            args,
        };
        match self.call(node, action).await? {
            ActionReply::Vendor(reply) => Ok(reply),
            other => Err(unexpected(&other)),
        }
    }

    /// [`Conductor::vendor_methods`] on the node's owner.
    pub async fn vendor_methods(&self, node: Uuid) -> Result<Value, ConductorError> {
        match self.call(node, Action::VendorMethods).await? {
            ActionReply::Methods(listing) => Ok(listing),
            other => Err(unexpected(&other)),
        }
    }

    /// [`Conductor::validate_raid_target`] on the node's owner.
    pub async fn validate_raid_target(
        &self,
        node: Uuid,
        target: JsonObject,
    ) -> Result<(), ConductorError> {
        self.call_done(node, Action::ValidateRaidTarget { target })
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
        match self.call(node, Action::GetBootDevice).await? {
            ActionReply::BootDevice(setting) => Ok(setting),
            other => Err(unexpected(&other)),
        }
    }

    /// [`Conductor::supported_boot_devices`] on the node's owner.
    pub async fn supported_boot_devices(
        &self,
        node: Uuid,
    ) -> Result<Vec<BootDevice>, ConductorError> {
        match self.call(node, Action::SupportedBootDevices).await? {
            ActionReply::BootDevices(devices) => Ok(devices),
            other => Err(unexpected(&other)),
        }
    }

    /// [`Conductor::validate`] on the node's owner.
    pub async fn validate(&self, node: Uuid) -> Result<NodeValidation, ConductorError> {
        match self.call(node, Action::Validate).await? {
            ActionReply::Validation(answers) => Ok(answers),
            other => Err(unexpected(&other)),
        }
    }

    /// [`Conductor::continue_node`] on the node's owner.
    pub async fn continue_node(&self, node: Uuid) -> Result<(), ConductorError> {
        self.call_done(node, Action::ContinueNode).await
    }

    /// [`Conductor::heartbeat`] on the node's owner: an agent's heartbeat may reach any API
    /// process.
    pub async fn heartbeat(&self, node: Uuid, beat: Heartbeat) -> Result<(), ConductorError> {
        self.call_done(node, Action::Heartbeat(beat)).await
    }

    /// [`Handoff::heartbeat`] for a node the API has just read: routed by that record and, in
    /// this process, checked on it ([`Conductor::heartbeat_read`]), so the conductor reads the
    /// node once, under its lease, instead of three times.
    pub async fn heartbeat_read(&self, node: &Node, beat: Heartbeat) -> Result<(), ConductorError> {
        let owner = self.route_record(node)?;
        match (owner, &self.inner.local) {
            (None, Some(conductor)) => conductor.heartbeat_read(node, beat).await,
            (owner, _) => self
                .call_owner(owner, node.uuid, Action::Heartbeat(beat))
                .await
                .map(drop),
        }
    }

    /// [`Conductor::agent_lookup_token`] on the node's owner.
    pub async fn agent_lookup_token(&self, node: Uuid) -> Result<AgentToken, ConductorError> {
        match self.call(node, Action::AgentLookupToken).await? {
            ActionReply::Token(Some(token)) => Ok(AgentToken::Minted(token)),
            ActionReply::Token(None) => Ok(AgentToken::AlreadyIssued),
            other => Err(unexpected(&other)),
        }
    }

    /// [`Conductor::abort_deployment`] on the node's owner.
    pub async fn abort_deployment(&self, node: Uuid) -> Result<(), ConductorError> {
        self.call_done(node, Action::AbortDeployment).await
    }

    /// [`Conductor::continue_inspection`] on the node's owner.
    pub async fn continue_inspection(
        &self,
        node: Uuid,
        payload: Value,
        mint_token: bool,
    ) -> Result<Option<String>, ConductorError> {
        let action = Action::ContinueInspection {
            payload,
            mint_token,
        };
        match self.call(node, action).await? {
            ActionReply::Token(token) => Ok(token),
            other => Err(unexpected(&other)),
        }
    }
}

/// Serial consoles (issue 24): the API's shorthands.
impl Handoff {
    /// [`Conductor::set_console`] on the node's owner.
    pub async fn set_console(&self, node: Uuid, enabled: bool) -> Result<(), ConductorError> {
        self.call_done(node, Action::SetConsole { enabled }).await
    }

    /// [`Conductor::console_info`] on the node's owner.
    pub async fn console_info(
        &self,
        node: Uuid,
    ) -> Result<Option<crate::ConsoleInfo>, ConductorError> {
        match self.call(node, Action::ConsoleInfo).await? {
            ActionReply::Console(value) => console_info_from_json(&value),
            other => Err(unexpected(&other)),
        }
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
                "The console of node {node} is relayed by conductor {owner}; connect to the \
                 API of that conductor's process, or to the TCP relay GET \
                 …/states/console names."
            ))),
            (None, None) => Err(ConductorError::Unavailable(
                "This API process runs no conductor and none is alive; start one.".to_owned(),
            )),
        }
    }
}

/// A console's `{"type", "url"}` as a conductor answered it (null while off).
fn console_info_from_json(value: &Value) -> Result<Option<crate::ConsoleInfo>, ConductorError> {
    if value.is_null() {
        return Ok(None);
    }
    let url = value
        .get("url")
        .and_then(Value::as_str)
        .ok_or_else(|| ConductorError::Remote(format!("console info without a url: {value}")))?;
    Ok(Some(crate::ConsoleInfo {
        kind: "socat",
        url: url.to_owned(),
    }))
}

/// A reply of the wrong kind for its action: a bug in [`Conductor::execute`].
fn unexpected(reply: &ActionReply) -> ConductorError {
    ConductorError::Remote(format!(
        "the conductor answered with the wrong kind of reply: {reply:?}"
    ))
}

/// A request this process may not send while pinned (409: retry once the upgrade is done), or
/// could not encode.
fn refused(error: HandoffError) -> ConductorError {
    match error {
        HandoffError::Pinned { .. } => ConductorError::Conflict(error.to_string()),
        HandoffError::Unsupported { .. } | HandoffError::Malformed(_) => {
            ConductorError::Remote(error.to_string())
        }
    }
}
