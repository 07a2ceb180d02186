//! The per-BMC state every node's BMC interfaces share: what [`Drivers`](crate::Drivers)
//! creates once from the [`BmcSettings`] — the Redfish clients and sessions (`redfish/client.rs`),
//! the IPMI request limits and the cipher suite each IPMI BMC last worked with
//! (`ipmi/session.rs`) — and hands to the interfaces it builds, for the life of the process.

use crate::bmc::{BmcLimits, BmcSettings};

/// The BMC state shared by every node's interfaces; [`Drivers`](crate::Drivers) holds one.
#[derive(Debug)]
pub(crate) struct BmcState {
    pub(crate) settings: BmcSettings,
    pub(crate) redfish: crate::redfish::Clients,
    pub(crate) ipmi_limits: BmcLimits,
    /// The cipher suite each IPMI BMC last opened a session with.
    pub(crate) ipmi_suites: crate::ipmi::SuiteCache,
}

impl BmcState {
    pub(crate) fn new(settings: BmcSettings) -> Self {
        Self {
            redfish: crate::redfish::Clients::new(&settings),
            ipmi_limits: BmcLimits::new(settings.max_requests_per_bmc),
            ipmi_suites: crate::ipmi::SuiteCache::default(),
            settings,
        }
    }
}
