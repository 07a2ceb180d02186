//! Hardware types and the interfaces they compose (`reference/ironic.md` §7): which one a node
//! gets by default, and building a node's [`Interfaces`] from its `<kind>_interface` fields. The
//! types themselves, with the implementations each supports, are data in `hardware_types.rs`.
//!
//! Theory of operation: [`Drivers`] (the enabled types and the site's `enabled.rs` settings) fills
//! a node's unset interfaces with defaults and checks the set ones — at create and PATCH, and again
//! whenever the conductor loads a node. A node's [`Interfaces`] gather the steps of every interface
//! for a flow ([`Interfaces::steps`]; `offered_steps` merges the agent's own steps, which the
//! interfaces' shadow) and send each step to the interface that offers it
//! ([`Interfaces::execute_step`]), so the conductor's step machinery never knows which interface a
//! step belongs to. BMC-backed power and management interfaces are wrapped in `measured.rs`'s
//! timing when built.

use std::collections::BTreeMap;
use std::sync::Arc;

use async_trait::async_trait;
use ferric_model::resources::{InterfaceKind, Node, Port};

use crate::DriverError;
use crate::agent_client::AgentClient;
use crate::bmc::BmcSettings;
use crate::bmc_state::BmcState;
use crate::console::{ConsoleInterface, FakeConsole, NoConsole};
use crate::direct::DirectDeploy;
use crate::enabled::InterfaceSettings;
use crate::fake::{Fake, FakeBoot};
pub use crate::hardware_types::{HARDWARE_TYPES, HardwareType};
use crate::images::{ImageSettings, ImageSources};
use crate::inspect::{AgentInspect, InspectBoot, InspectorInspect};
use crate::interfaces::{
    BiosChange, BiosInterface, BootDevice, BootDeviceSetting, BootInterface, DeployInterface,
    FirmwareInterface, FirmwareUpdate, InspectInterface, ManagementInterface, Outcome,
    PowerInterface, RaidInterface, RescueInterface, StepCall, StepDef, StepKind, Validate,
    VendorInterface,
};
use crate::ipmi::{Ipmi, IpmiSol};
use crate::ipxe::IpxeBoot;
use crate::measured::Measured;
use crate::network::NetworkInterface;
use crate::noop::{Noop, Passive};
use crate::raid::AgentRaid;
use crate::ramdisk_deploy::{CustomAgentDeploy, RamdiskDeploy};
use crate::redfish::{
    Redfish, RedfishBios, RedfishFirmware, RedfishInspect, RedfishRaid, RedfishVirtualMediaBoot,
};
use crate::settings::DriverSettings;
use crate::switch::{IronicNetworking, NetworkSettings, SwitchHub};

/// The hardware types enabled in this deployment, and what their interfaces share: the
/// site's settings, the client every node's agent is reached with, and the BMC connections,
/// sessions and request limits (created once; clones share them).
#[derive(Debug, Clone)]
pub struct Drivers {
    enabled: Vec<&'static HardwareType>,
    /// Which implementations nodes may use (`enabled_<kind>_interfaces`).
    interfaces: Arc<InterfaceSettings>,
    settings: Arc<DriverSettings>,
    agent: AgentClient,
    bmc: Arc<BmcState>,
    /// The client of the inspection service (one connection pool).
    http: reqwest::Client,
    /// Where BMC calls are timed and counted (the process's one registry).
    metrics: ferric_metrics::Metrics,
    /// Glance and the image cache (`with_images`), and the settings they were made from.
    images: Arc<ImageSources>,
    image_settings: Option<ImageSettings>,
    /// The site's switches (`switch_config_file`), for the `ironic-networking` interface.
    switches: Option<Arc<SwitchHub>>,
}

impl Default for Drivers {
    /// Every known hardware type.
    fn default() -> Self {
        Self::from_types(HARDWARE_TYPES.to_vec())
    }
}

impl Drivers {
    /// The types named in `names`; an unknown name is refused with the list of known ones.
    pub fn new<S: AsRef<str>>(names: &[S]) -> Result<Self, String> {
        let enabled = names
            .iter()
            .map(|name| {
                let name = name.as_ref();
                HARDWARE_TYPES
                    .into_iter()
                    .find(|hardware_type| hardware_type.name == name)
                    .ok_or_else(|| {
                        format!(
                            "Unknown hardware type '{name}'; known types: {}.",
                            HARDWARE_TYPES
                                .map(|hardware_type| hardware_type.name)
                                .join(", ")
                        )
                    })
            })
            .collect::<Result<_, _>>()?;
        Ok(Self::from_types(enabled))
    }

    fn from_types(enabled: Vec<&'static HardwareType>) -> Self {
        let settings = DriverSettings::default();
        let agent = AgentClient::new(settings.deploy.agent_command_timeout);
        Self {
            enabled,
            interfaces: Arc::new(InterfaceSettings::default()),
            settings: Arc::new(settings),
            agent,
            bmc: Arc::new(BmcState::new(BmcSettings::default())),
            http: reqwest::Client::new(),
            metrics: ferric_metrics::Metrics::new(),
            images: Arc::default(),
            image_settings: None,
            switches: None,
        }
    }

    /// The same types recording their BMC calls in `metrics` (by default each `Drivers` has
    /// a registry of its own; the conductor and the API use the one they are given here).
    pub fn with_metrics(mut self, metrics: ferric_metrics::Metrics) -> Self {
        self.metrics = metrics;
        // The image cache counts into the registry it was opened with: open it again.
        if let Some(settings) = self.image_settings.clone()
            && let Ok(images) = ImageSources::new(settings, self.metrics.clone())
        {
            self.images = Arc::new(images);
        }
        self
    }

    /// The same types with Glance and the conductor's image cache (`settings`); the cache's
    /// directory is created, or read back.
    pub fn with_images(mut self, settings: ImageSettings) -> Result<Self, String> {
        self.images = Arc::new(ImageSources::new(settings.clone(), self.metrics.clone())?);
        self.image_settings = Some(settings);
        Ok(self)
    }

    /// The same types with the site's switches (`switch_config_file`).
    pub fn with_switches(mut self, settings: NetworkSettings) -> Result<Self, String> {
        self.switches = Some(Arc::new(SwitchHub::new(settings)?));
        Ok(self)
    }

    /// The site's switches, if it has any.
    pub fn switches(&self) -> Option<&Arc<SwitchHub>> {
        self.switches.as_ref()
    }

    /// Glance and the image cache.
    pub fn images(&self) -> &Arc<ImageSources> {
        &self.images
    }

    pub fn metrics(&self) -> &ferric_metrics::Metrics {
        &self.metrics
    }

    /// `inner` with its BMC calls measured under the interface name `driver`.
    fn measured<T>(&self, driver: &'static str, inner: T) -> Measured<T> {
        Measured {
            inner,
            driver,
            metrics: self.metrics.clone(),
        }
    }

    /// The same types talking to BMCs with `settings`.
    pub fn with_bmc_settings(mut self, settings: BmcSettings) -> Self {
        self.bmc = Arc::new(BmcState::new(settings));
        self
    }

    pub fn bmc_settings(&self) -> &BmcSettings {
        &self.bmc.settings
    }

    /// The same types with the site's `settings`.
    pub fn with_settings(mut self, settings: DriverSettings) -> Self {
        let deploy = &settings.deploy;
        self.agent =
            AgentClient::with_verify_ca(deploy.agent_command_timeout, &deploy.agent_verify_ca)
                .unwrap_or_else(|error| {
                    // `ferric server` checks the setting before it gets here; fail closed anyway.
                    tracing::error!(
                        %error,
                        "agents' certificates cannot be checked: HTTPS agents will be refused"
                    );
                    AgentClient::refusing_tls(deploy.agent_command_timeout)
                });
        self.settings = Arc::new(settings);
        self
    }

    pub fn settings(&self) -> &DriverSettings {
        &self.settings
    }

    /// The same types with the site's enabled interfaces; refused when an enabled type would
    /// be left without an implementation of some kind.
    pub fn with_interfaces(mut self, interfaces: InterfaceSettings) -> Result<Self, String> {
        interfaces.check_types(&self.enabled)?;
        self.interfaces = Arc::new(interfaces);
        Ok(self)
    }

    /// Which implementations nodes may use.
    pub fn interfaces(&self) -> &InterfaceSettings {
        &self.interfaces
    }

    /// What a node of `hardware_type` that names no `kind` interface gets here.
    pub fn default_interface(
        &self,
        hardware_type: &HardwareType,
        kind: InterfaceKind,
    ) -> Result<&'static str, DriverError> {
        self.interfaces.default_interface(hardware_type, kind)
    }

    pub fn enabled(&self) -> &[&'static HardwareType] {
        &self.enabled
    }

    pub fn get(&self, name: &str) -> Option<&'static HardwareType> {
        self.enabled
            .iter()
            .copied()
            .find(|hardware_type| hardware_type.name == name)
    }

    /// Fills each unset `<kind>_interface` of `node` with its default here and checks the
    /// set ones are supported by its type and enabled by the site: what Ironic does when a
    /// node is created or its driver or an interface changes (and, through [`Drivers::load`],
    /// before the conductor acts, so an implementation the site has since disabled is not
    /// used).
    pub fn apply_defaults(&self, node: &mut Node) -> Result<(), DriverError> {
        let hardware_type = self
            .get(&node.driver)
            .ok_or_else(|| self.unknown(&node.driver))?;
        for kind in InterfaceKind::ALL {
            match node.interface(kind) {
                None => node.set_interface(
                    kind,
                    Some(self.default_interface(hardware_type, kind)?.to_owned()),
                ),
                Some(name) => self.interfaces.check(hardware_type, kind, name)?,
            }
        }
        Ok(())
    }

    /// The concrete deploy interface an `autodetect` node deploys with (`None`: the node
    /// names a concrete one).
    pub fn autodetected(&self, node: &Node) -> Result<Option<&str>, DriverError> {
        let named = node.interface(InterfaceKind::Deploy);
        if named.is_some_and(|name| name != crate::autodetect::AUTODETECT) {
            return Ok(None);
        }
        let hardware_type = self
            .get(&node.driver)
            .ok_or_else(|| self.unknown(&node.driver))?;
        if named.is_none()
            && self.default_interface(hardware_type, InterfaceKind::Deploy)?
                != crate::autodetect::AUTODETECT
        {
            return Ok(None);
        }
        crate::autodetect::choose(node, self.interfaces.autodetect_order(), |name| {
            self.interfaces
                .allows(hardware_type, InterfaceKind::Deploy, name)
        })
        .map(Some)
    }

    fn unknown(&self, driver: &str) -> DriverError {
        DriverError::invalid(
            "node.driver",
            format!(
                "No valid host was found. Reason: No conductor service registered which supports \
             driver {driver} for conductor group \"\". Enabled hardware types: {}.",
                self.enabled
                    .iter()
                    .map(|hardware_type| hardware_type.name)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        )
    }

    /// The interfaces a node uses, built from its `<kind>_interface` fields (defaults where
    /// unset), for work that does not boot it from the network (power, management).
    pub fn load(&self, node: &Node) -> Result<Interfaces, DriverError> {
        self.load_with_ports(node, &[])
    }

    /// The interfaces a node uses, knowing its ports (network boot needs their MACs).
    pub fn load_with_ports(&self, node: &Node, ports: &[Port]) -> Result<Interfaces, DriverError> {
        let mut node = node.clone();
        self.apply_defaults(&mut node)?;
        if let Some(chosen) = self.autodetected(&node)? {
            node.deploy_interface = Some(chosen.to_owned());
        }
        let name = |kind| node.interface(kind).unwrap_or_default().to_owned();
        let unsupported = |kind| DriverError::Unsupported {
            driver: node.driver.clone(),
            kind,
        };
        let redfish = || Redfish {
            state: self.bmc.clone(),
        };
        let ipmi = || Ipmi {
            state: self.bmc.clone(),
        };
        let power: Arc<dyn PowerInterface> = match name(InterfaceKind::Power).as_str() {
            "fake" => Arc::new(self.measured("fake", Fake)),
            "redfish" => Arc::new(self.measured("redfish", redfish())),
            "ipmitool" => Arc::new(self.measured("ipmitool", ipmi())),
            _ => return Err(unsupported(InterfaceKind::Power)),
        };
        let management: Arc<dyn ManagementInterface> =
            match name(InterfaceKind::Management).as_str() {
                "fake" => Arc::new(self.measured("fake", Fake)),
                "redfish" => Arc::new(self.measured("redfish", redfish())),
                "ipmitool" => Arc::new(self.measured("ipmitool", ipmi())),
                "noop" => Arc::new(NoopManagement),
                _ => return Err(unsupported(InterfaceKind::Management)),
            };
        let boot: Arc<dyn BootInterface> = match name(InterfaceKind::Boot).as_str() {
            name @ ("ipxe" | "pxe" | "http" | "http-ipxe") => {
                let name = ["ipxe", "pxe", "http", "http-ipxe"]
                    .into_iter()
                    .find(|known| *known == name)
                    .unwrap_or("ipxe");
                Arc::new(
                    IpxeBoot::new(self.settings.boot.clone(), ports)
                        .with_interface(name, &management.supported_boot_devices(&node))
                        .with_images(self.images.clone()),
                )
            }
            "redfish-https" => Arc::new(crate::redfish::RedfishHttpsBoot::new(
                redfish(),
                self.settings.boot.clone(),
                ports,
            )),
            "redfish-virtual-media" => Arc::new(RedfishVirtualMediaBoot {
                redfish: redfish(),
                settings: self.settings.boot.clone(),
                ports: ports.to_vec(),
                images: self.images.clone(),
            }),
            _ => Arc::new(FakeBoot),
        };
        // Validate asks the BMC too whether it can boot this way (boot mode, boot target).
        let boot_check: Arc<dyn Validate> = match name(InterfaceKind::Boot).as_str() {
            name @ ("ipxe"
            | "pxe"
            | "http"
            | "http-ipxe"
            | "redfish-virtual-media"
            | "redfish-https") => Arc::new(crate::boot_mode::BootCheck {
                boot: boot.clone(),
                management: management.clone(),
                name: name.to_owned(),
            }),
            _ => boot.clone(),
        };
        let new_direct = || DirectDeploy {
            power: power.clone(),
            management: management.clone(),
            boot: boot.clone(),
            agent: self.agent.clone(),
            settings: self.settings.deploy.clone(),
            fast_track: self.settings.fast_track,
            http_url: self.settings.boot.http_url.clone(),
            ports: ports.to_vec(),
            images: self.images.clone(),
        };
        // The agent RAID interface drives the agent through `direct`'s machinery, which the
        // agent-based deploy interfaces all have.
        let direct = match name(InterfaceKind::Deploy).as_str() {
            "direct" | "ramdisk" | "custom-agent" => Some(Arc::new(new_direct())),
            _ => None,
        };
        let deploy: Arc<dyn DeployInterface> = match (name(InterfaceKind::Deploy).as_str(), &direct)
        {
            ("fake", _) => Arc::new(Fake),
            ("ramdisk", _) => Arc::new(RamdiskDeploy {
                direct: new_direct(),
            }),
            ("custom-agent", _) => Arc::new(CustomAgentDeploy {
                direct: new_direct(),
            }),
            (_, Some(direct)) => direct.clone(),
            _ => return Err(unsupported(InterfaceKind::Deploy)),
        };
        let inspect: Arc<dyn InspectInterface> = match name(InterfaceKind::Inspect).as_str() {
            "fake" => Arc::new(Fake),
            "agent" => Arc::new(AgentInspect {
                machine: InspectBoot {
                    power: power.clone(),
                    management: management.clone(),
                    boot: boot.clone(),
                    fast_track: self.settings.fast_track,
                },
                api_url: self.settings.boot.api_url.clone(),
            }),
            "inspector" => Arc::new(InspectorInspect {
                machine: InspectBoot {
                    power: power.clone(),
                    management: management.clone(),
                    boot: boot.clone(),
                    fast_track: self.settings.fast_track,
                },
                settings: self.settings.inspector.clone(),
                http: self.http.clone(),
            }),
            "redfish" => Arc::new(RedfishInspect { redfish: redfish() }),
            _ => Arc::new(Noop {
                kind: InterfaceKind::Inspect,
            }),
        };
        let rescue: Arc<dyn RescueInterface> = match name(InterfaceKind::Rescue).as_str() {
            "fake" => Arc::new(Fake),
            "agent" => Arc::new(crate::agent_rescue::AgentRescue {
                power: power.clone(),
                management: management.clone(),
                boot: boot.clone(),
                agent: self.agent.clone(),
            }),
            _ => Arc::new(Noop {
                kind: InterfaceKind::Rescue,
            }),
        };
        let bios: Arc<dyn BiosInterface> = match name(InterfaceKind::Bios).as_str() {
            "fake" => Arc::new(Fake),
            "redfish" => Arc::new(RedfishBios {
                redfish: redfish(),
                power: power.clone(),
            }),
            _ => Arc::new(Noop {
                kind: InterfaceKind::Bios,
            }),
        };
        let firmware: Arc<dyn FirmwareInterface> = match name(InterfaceKind::Firmware).as_str() {
            "fake" => Arc::new(Fake),
            "redfish" => Arc::new(RedfishFirmware {
                redfish: redfish(),
                power: power.clone(),
                http: self.http.clone(),
            }),
            _ => Arc::new(Noop {
                kind: InterfaceKind::Firmware,
            }),
        };
        let raid: Arc<dyn RaidInterface> = match name(InterfaceKind::Raid).as_str() {
            "fake" => Arc::new(Fake),
            "agent" => Arc::new(AgentRaid { deploy: direct }),
            "redfish" => Arc::new(RedfishRaid {
                redfish: redfish(),
                power: power.clone(),
            }),
            _ => Arc::new(Noop {
                kind: InterfaceKind::Raid,
            }),
        };
        let vendor = vendor_interface(&name(InterfaceKind::Vendor));
        let console: Arc<dyn ConsoleInterface> = match name(InterfaceKind::Console).as_str() {
            "fake" => Arc::new(FakeConsole),
            "ipmitool-socat" => Arc::new(IpmiSol {
                state: self.bmc.clone(),
            }),
            _ => Arc::new(NoConsole),
        };
        let network: Arc<dyn NetworkInterface> = match name(InterfaceKind::Network).as_str() {
            "ironic-networking" => Arc::new(IronicNetworking {
                hub: self.switches.clone(),
                ports: ports.to_vec(),
            }),
            _ => Arc::new(Passive),
        };
        let mut validators: BTreeMap<InterfaceKind, Arc<dyn Validate>> = BTreeMap::new();
        for kind in InterfaceKind::ALL {
            let validator: Arc<dyn Validate> = match kind {
                InterfaceKind::Power => power.clone(),
                InterfaceKind::Management => management.clone(),
                InterfaceKind::Deploy => deploy.clone(),
                InterfaceKind::Boot => boot_check.clone(),
                InterfaceKind::Inspect => inspect.clone(),
                InterfaceKind::Rescue => rescue.clone(),
                InterfaceKind::Bios => bios.clone(),
                InterfaceKind::Firmware => firmware.clone(),
                InterfaceKind::Raid => raid.clone(),
                InterfaceKind::Vendor => vendor.clone(),
                InterfaceKind::Console => console.clone(),
                InterfaceKind::Network => network.clone(),
                _ => match name(kind).as_str() {
                    "fake" => Arc::new(Fake),
                    "flat" | "noop" => Arc::new(Passive),
                    _ => Arc::new(Noop { kind }),
                },
            };
            validators.insert(kind, validator);
        }
        Ok(Interfaces {
            power,
            management,
            boot,
            deploy,
            inspect,
            rescue,
            bios,
            firmware,
            raid,
            vendor,
            console,
            network,
            validators,
        })
    }

    /// The vendor interface of driver-level passthru calls: the hardware type's default, as
    /// Ironic picks it.
    pub fn driver_vendor(&self, driver: &str) -> Result<Arc<dyn VendorInterface>, DriverError> {
        let hardware_type = self.get(driver).ok_or_else(|| self.unknown(driver))?;
        Ok(vendor_interface(
            self.default_interface(hardware_type, InterfaceKind::Vendor)?,
        ))
    }
}

/// The vendor interface named `name` (`no-vendor` for any other name).
fn vendor_interface(name: &str) -> Arc<dyn VendorInterface> {
    match name {
        "fake" => Arc::new(Fake),
        _ => Arc::new(Noop {
            kind: InterfaceKind::Vendor,
        }),
    }
}

/// A step a node offers in a flow: one of its interfaces' own, or one its agent offered.
#[derive(Debug, Clone, PartialEq)]
pub struct OfferedStep {
    pub interface: InterfaceKind,
    pub step: String,
    pub priority: u32,
    /// Whether an `abort` may interrupt the node while this step runs.
    pub abortable: bool,
    /// The agent's description when the step is the agent's own (its `argsinfo` is checked
    /// against a request's arguments).
    pub agent: Option<crate::agent_steps::AgentStepDef>,
}

/// The working interfaces of one node.
#[derive(Clone)]
pub struct Interfaces {
    pub power: Arc<dyn PowerInterface>,
    pub management: Arc<dyn ManagementInterface>,
    pub boot: Arc<dyn BootInterface>,
    pub deploy: Arc<dyn DeployInterface>,
    pub inspect: Arc<dyn InspectInterface>,
    pub rescue: Arc<dyn RescueInterface>,
    pub bios: Arc<dyn BiosInterface>,
    pub firmware: Arc<dyn FirmwareInterface>,
    pub raid: Arc<dyn RaidInterface>,
    pub vendor: Arc<dyn VendorInterface>,
    pub console: Arc<dyn ConsoleInterface>,
    /// Moves the node's switch ports between networks (`network.rs`).
    pub network: Arc<dyn NetworkInterface>,
    validators: BTreeMap<InterfaceKind, Arc<dyn Validate>>,
}

impl std::fmt::Debug for Interfaces {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Interfaces").finish_non_exhaustive()
    }
}

impl Interfaces {
    /// Validates the interface of `kind` (`GET /v1/nodes/{node}/validate`).
    pub async fn validate(&self, node: &Node, kind: InterfaceKind) -> Result<(), DriverError> {
        match self.validators.get(&kind) {
            Some(validator) => validator.validate(node).await,
            None => Ok(()),
        }
    }

    /// Every step the node's interfaces offer in flows of `kind`: the deploy interface's, then
    /// the BIOS, firmware and RAID interfaces'.
    pub fn steps(&self, kind: StepKind) -> Vec<StepDef> {
        let mut steps = self.deploy.steps(kind);
        steps.extend(self.bios.steps(kind));
        steps.extend(self.firmware.steps(kind));
        steps.extend(self.raid.steps(kind));
        steps
    }

    /// Every step the node offers in flows of `kind`: its interfaces' own (see
    /// [`Interfaces::steps`]) and those its agent offered (`agent_steps`, cached when the
    /// agent was asked) for an interface that hands steps to the agent — `deploy` when it is
    /// `direct`, `raid` when it is `agent`, as Ironic's agent interfaces take them. An
    /// interface's own step shadows the agent's of the same name (`deploy.write_image` calls
    /// the agent's after preparing its arguments).
    pub fn offered_steps(&self, node: &Node, kind: StepKind) -> Vec<OfferedStep> {
        let mut offered: Vec<OfferedStep> = self
            .steps(kind)
            .into_iter()
            .map(|def| OfferedStep {
                interface: def.interface,
                step: def.step.to_owned(),
                priority: def.priority,
                abortable: def.abortable,
                agent: None,
            })
            .collect();
        for step in crate::agent_steps::cached(node, kind) {
            let shadowed = offered
                .iter()
                .any(|own| own.interface == step.interface && own.step == step.step);
            if shadowed || !self.hands_to_agent(step.interface) {
                continue;
            }
            offered.push(OfferedStep {
                interface: step.interface,
                step: step.step.clone(),
                priority: step.priority,
                // Ironic checks `abortable` for cleaning and servicing only.
                abortable: step.abortable || kind == StepKind::Deploy,
                agent: Some(step),
            });
        }
        offered
    }

    /// Whether the interface of `kind` runs steps its agent offers.
    pub fn hands_to_agent(&self, kind: InterfaceKind) -> bool {
        match kind {
            InterfaceKind::Deploy => self.deploy.runs_agent(),
            InterfaceKind::Raid => self.raid.needs_agent(),
            _ => false,
        }
    }

    /// Whether `step` runs in the agent ramdisk.
    pub fn step_needs_agent(&self, step: &StepCall) -> bool {
        match step.interface {
            InterfaceKind::Deploy => self.deploy.step_needs_agent(step),
            InterfaceKind::Raid => self.raid.needs_agent(),
            _ => false,
        }
    }

    /// Runs one (non-reserved) step on the interface that offers it.
    pub async fn execute_step(
        &self,
        node: &mut Node,
        kind: StepKind,
        step: &StepCall,
    ) -> Result<Outcome, DriverError> {
        match (step.interface, step.step.as_str()) {
            (InterfaceKind::Bios, "apply_configuration") => {
                let changes = BiosChange::from_args(&step.args)?;
                self.bios.apply_configuration(node, &changes).await?;
                Ok(Outcome::Done)
            }
            (InterfaceKind::Bios, "factory_reset") => {
                self.bios.factory_reset(node).await?;
                Ok(Outcome::Done)
            }
            (InterfaceKind::Firmware, "update") => {
                let updates = FirmwareUpdate::from_args(&step.args)?;
                self.firmware.update(node, &updates).await
            }
            (InterfaceKind::Raid, _) => self.raid.execute_step(node, kind, step).await,
            _ => self.deploy.execute_step(node, kind, step).await,
        }
    }
}

/// manual-management's `noop` management: the operator sets boot devices by hand.
#[derive(Debug, Clone, Copy)]
struct NoopManagement;

#[async_trait]
impl Validate for NoopManagement {
    async fn validate(&self, _node: &Node) -> Result<(), DriverError> {
        Ok(())
    }
}

#[async_trait]
impl ManagementInterface for NoopManagement {
    fn supported_boot_devices(&self, _node: &Node) -> Vec<BootDevice> {
        Vec::new()
    }

    async fn get_boot_device(&self, _node: &Node) -> Result<BootDeviceSetting, DriverError> {
        Ok(BootDeviceSetting::default())
    }

    async fn set_boot_device(
        &self,
        node: &mut Node,
        _device: BootDevice,
        _persistent: bool,
    ) -> Result<(), DriverError> {
        Err(DriverError::Unsupported {
            driver: node.driver.clone(),
            kind: InterfaceKind::Management,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ferric_model::ProvisionState;
    use uuid::Uuid;

    #[test]
    fn every_kind_has_a_default_on_every_type() {
        for hardware_type in HARDWARE_TYPES {
            for kind in InterfaceKind::ALL {
                assert!(
                    !hardware_type.default_interface(kind).is_empty(),
                    "{} {kind}",
                    hardware_type.name
                );
            }
        }
    }

    #[test]
    fn defaults_fill_unset_interfaces_and_refuse_unsupported_ones() {
        let drivers = Drivers::default();
        let mut node = Node::new(Uuid::nil(), "fake-hardware", ProvisionState::Enroll);
        node.inspect_interface = Some("no-inspect".to_owned());
        drivers.apply_defaults(&mut node).unwrap();
        assert_eq!(node.power_interface.as_deref(), Some("fake"));
        assert_eq!(node.inspect_interface.as_deref(), Some("no-inspect"));

        node.power_interface = Some("ipmitool".to_owned());
        let error = drivers.apply_defaults(&mut node).unwrap_err();
        assert!(
            error
                .to_string()
                .contains("power interface implementation 'ipmitool' is not supported"),
            "{error}"
        );

        let unknown = Node::new(Uuid::nil(), "nope", ProvisionState::Enroll);
        assert!(drivers.load(&unknown).is_err());
        assert!(Drivers::new(&["nope"]).is_err());
    }

    #[tokio::test]
    async fn no_op_interfaces_do_not_validate() {
        let drivers = Drivers::default();
        let mut node = Node::new(Uuid::nil(), "fake-hardware", ProvisionState::Enroll);
        node.inspect_interface = Some("no-inspect".to_owned());
        let interfaces = drivers.load(&node).unwrap();
        assert!(
            interfaces
                .validate(&node, InterfaceKind::Power)
                .await
                .is_ok()
        );
        let error = interfaces
            .validate(&node, InterfaceKind::Inspect)
            .await
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            "Driver fake-hardware does not support inspect (disabled or not implemented)."
        );
    }
}
