//! Ferric's Prometheus metrics: what `GET /metrics` shows (`docs/operator-guide.md#metrics`
//! says what each one means to an operator).
//!
//! Theory of operation: a [`Metrics`] is a cheap handle (an `Arc`) on one `prometheus-client`
//! registry and the metric families in it. Nothing is global: `ferric server` creates one and
//! hands it to the drivers (`Drivers::with_metrics`: BMC requests), the conductor takes it from
//! its drivers (transitions, failures, time spent per state) and the API from its conductor
//! (requests per route, agent lookups and heartbeats, and the scrape itself). Tests each build
//! their own parts, so each has its own registry and none counts another's work.
//!
//! Events are counted where they happen, for the price of a hash lookup and an atomic add.
//! What is a level rather than an event — nodes per provision and power state, the conductor's
//! worker pool — is read when Prometheus scrapes ([`Snapshot`], one grouped query), so no
//! per-node bookkeeping rides on the API's or the conductor's hot paths.
//!
//! Why `prometheus-client` (the Prometheus project's own Rust client) rather than `metrics` with
//! `metrics-exporter-prometheus`: its registry is a value passed around, not a process-global
//! recorder, so parallel tests each build their own and never see each other's counts, and there is
//! no global to install. Label sets are typed structs (`EncodeLabelSet`) of `&'static str` wire
//! names, so recording allocates nothing but an API request's route string.

use std::borrow::Cow;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use ferric_model::resources::PowerState;
use ferric_model::{Event, ProvisionState};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};

/// The media type of [`Metrics::encode`]'s text (OpenMetrics 1.0, which Prometheus scrapes
/// natively; its text is also readable by anything that reads the classic text format).
pub const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// A label value: a wire name known at compile time, or (for routes) an owned string.
type Label = Cow<'static, str>;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct TransitionLabels {
    from: Label,
    event: Label,
    to: Label,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct StateLabels {
    state: Label,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ProvisionStateLabels {
    provision_state: Label,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct PowerStateLabels {
    power_state: Label,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct BmcLabels {
    driver: Label,
    operation: Label,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ResultLabels {
    result: Label,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct RouteLabels {
    method: Label,
    route: Label,
    status: u16,
}

type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

/// Seconds a node spends in one state: from a fraction of a second (`verifying` on fake
/// hardware) to hours (a slow erase, a long `wait call-back`).
fn state_duration_histogram() -> Histogram {
    Histogram::new([
        0.1, 0.5, 1.0, 5.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0, 3600.0, 7200.0, 21600.0,
    ])
}

/// Seconds a BMC takes: Redfish requests of ~10 ms to power actions that wait a minute for
/// the new state to show.
fn bmc_duration_histogram() -> Histogram {
    Histogram::new([
        0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0,
    ])
}

/// Seconds the API takes to answer: a millisecond for a node to seconds for a large listing.
fn api_duration_histogram() -> Histogram {
    Histogram::new([
        0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
    ])
}

/// How an agent's lookup or heartbeat ended, by the API's answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AgentResult {
    /// 2xx: the node was found, or the heartbeat accepted.
    Accepted,
    /// 404: no node matched (or it does not expect an agent now).
    NotFound,
    /// Another 4xx: a malformed request, a wrong token, a node locked by a conductor.
    Rejected,
    /// 5xx: Ferric could not serve it.
    Error,
}

impl AgentResult {
    /// The result an HTTP status stands for.
    pub fn from_status(status: u16) -> Self {
        match status {
            200..=299 => Self::Accepted,
            404 => Self::NotFound,
            400..=499 => Self::Rejected,
            _ => Self::Error,
        }
    }

    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Accepted => "accepted",
            Self::NotFound => "not_found",
            Self::Rejected => "rejected",
            Self::Error => "error",
        }
    }
}

/// The levels read at scrape time.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// Nodes per provision state (states absent here are shown as 0).
    pub provision_states: Vec<(ProvisionState, u64)>,
    /// Nodes per power state; `None` is a node whose power state was never read.
    pub power_states: Vec<(Option<PowerState>, u64)>,
    /// The conductor's worker pool, when this process runs a conductor.
    pub workers: Option<WorkerPool>,
}

/// A conductor's worker slots.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WorkerPool {
    pub in_use: usize,
    pub free: usize,
}

/// The name a power state has in the `power_state` label.
fn power_state_label(state: Option<PowerState>) -> &'static str {
    state.map_or("none", PowerState::as_str)
}

/// A handle on this process's metrics; clones share them.
#[derive(Clone)]
pub struct Metrics {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Metrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Metrics").finish_non_exhaustive()
    }
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

struct Inner {
    registry: Registry,
    /// Held while a scrape sets the levels and encodes, so two scrapes never interleave.
    scrape: Mutex<()>,
    nodes_by_provision_state: Family<ProvisionStateLabels, Gauge>,
    nodes_by_power_state: Family<PowerStateLabels, Gauge>,
    transitions: Family<TransitionLabels, Counter>,
    failures: Family<StateLabels, Counter>,
    state_duration: Histograms<StateLabels>,
    bmc_duration: Histograms<BmcLabels>,
    bmc_errors: Family<BmcLabels, Counter>,
    agent_lookups: Family<ResultLabels, Counter>,
    agent_heartbeats: Family<ResultLabels, Counter>,
    api_duration: Histograms<RouteLabels>,
    workers: Family<StateLabels, Gauge>,
    image_cache_hits: Counter,
    image_cache_misses: Counter,
    image_cache_evictions: Counter,
    image_cache_bytes: Gauge,
    switch_port_drifts: Family<SwitchLabels, Counter>,
    switch_port_repairs: Family<SwitchLabels, Counter>,
}

/// The `switch` label: the switch's name in the switch file.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct SwitchLabels {
    switch: String,
}

impl Metrics {
    /// A fresh registry with every Ferric metric in it.
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("ferric");
        let nodes_by_provision_state = Family::<ProvisionStateLabels, Gauge>::default();
        registry.register(
            "nodes_by_provision_state",
            "Nodes in each provision state, read from the database at scrape time",
            nodes_by_provision_state.clone(),
        );
        let nodes_by_power_state = Family::<PowerStateLabels, Gauge>::default();
        registry.register(
            "nodes_by_power_state",
            "Nodes in each power state (none: never read), read from the database at scrape time",
            nodes_by_power_state.clone(),
        );
        let transitions = Family::<TransitionLabels, Counter>::default();
        registry.register(
            "node_transitions",
            "Provision state transitions the conductor made, per (from, event, to)",
            transitions.clone(),
        );
        let failures = Family::<StateLabels, Counter>::default();
        registry.register(
            "node_failures",
            "Nodes that entered a failed provision state (deploy failed, clean failed, ...)",
            failures.clone(),
        );
        let state_duration: Histograms<StateLabels> =
            Family::new_with_constructor(state_duration_histogram);
        registry.register_with_unit(
            "node_state_duration",
            "Time a node spent in a provision state, observed when it left the state",
            Unit::Seconds,
            state_duration.clone(),
        );
        let bmc_duration: Histograms<BmcLabels> =
            Family::new_with_constructor(bmc_duration_histogram);
        registry.register_with_unit(
            "bmc_request_duration",
            "Time a power or management call to a BMC took through its driver, retries and \
             waiting for a power action to show included",
            Unit::Seconds,
            bmc_duration.clone(),
        );
        let bmc_errors = Family::<BmcLabels, Counter>::default();
        registry.register(
            "bmc_request_errors",
            "Power or management calls to a BMC that failed",
            bmc_errors.clone(),
        );
        let agent_lookups = Family::<ResultLabels, Counter>::default();
        registry.register(
            "agent_lookups",
            "Agent lookups (GET /v1/lookup) by result",
            agent_lookups.clone(),
        );
        let agent_heartbeats = Family::<ResultLabels, Counter>::default();
        registry.register(
            "agent_heartbeats",
            "Agent heartbeats (POST /v1/heartbeat/{node}) by result",
            agent_heartbeats.clone(),
        );
        let api_duration: Histograms<RouteLabels> =
            Family::new_with_constructor(api_duration_histogram);
        registry.register_with_unit(
            "api_request_duration",
            "Time the API took to answer, per method, route template and status",
            Unit::Seconds,
            api_duration.clone(),
        );
        let workers = Family::<StateLabels, Gauge>::default();
        registry.register(
            "conductor_workers",
            "The conductor's worker slots, in use and free (none free: requests get 503)",
            workers.clone(),
        );
        let image_cache_hits = Counter::default();
        registry.register(
            "image_cache_hits",
            "Instance images the conductor's image cache already held (or another deploy was \
             downloading) when a deploy asked for them",
            image_cache_hits.clone(),
        );
        let image_cache_misses = Counter::default();
        registry.register(
            "image_cache_misses",
            "Instance images the conductor's image cache downloaded for a deploy",
            image_cache_misses.clone(),
        );
        let image_cache_evictions = Counter::default();
        registry.register(
            "image_cache_evictions",
            "Images removed from the conductor's image cache, least recently used first, to \
             make room (image_cache_size)",
            image_cache_evictions.clone(),
        );
        let image_cache_bytes = Gauge::default();
        registry.register_with_unit(
            "image_cache",
            "Bytes of images held in the conductor's image cache",
            Unit::Bytes,
            image_cache_bytes.clone(),
        );
        let switch_port_drifts = Family::<SwitchLabels, Counter>::default();
        registry.register(
            "switch_port_drifts",
            "Managed switch ports the drift check found on another VLAN than Ferric left them on",
            switch_port_drifts.clone(),
        );
        let switch_port_repairs = Family::<SwitchLabels, Counter>::default();
        registry.register(
            "switch_port_repairs",
            "Drifted switch ports the drift check put back (switch_drift_repair)",
            switch_port_repairs.clone(),
        );
        Self {
            inner: Arc::new(Inner {
                registry,
                scrape: Mutex::new(()),
                nodes_by_provision_state,
                nodes_by_power_state,
                transitions,
                failures,
                state_duration,
                bmc_duration,
                bmc_errors,
                agent_lookups,
                agent_heartbeats,
                api_duration,
                workers,
                image_cache_hits,
                image_cache_misses,
                image_cache_evictions,
                image_cache_bytes,
                switch_port_drifts,
                switch_port_repairs,
            }),
        }
    }

    /// The drift check found a port of `switch` on another VLAN than Ferric left it on.
    pub fn switch_port_drift(&self, switch: &str) {
        self.inner
            .switch_port_drifts
            .get_or_create(&SwitchLabels {
                switch: switch.to_owned(),
            })
            .inc();
    }

    /// The drift check put a port of `switch` back.
    pub fn switch_port_repair(&self, switch: &str) {
        self.inner
            .switch_port_repairs
            .get_or_create(&SwitchLabels {
                switch: switch.to_owned(),
            })
            .inc();
    }

    /// A deploy found its image in the conductor's image cache.
    pub fn image_cache_hit(&self) {
        self.inner.image_cache_hits.inc();
    }

    /// A deploy's image was downloaded into the conductor's image cache.
    pub fn image_cache_miss(&self) {
        self.inner.image_cache_misses.inc();
    }

    /// An image left the conductor's image cache to make room.
    pub fn image_cache_eviction(&self) {
        self.inner.image_cache_evictions.inc();
    }

    /// The bytes the conductor's image cache holds now.
    pub fn image_cache_size(&self, bytes: u64) {
        self.inner
            .image_cache_bytes
            .set(i64::try_from(bytes).unwrap_or(i64::MAX));
    }

    /// A provision state transition: counted, and a failure when it enters a failed state.
    /// `time_in_from` is how long the node was in `from` (from its `provision_updated_at`).
    pub fn transition(
        &self,
        from: ProvisionState,
        event: Event,
        to: ProvisionState,
        time_in_from: Option<Duration>,
    ) {
        let inner = &self.inner;
        inner
            .transitions
            .get_or_create(&TransitionLabels {
                from: Cow::Borrowed(from.as_str()),
                event: Cow::Borrowed(event.as_str()),
                to: Cow::Borrowed(to.as_str()),
            })
            .inc();
        if to.is_failure() {
            inner
                .failures
                .get_or_create(&StateLabels {
                    state: Cow::Borrowed(to.as_str()),
                })
                .inc();
        }
        if let Some(spent) = time_in_from {
            inner
                .state_duration
                .get_or_create(&StateLabels {
                    state: Cow::Borrowed(from.as_str()),
                })
                .observe(spent.as_secs_f64());
        }
    }

    /// One power or management call to a BMC through the driver `driver`.
    pub fn bmc_request(
        &self,
        driver: &'static str,
        operation: &'static str,
        took: Duration,
        succeeded: bool,
    ) {
        let labels = BmcLabels {
            driver: Cow::Borrowed(driver),
            operation: Cow::Borrowed(operation),
        };
        self.inner
            .bmc_duration
            .get_or_create(&labels)
            .observe(took.as_secs_f64());
        if !succeeded {
            self.inner.bmc_errors.get_or_create(&labels).inc();
        }
    }

    /// An agent's lookup, by how it ended.
    pub fn agent_lookup(&self, result: AgentResult) {
        self.inner
            .agent_lookups
            .get_or_create(&ResultLabels {
                result: Cow::Borrowed(result.as_str()),
            })
            .inc();
    }

    /// An agent's heartbeat, by how it ended.
    pub fn agent_heartbeat(&self, result: AgentResult) {
        self.inner
            .agent_heartbeats
            .get_or_create(&ResultLabels {
                result: Cow::Borrowed(result.as_str()),
            })
            .inc();
    }

    /// One API request: `route` is the matched path template (`/v1/nodes/{node_ident}`), never
    /// the raw path, so the number of series stays bounded. Taken by value: the caller's
    /// string is the label, with no copy on the request path.
    pub fn api_request(
        &self,
        method: &str,
        route: impl Into<Cow<'static, str>>,
        status: u16,
        took: Duration,
    ) {
        self.inner
            .api_duration
            .get_or_create(&RouteLabels {
                method: method_label(method),
                route: route.into(),
                status,
            })
            .observe(took.as_secs_f64());
    }

    /// The metrics in OpenMetrics text ([`CONTENT_TYPE`]), with the levels from `snapshot`.
    pub fn encode(&self, snapshot: &Snapshot) -> String {
        let inner = &self.inner;
        let _scrape = inner.scrape.lock().unwrap_or_else(PoisonError::into_inner);
        let provision = |state: ProvisionState| ProvisionStateLabels {
            provision_state: Cow::Borrowed(state.as_str()),
        };
        for state in ProvisionState::ALL {
            inner
                .nodes_by_provision_state
                .get_or_create(&provision(state))
                .set(0);
        }
        for (state, count) in &snapshot.provision_states {
            inner
                .nodes_by_provision_state
                .get_or_create(&provision(*state))
                .set(gauge_value(*count));
        }
        let power = |state: Option<PowerState>| PowerStateLabels {
            power_state: Cow::Borrowed(power_state_label(state)),
        };
        for state in [
            Some(PowerState::On),
            Some(PowerState::Off),
            Some(PowerState::Error),
            None,
        ] {
            inner
                .nodes_by_power_state
                .get_or_create(&power(state))
                .set(0);
        }
        for (state, count) in &snapshot.power_states {
            inner
                .nodes_by_power_state
                .get_or_create(&power(*state))
                .set(gauge_value(*count));
        }
        inner.workers.clear();
        if let Some(pool) = snapshot.workers {
            for (state, count) in [("in_use", pool.in_use), ("free", pool.free)] {
                inner
                    .workers
                    .get_or_create(&StateLabels {
                        state: Cow::Borrowed(state),
                    })
                    .set(gauge_value(count as u64));
            }
        }
        let mut text = String::new();
        // Writing into a String cannot fail; the encoder only passes on the writer's errors.
        let _ = prometheus_client::encoding::text::encode(&mut text, &inner.registry);
        text
    }
}

/// An HTTP method as a label, without allocating for the methods the API serves.
fn method_label(method: &str) -> Label {
    const KNOWN: [&str; 7] = ["GET", "POST", "PUT", "PATCH", "DELETE", "HEAD", "OPTIONS"];
    match KNOWN.iter().find(|known| **known == method) {
        Some(known) => Cow::Borrowed(known),
        None => Cow::Owned(method.to_owned()),
    }
}

fn gauge_value(count: u64) -> i64 {
    i64::try_from(count).unwrap_or(i64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The value of the sample line that starts with `prefix` (name and labels), if any.
    fn sample(text: &str, prefix: &str) -> Option<f64> {
        text.lines()
            .find(|line| line.starts_with(prefix))
            .and_then(|line| line.rsplit(' ').next())
            .and_then(|value| value.parse().ok())
    }

    #[test]
    fn transitions_failures_and_time_per_state_are_counted() {
        let metrics = Metrics::new();
        metrics.transition(
            ProvisionState::Available,
            Event::Deploy,
            ProvisionState::Deploying,
            Some(Duration::from_secs(2)),
        );
        metrics.transition(
            ProvisionState::Deploying,
            Event::Fail,
            ProvisionState::DeployFailed,
            Some(Duration::from_millis(300)),
        );
        let text = metrics.encode(&Snapshot::default());
        assert_eq!(
            sample(
                &text,
                r#"ferric_node_transitions_total{from="available",event="deploy",to="deploying"}"#
            ),
            Some(1.0),
            "{text}"
        );
        assert_eq!(
            sample(
                &text,
                r#"ferric_node_failures_total{state="deploy failed"}"#
            ),
            Some(1.0)
        );
        assert_eq!(
            sample(
                &text,
                r#"ferric_node_state_duration_seconds_count{state="available"}"#
            ),
            Some(1.0)
        );
        assert_eq!(
            sample(
                &text,
                r#"ferric_node_state_duration_seconds_sum{state="deploying"}"#
            ),
            Some(0.3)
        );
        assert!(text.ends_with("# EOF\n"), "{text}");
    }

    #[test]
    fn levels_come_from_the_snapshot_with_absent_states_at_zero() {
        let metrics = Metrics::new();
        let snapshot = Snapshot {
            provision_states: vec![(ProvisionState::Available, 3)],
            power_states: vec![(Some(PowerState::Off), 2), (None, 1)],
            workers: Some(WorkerPool { in_use: 1, free: 9 }),
        };
        let text = metrics.encode(&snapshot);
        let value = |prefix: &str| sample(&text, prefix);
        assert_eq!(
            value(r#"ferric_nodes_by_provision_state{provision_state="available"}"#),
            Some(3.0)
        );
        assert_eq!(
            value(r#"ferric_nodes_by_provision_state{provision_state="active"}"#),
            Some(0.0)
        );
        assert_eq!(
            value(r#"ferric_nodes_by_power_state{power_state="power off"}"#),
            Some(2.0)
        );
        assert_eq!(
            value(r#"ferric_nodes_by_power_state{power_state="none"}"#),
            Some(1.0)
        );
        assert_eq!(
            value(r#"ferric_conductor_workers{state="free"}"#),
            Some(9.0)
        );

        // The next scrape shows the database as it is then, not a sum of both.
        let text = metrics.encode(&Snapshot::default());
        assert_eq!(
            sample(
                &text,
                r#"ferric_nodes_by_provision_state{provision_state="available"}"#
            ),
            Some(0.0)
        );
        assert!(!text.contains("ferric_conductor_workers{"), "{text}");
    }

    #[test]
    fn requests_are_labelled_by_route_template_and_result() {
        let metrics = Metrics::new();
        metrics.api_request(
            "GET",
            "/v1/nodes/{node_ident}",
            200,
            Duration::from_millis(2),
        );
        metrics.bmc_request("redfish", "set_power", Duration::from_secs(1), false);
        metrics.agent_lookup(AgentResult::from_status(404));
        metrics.agent_heartbeat(AgentResult::from_status(202));
        let text = metrics.encode(&Snapshot::default());
        assert_eq!(
            sample(
                &text,
                r#"ferric_api_request_duration_seconds_count{method="GET",route="/v1/nodes/{node_ident}",status="200"}"#
            ),
            Some(1.0),
            "{text}"
        );
        assert_eq!(
            sample(
                &text,
                r#"ferric_bmc_request_errors_total{driver="redfish",operation="set_power"}"#
            ),
            Some(1.0)
        );
        assert_eq!(
            sample(&text, r#"ferric_agent_lookups_total{result="not_found"}"#),
            Some(1.0)
        );
        assert_eq!(
            sample(&text, r#"ferric_agent_heartbeats_total{result="accepted"}"#),
            Some(1.0)
        );
    }
}
