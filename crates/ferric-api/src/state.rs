//! [`ApiState`], what every handler reaches: the store, the hand-off to the conductors, the
//! rendered-document cache and the metrics. Its own module (not the crate root) so that
//! handlers depend on it without depending on the router that depends on them.

use std::sync::Arc;

use ferric_conductor::Handoff;
use ferric_db::Store;

use crate::v1::rendered::RenderedNodes;

/// What every handler can reach.
#[derive(Clone)]
pub struct ApiState {
    pub store: Store,
    /// Where every state change goes (the API never writes provision or power state): the
    /// node's owning conductor, in this process or handed over to another.
    pub conductor: Handoff,
    /// Serialized node documents of detail listings, by node revision.
    pub(crate) rendered: Arc<RenderedNodes>,
    /// The process's metrics (the conductor's registry), shown on `GET /metrics`.
    pub metrics: ferric_metrics::Metrics,
}

impl ApiState {
    /// `conductor`: a [`Handoff`], or a `Conductor` when everything runs in this process.
    pub fn new(store: Store, conductor: impl Into<Handoff>) -> Self {
        let conductor: Handoff = conductor.into();
        Self {
            store,
            metrics: conductor.drivers().metrics().clone(),
            conductor,
            rendered: Arc::default(),
        }
    }

    /// Holds at most `bytes` of rendered detail documents (`api_render_cache_size`; 0: none).
    #[must_use]
    pub fn with_render_cache_size(mut self, bytes: usize) -> Self {
        self.rendered = Arc::new(RenderedNodes::with_budget(bytes));
        self
    }

    /// Drops the rendered documents if no detail listing used them for `idle` (they are
    /// rendered again on demand); the bytes dropped. The server calls it every few seconds.
    pub fn drop_idle_caches(&self, idle: std::time::Duration) -> usize {
        self.rendered.drop_if_idle(idle)
    }
}
