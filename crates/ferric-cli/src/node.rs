//! `ferric node …`: the node resource (`/v1/nodes`) and its management sub-resources
//! (power, boot device, maintenance, validate, history). The provision verbs are in
//! `node_states.rs`, traits, VIFs, BIOS and inventory in `node_data.rs`.

use clap::{Args, Subcommand};
use serde_json::{Map, Value, json};

use crate::context::{fields_query, node_path, summary_fields};
use crate::node_data;
use crate::node_states::{self, Clean, Deploy, Plain, Rescue, Service};
use crate::{CliError, Context, Patch, fields_of, insert_pairs, key_value, segment, wait};

/// The columns of `ferric node list` without `--long` (what `GET /v1/nodes` returns).
const LIST_COLUMNS: [&str; 6] = [
    "uuid",
    "name",
    "instance_uuid",
    "power_state",
    "provision_state",
    "maintenance",
];

#[derive(Debug, Subcommand)]
pub(crate) enum NodeCommand {
    /// List nodes (GET /v1/nodes). Follows the pages unless --limit is given.
    ///
    /// Examples: `ferric node list --provision-state available`,
    /// `ferric node list --long -f json`, `ferric node list --fields uuid,name,last_error`.
    List(NodeList),
    /// Show one node by name or UUID (GET /v1/nodes/{node}).
    ///
    /// Example: `ferric node show n1 --fields provision_state,last_error`.
    Show {
        /// Name or UUID of the node.
        node: String,
        /// Only these fields, in this order (comma-separated or repeated).
        #[arg(long, value_name = "FIELD,…")]
        fields: Vec<String>,
    },
    /// Enroll a node (POST /v1/nodes); it starts in `enroll`.
    ///
    /// Example: `ferric node create --driver fake-hardware --name n1
    /// --driver-info fake_delay=0.5 --property cpus=8 --resource-class baremetal`.
    Create(NodeCreate),
    /// Change a node's fields (PATCH /v1/nodes/{node}).
    ///
    /// Example: `ferric node set n1 --driver-info redfish_address=https://10.0.0.5
    /// --description "rack 4"`.
    Set(NodeSet),
    /// Remove fields or keys from a node (PATCH /v1/nodes/{node} with remove operations).
    ///
    /// Example: `ferric node unset n1 --driver-info fake_fail --description`.
    Unset(NodeUnset),
    /// Delete nodes (DELETE /v1/nodes/{node}); allowed in enroll, manageable, available, …
    ///
    /// Example: `ferric node delete n1 n2`.
    Delete {
        /// Names or UUIDs of the nodes.
        #[arg(required = true)]
        nodes: Vec<String>,
    },
    /// enroll → manageable: verify the BMC credentials.
    ///
    /// Example: `ferric node manage n1 --wait`.
    Manage(Plain),
    /// manageable → available, cleaning first when automated cleaning is on.
    ///
    /// Example: `ferric node provide n1 --wait 600`.
    Provide(Plain),
    /// manageable → inspecting → manageable: discover the hardware's properties.
    ///
    /// Example: `ferric node inspect n1 --wait`.
    Inspect(Plain),
    /// available → active: write the image in instance_info to the node.
    ///
    /// Example: `ferric node set n1 --instance-info image_source=http://…/img.qcow2` then
    /// `ferric node deploy n1 --wait` (a progress bar shows the bytes written).
    Deploy(Deploy),
    /// active → available: tear the instance down (and clean).
    ///
    /// Example: `ferric node undeploy n1 --wait`.
    Undeploy(Plain),
    /// Stop what the node is doing in a wait state (clean wait, inspect wait, …).
    ///
    /// Example: `ferric node abort n1`.
    Abort(Plain),
    /// Run manual clean steps on a manageable node.
    ///
    /// Example: `ferric node clean n1 --clean-steps '[{"interface": "deploy", "step":
    /// "erase_devices_metadata"}]' --wait`.
    Clean(Clean),
    /// active → rescue: boot the rescue ramdisk with a password.
    ///
    /// Example: `ferric node rescue n1 --rescue-password s3cret --wait`.
    Rescue(Rescue),
    /// rescue → active.
    ///
    /// Example: `ferric node unrescue n1 --wait`.
    Unrescue(Plain),
    /// active → active: deploy the instance again.
    ///
    /// Example: `ferric node rebuild n1 --wait`.
    Rebuild(Deploy),
    /// manageable → active: take over a machine that is already deployed.
    ///
    /// Example: `ferric node adopt n1 --wait`.
    Adopt(Plain),
    /// Resume a node held by a `hold` step (deploy hold, clean hold, service hold).
    ///
    /// Example: `ferric node unhold n1 --wait`.
    Unhold(Plain),
    /// Run service steps on an active node.
    ///
    /// Example: `ferric node service n1 --service-steps '[…]' --wait`.
    Service(Service),
    /// Power a node on, off or reboot it (PUT /v1/nodes/{node}/states/power).
    ///
    /// Example: `ferric node power on n1 --wait`.
    #[command(subcommand)]
    Power(PowerCommand),
    /// Attach to a node's serial console (GET /v1/nodes/{node}/console/stream, a
    /// WebSocket), or enable, disable or show it (/v1/nodes/{node}/states/console).
    ///
    /// Attached, keys go to the machine; leave with `~.` at the start of a line or Ctrl-].
    /// With stdin not a terminal its input is forwarded and its end does not detach (use
    /// --timeout). Examples: `ferric node console n1 --enable`, `ferric node console n1`,
    /// `ferric node console n1 --show`.
    Console(crate::console::ConsoleArgs),
    /// A node's boot device (/v1/nodes/{node}/management/boot_device).
    ///
    /// Example: `ferric node boot-device set n1 pxe --persistent`.
    #[command(subcommand)]
    BootDevice(BootDeviceCommand),
    /// Put a node in or out of maintenance (/v1/nodes/{node}/maintenance).
    ///
    /// Example: `ferric node maintenance set n1 --reason "replacing a DIMM"`.
    #[command(subcommand)]
    Maintenance(MaintenanceCommand),
    /// Set a node's target RAID configuration (PUT /v1/nodes/{node}/states/raid); build it
    /// with `ferric node clean NODE --clean-steps` naming `raid.create_configuration`.
    ///
    /// Example: `ferric node raid-target n1 '{"logical_disks": [{"size_gb": "MAX",
    /// "raid_level": "1", "is_root_volume": true, "controller": "software"}]}'` (`{}` clears
    /// it).
    RaidTarget {
        /// Name or UUID of the node.
        node: String,
        /// The configuration as JSON, a file holding it, or - for stdin.
        config: String,
    },
    /// Check each of a node's interfaces (GET /v1/nodes/{node}/validate).
    ///
    /// Example: `ferric node validate n1`.
    Validate {
        /// Name or UUID of the node.
        node: String,
    },
    /// A node's event history (GET /v1/nodes/{node}/history, API 1.78).
    ///
    /// Example: `ferric node history list n1 --long`.
    #[command(subcommand)]
    History(HistoryCommand),
    /// A node's traits (/v1/nodes/{node}/traits, API 1.37).
    ///
    /// Example: `ferric node trait add n1 CUSTOM_GPU`.
    #[command(subcommand)]
    Trait(node_data::TraitCommand),
    /// The VIFs attached to a node (/v1/nodes/{node}/vifs, API 1.28).
    ///
    /// Example: `ferric node vif attach n1 VIF_ID`.
    #[command(subcommand)]
    Vif(node_data::VifCommand),
    /// A node's BIOS settings (/v1/nodes/{node}/bios, API 1.40).
    ///
    /// Example: `ferric node bios list n1`.
    #[command(subcommand)]
    Bios(node_data::BiosCommand),
    /// The node's virtual media (/v1/nodes/{node}/vmedia, API 1.89).
    ///
    /// Example: `ferric node vmedia attach n1 http://10.0.0.1:8080/images/live.iso`.
    #[command(subcommand)]
    Vmedia(node_data::VmediaCommand),
    /// The hardware inventory inspection stored (GET /v1/nodes/{node}/inventory, API 1.81);
    /// JSON, or YAML with -f yaml.
    ///
    /// Example: `ferric node inventory n1 | jq .inventory.disks`.
    Inventory {
        /// Name or UUID of the node.
        node: String,
    },
}

#[derive(Debug, Args)]
pub(crate) struct NodeList {
    /// Every field (GET /v1/nodes/detail), not only the summary columns.
    #[arg(long)]
    long: bool,
    /// Only these fields, in this order (comma-separated or repeated).
    #[arg(long, value_name = "FIELD,…")]
    fields: Vec<String>,
    /// Only nodes in this provision state.
    #[arg(long, value_name = "STATE")]
    provision_state: Option<String>,
    /// Only nodes in maintenance (true) or not (false).
    #[arg(long, value_name = "BOOL")]
    maintenance: Option<bool>,
    /// Only nodes with (true) or without (false) an instance.
    #[arg(long, value_name = "BOOL")]
    associated: Option<bool>,
    /// Only nodes of this hardware type.
    #[arg(long)]
    driver: Option<String>,
    #[arg(long)]
    resource_class: Option<String>,
    #[arg(long)]
    conductor_group: Option<String>,
    /// Only nodes managed by this conductor.
    #[arg(long)]
    conductor: Option<String>,
    #[arg(long)]
    owner: Option<String>,
    #[arg(long)]
    lessee: Option<String>,
    /// Only nodes with this maintenance fault (e.g. "power failure").
    #[arg(long)]
    fault: Option<String>,
    /// One page of at most this many nodes.
    #[arg(long)]
    limit: Option<u32>,
    /// Start after this node (UUID), with --limit.
    #[arg(long)]
    marker: Option<String>,
    #[arg(long, value_name = "FIELD")]
    sort_key: Option<String>,
    #[arg(long, value_name = "asc|desc")]
    sort_dir: Option<String>,
}

/// The `*_interface` fields, settable on create and set.
#[derive(Debug, Args)]
pub(crate) struct Interfaces {
    #[arg(long, value_name = "NAME")]
    bios_interface: Option<String>,
    #[arg(long, value_name = "NAME")]
    boot_interface: Option<String>,
    #[arg(long, value_name = "NAME")]
    console_interface: Option<String>,
    #[arg(long, value_name = "NAME")]
    deploy_interface: Option<String>,
    #[arg(long, value_name = "NAME")]
    firmware_interface: Option<String>,
    #[arg(long, value_name = "NAME")]
    inspect_interface: Option<String>,
    #[arg(long, value_name = "NAME")]
    management_interface: Option<String>,
    #[arg(long, value_name = "NAME")]
    network_interface: Option<String>,
    #[arg(long, value_name = "NAME")]
    power_interface: Option<String>,
    #[arg(long, value_name = "NAME")]
    raid_interface: Option<String>,
    #[arg(long, value_name = "NAME")]
    rescue_interface: Option<String>,
    #[arg(long, value_name = "NAME")]
    storage_interface: Option<String>,
    #[arg(long, value_name = "NAME")]
    vendor_interface: Option<String>,
}

impl Interfaces {
    fn given(&self) -> Vec<(&'static str, &String)> {
        [
            ("bios_interface", &self.bios_interface),
            ("boot_interface", &self.boot_interface),
            ("console_interface", &self.console_interface),
            ("deploy_interface", &self.deploy_interface),
            ("firmware_interface", &self.firmware_interface),
            ("inspect_interface", &self.inspect_interface),
            ("management_interface", &self.management_interface),
            ("network_interface", &self.network_interface),
            ("power_interface", &self.power_interface),
            ("raid_interface", &self.raid_interface),
            ("rescue_interface", &self.rescue_interface),
            ("storage_interface", &self.storage_interface),
            ("vendor_interface", &self.vendor_interface),
        ]
        .into_iter()
        .filter_map(|(field, value)| value.as_ref().map(|value| (field, value)))
        .collect()
    }
}

/// The plain string fields of a node that create and set share.
#[derive(Debug, Args)]
pub(crate) struct NodeStrings {
    /// A unique name (may be used instead of the UUID).
    #[arg(long)]
    name: Option<String>,
    #[arg(long)]
    resource_class: Option<String>,
    #[arg(long)]
    conductor_group: Option<String>,
    #[arg(long)]
    owner: Option<String>,
    #[arg(long)]
    lessee: Option<String>,
    #[arg(long)]
    description: Option<String>,
    #[arg(long)]
    shard: Option<String>,
    /// Clean automatically on provide and undeploy (true/false).
    #[arg(long, value_name = "BOOL")]
    automated_clean: Option<bool>,
}

impl NodeStrings {
    fn given(&self) -> Vec<(&'static str, Value)> {
        let strings = [
            ("name", &self.name),
            ("resource_class", &self.resource_class),
            ("conductor_group", &self.conductor_group),
            ("owner", &self.owner),
            ("lessee", &self.lessee),
            ("description", &self.description),
            ("shard", &self.shard),
        ];
        let mut given: Vec<(&'static str, Value)> = strings
            .into_iter()
            .filter_map(|(field, value)| value.as_ref().map(|value| (field, json!(value))))
            .collect();
        if let Some(clean) = self.automated_clean {
            given.push(("automated_clean", json!(clean)));
        }
        given
    }
}

/// The object fields of a node, given as repeated KEY=VALUE.
#[derive(Debug, Args)]
pub(crate) struct NodeObjects {
    /// A driver_info key (BMC address, credentials, fake_fail, …); repeatable.
    #[arg(long, value_name = "KEY=VALUE", value_parser = key_value)]
    driver_info: Vec<(String, String)>,
    /// A properties key (cpus, memory_mb, local_gb, capabilities, …); repeatable.
    #[arg(long, value_name = "KEY=VALUE", value_parser = key_value)]
    property: Vec<(String, String)>,
    /// An extra key (free-form); repeatable.
    #[arg(long, value_name = "KEY=VALUE", value_parser = key_value)]
    extra: Vec<(String, String)>,
    /// An instance_info key (image_source, root_gb, …); repeatable.
    #[arg(long, value_name = "KEY=VALUE", value_parser = key_value)]
    instance_info: Vec<(String, String)>,
}

impl NodeObjects {
    fn given(&self) -> [(&'static str, &Vec<(String, String)>); 4] {
        [
            ("driver_info", &self.driver_info),
            ("properties", &self.property),
            ("extra", &self.extra),
            ("instance_info", &self.instance_info),
        ]
    }
}

#[derive(Debug, Args)]
pub(crate) struct NodeCreate {
    /// The hardware type (see `ferric driver list`).
    #[arg(long)]
    driver: String,
    /// The node's UUID (generated when not given).
    #[arg(long)]
    uuid: Option<String>,
    #[arg(long)]
    chassis_uuid: Option<String>,
    #[command(flatten)]
    strings: NodeStrings,
    #[command(flatten)]
    objects: NodeObjects,
    #[command(flatten)]
    interfaces: Interfaces,
}

#[derive(Debug, Args)]
pub(crate) struct NodeSet {
    /// Name or UUID of the node.
    node: String,
    /// A new hardware type.
    #[arg(long)]
    driver: Option<String>,
    #[arg(long)]
    chassis_uuid: Option<String>,
    #[command(flatten)]
    strings: NodeStrings,
    #[command(flatten)]
    objects: NodeObjects,
    #[command(flatten)]
    interfaces: Interfaces,
}

#[derive(Debug, Args)]
pub(crate) struct NodeUnset {
    /// Name or UUID of the node.
    node: String,
    #[arg(long)]
    name: bool,
    #[arg(long)]
    resource_class: bool,
    #[arg(long)]
    conductor_group: bool,
    #[arg(long)]
    owner: bool,
    #[arg(long)]
    lessee: bool,
    #[arg(long)]
    description: bool,
    #[arg(long)]
    shard: bool,
    #[arg(long)]
    chassis_uuid: bool,
    /// A driver_info key to remove; repeatable.
    #[arg(long, value_name = "KEY")]
    driver_info: Vec<String>,
    /// A properties key to remove; repeatable.
    #[arg(long, value_name = "KEY")]
    property: Vec<String>,
    /// An extra key to remove; repeatable.
    #[arg(long, value_name = "KEY")]
    extra: Vec<String>,
    /// An instance_info key to remove; repeatable.
    #[arg(long, value_name = "KEY")]
    instance_info: Vec<String>,
}

#[derive(Debug, Subcommand)]
pub(crate) enum PowerCommand {
    /// Power the node on.
    On(Power),
    /// Power the node off (hard).
    Off(Power),
    /// Power cycle the node.
    Reboot(Power),
    /// Ask the operating system to shut down (ACPI), API 1.27.
    SoftOff(Power),
    /// Ask the operating system to reboot (ACPI), API 1.27.
    SoftReboot(Power),
}

#[derive(Debug, Args)]
pub(crate) struct Power {
    /// Name or UUID of the node.
    node: String,
    /// Seconds the BMC may take (API 1.27).
    #[arg(long, value_name = "SECONDS")]
    power_timeout: Option<u64>,
    /// Follow the node until the power change is done; give up after SECONDS (0: never).
    #[arg(long, value_name = "SECONDS", num_args = 0..=1, default_missing_value = "0")]
    wait: Option<u64>,
}

#[derive(Debug, Subcommand)]
pub(crate) enum BootDeviceCommand {
    /// Set the device the node boots from next (pxe, disk, cdrom, bios, safe, wanboot).
    Set {
        /// Name or UUID of the node.
        node: String,
        /// The boot device.
        device: String,
        /// For every boot, not only the next one.
        #[arg(long)]
        persistent: bool,
    },
    /// Show the boot device, or with --supported the devices the node can boot from.
    Show {
        /// Name or UUID of the node.
        node: String,
        #[arg(long)]
        supported: bool,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum MaintenanceCommand {
    /// Put the node in maintenance: the conductor leaves it alone.
    Set {
        /// Name or UUID of the node.
        node: String,
        /// Why, for the next operator.
        #[arg(long)]
        reason: Option<String>,
    },
    /// Take the node out of maintenance.
    Unset {
        /// Name or UUID of the node.
        node: String,
    },
}

#[derive(Debug, Subcommand)]
pub(crate) enum HistoryCommand {
    /// List a node's events, oldest first.
    List {
        /// Name or UUID of the node.
        node: String,
        /// Every field of each event.
        #[arg(long)]
        long: bool,
    },
    /// Show one event.
    Get {
        /// Name or UUID of the node.
        node: String,
        /// The event's UUID.
        event: String,
    },
}

pub(crate) fn run(context: &Context, command: NodeCommand) -> Result<(), CliError> {
    let client = &context.client;
    match command {
        NodeCommand::List(list) => node_list(context, &list),
        NodeCommand::Show { node, fields } => {
            let fields = fields_of(&fields);
            let query = fields_query(fields.as_deref());
            let record = client.get(&node_path(&node), &query)?;
            context.show(&record, fields.as_deref())
        }
        NodeCommand::Create(create) => {
            let mut body = Map::new();
            body.insert("driver".into(), json!(create.driver));
            if let Some(uuid) = create.uuid {
                body.insert("uuid".into(), json!(uuid));
            }
            if let Some(chassis) = create.chassis_uuid {
                body.insert("chassis_uuid".into(), json!(chassis));
            }
            for (field, value) in create.strings.given() {
                body.insert(field.into(), value);
            }
            for (field, pairs) in create.objects.given() {
                insert_pairs(&mut body, field, pairs);
            }
            for (field, value) in create.interfaces.given() {
                body.insert(field.into(), json!(value));
            }
            let record = client.post("/v1/nodes", &Value::Object(body))?;
            context.show(&record, None)
        }
        NodeCommand::Set(set) => {
            let mut patch = Patch::default();
            if let Some(driver) = &set.driver {
                patch.replace("driver", json!(driver));
            }
            if let Some(chassis) = &set.chassis_uuid {
                patch.replace("chassis_uuid", json!(chassis));
            }
            for (field, value) in set.strings.given() {
                patch.replace(field, value);
            }
            for (field, pairs) in set.objects.given() {
                for (key, value) in pairs {
                    patch.add_in(field, key, json!(value));
                }
            }
            for (field, value) in set.interfaces.given() {
                patch.replace(field, json!(value));
            }
            update(context, &set.node, patch)
        }
        NodeCommand::Unset(unset) => {
            let mut patch = Patch::default();
            let flags = [
                ("name", unset.name),
                ("resource_class", unset.resource_class),
                ("conductor_group", unset.conductor_group),
                ("owner", unset.owner),
                ("lessee", unset.lessee),
                ("description", unset.description),
                ("shard", unset.shard),
                ("chassis_uuid", unset.chassis_uuid),
            ];
            for (field, _) in flags.iter().filter(|(_, given)| *given) {
                patch.remove(&[field]);
            }
            let keys = [
                ("driver_info", &unset.driver_info),
                ("properties", &unset.property),
                ("extra", &unset.extra),
                ("instance_info", &unset.instance_info),
            ];
            for (field, keys) in keys {
                for key in keys {
                    patch.remove(&[field, key]);
                }
            }
            update(context, &unset.node, patch)
        }
        NodeCommand::Delete { nodes } => {
            for node in nodes {
                client.delete(&node_path(&node))?;
                eprintln!("Deleted node {node}");
            }
            Ok(())
        }
        NodeCommand::Manage(args) => node_states::provision(context, "manage", &args, Map::new()),
        NodeCommand::Provide(args) => node_states::provision(context, "provide", &args, Map::new()),
        NodeCommand::Inspect(args) => node_states::provision(context, "inspect", &args, Map::new()),
        NodeCommand::Undeploy(args) => {
            node_states::provision(context, "deleted", &args, Map::new())
        }
        NodeCommand::Abort(args) => node_states::provision(context, "abort", &args, Map::new()),
        NodeCommand::Unrescue(args) => {
            node_states::provision(context, "unrescue", &args, Map::new())
        }
        NodeCommand::Adopt(args) => node_states::provision(context, "adopt", &args, Map::new()),
        NodeCommand::Unhold(args) => node_states::provision(context, "unhold", &args, Map::new()),
        NodeCommand::Deploy(args) => node_states::deploy(context, "active", args),
        NodeCommand::Rebuild(args) => node_states::deploy(context, "rebuild", args),
        NodeCommand::Clean(args) => node_states::clean(context, args),
        NodeCommand::Rescue(args) => node_states::rescue(context, args),
        NodeCommand::Service(args) => node_states::service(context, args),
        NodeCommand::Power(power) => node_power(context, power),
        NodeCommand::Console(args) => crate::console::run(context, args),
        NodeCommand::BootDevice(BootDeviceCommand::Set {
            node,
            device,
            persistent,
        }) => {
            let path = format!("{}/management/boot_device", node_path(&node));
            client.put(
                &path,
                &json!({"boot_device": device, "persistent": persistent}),
            )?;
            Ok(())
        }
        NodeCommand::BootDevice(BootDeviceCommand::Show { node, supported }) => {
            let mut path = format!("{}/management/boot_device", node_path(&node));
            if supported {
                path.push_str("/supported");
            }
            let record = client.get(&path, &[])?;
            context.show(&record, None)
        }
        NodeCommand::Maintenance(MaintenanceCommand::Set { node, reason }) => {
            let path = format!("{}/maintenance", node_path(&node));
            let body = match reason {
                Some(reason) => json!({"reason": reason}),
                None => json!({}),
            };
            client.put(&path, &body)?;
            Ok(())
        }
        NodeCommand::Maintenance(MaintenanceCommand::Unset { node }) => {
            client.delete(&format!("{}/maintenance", node_path(&node)))?;
            Ok(())
        }
        NodeCommand::RaidTarget { node, config } => {
            let body = crate::json_argument("config", &config)?;
            client.put(&format!("{}/states/raid", node_path(&node)), &body)?;
            Ok(())
        }
        NodeCommand::Validate { node } => {
            let answer = client.get(&format!("{}/validate", node_path(&node)), &[])?;
            let rows = validation_rows(&answer);
            context.show_list(&rows, None, &["interface", "result", "reason"])
        }
        NodeCommand::History(HistoryCommand::List { node, long }) => {
            let path = format!("{}/history", node_path(&node));
            let query = if long {
                vec![("detail", "true".to_owned())]
            } else {
                Vec::new()
            };
            let events = client.list(&path, "history", &query, None)?;
            let defaults: &[&str] = if long {
                &[]
            } else {
                &["uuid", "created_at", "severity", "event"]
            };
            context.show_list(&events, None, defaults)
        }
        NodeCommand::Trait(command) => node_data::run_trait(context, command),
        NodeCommand::Vif(command) => node_data::run_vif(context, command),
        NodeCommand::Bios(command) => node_data::run_bios(context, command),
        NodeCommand::Vmedia(command) => node_data::run_vmedia(context, command),
        NodeCommand::Inventory { node } => node_data::inventory(context, &node),
        NodeCommand::History(HistoryCommand::Get { node, event }) => {
            let path = format!("{}/history/{}", node_path(&node), segment(&event));
            let record = client.get(&path, &[])?;
            context.show(&record, None)
        }
    }
}

fn node_list(context: &Context, list: &NodeList) -> Result<(), CliError> {
    let fields = fields_of(&list.fields);
    let mut query = fields_query(fields.as_deref());
    let filters = [
        ("provision_state", list.provision_state.clone()),
        ("maintenance", list.maintenance.map(|flag| flag.to_string())),
        ("associated", list.associated.map(|flag| flag.to_string())),
        ("driver", list.driver.clone()),
        ("resource_class", list.resource_class.clone()),
        ("conductor_group", list.conductor_group.clone()),
        ("conductor", list.conductor.clone()),
        ("owner", list.owner.clone()),
        ("lessee", list.lessee.clone()),
        ("fault", list.fault.clone()),
        ("marker", list.marker.clone()),
        ("sort_key", list.sort_key.clone()),
        ("sort_dir", list.sort_dir.clone()),
    ];
    query.extend(
        filters
            .into_iter()
            .filter_map(|(key, value)| value.map(|value| (key, value))),
    );
    // `?fields=` and `/detail` exclude each other; fields win.
    let path = if list.long && fields.is_none() {
        "/v1/nodes/detail"
    } else {
        "/v1/nodes"
    };
    let nodes = context.client.list(path, "nodes", &query, list.limit)?;
    let defaults: &[&str] = if list.long { &[] } else { &LIST_COLUMNS };
    context.show_list(&nodes, fields.as_deref(), defaults)
}

fn node_power(context: &Context, command: PowerCommand) -> Result<(), CliError> {
    let (target, power) = match command {
        PowerCommand::On(power) => ("power on", power),
        PowerCommand::Off(power) => ("power off", power),
        PowerCommand::Reboot(power) => ("rebooting", power),
        PowerCommand::SoftOff(power) => ("soft power off", power),
        PowerCommand::SoftReboot(power) => ("soft rebooting", power),
    };
    let mut body = json!({"target": target});
    if let Some(timeout) = power.power_timeout {
        body["timeout"] = json!(timeout);
    }
    let path = format!("{}/states/power", node_path(&power.node));
    context.client.put(&path, &body)?;
    if let Some(seconds) = power.wait {
        let expected = match target {
            "power off" | "soft power off" => "power off",
            _ => "power on",
        };
        let node = wait::follow_power(&context.client, &power.node, expected, seconds)?;
        context.show(&node, Some(&summary_fields()))?;
    }
    Ok(())
}

/// Sends a patch and shows the node it gives back.
fn update(context: &Context, node: &str, patch: Patch) -> Result<(), CliError> {
    if patch.is_empty() {
        return Err(CliError::Usage(
            "nothing to change: give at least one field flag (see --help)".to_owned(),
        ));
    }
    let record = context
        .client
        .patch(&node_path(node), &patch.into_value())?;
    context.show(&record, None)
}

/// `/validate`'s `{"boot": {"result": true, "reason": null}, …}` as one row per interface.
fn validation_rows(answer: &Value) -> Vec<Value> {
    let Value::Object(interfaces) = answer else {
        return Vec::new();
    };
    interfaces
        .iter()
        .map(|(interface, outcome)| {
            json!({
                "interface": interface,
                "result": outcome.get("result").cloned().unwrap_or(Value::Null),
                "reason": outcome.get("reason").cloned().unwrap_or(Value::Null),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output;

    #[test]
    fn validation_becomes_one_row_per_interface() {
        let rows = validation_rows(&json!({
            "boot": {"result": true, "reason": null},
            "power": {"result": false, "reason": "no address"},
        }));
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[1]["interface"], "power");
        assert_eq!(rows[1]["reason"], "no address");
        let table = output::list(
            output::Format::Table,
            &rows,
            &["interface".into(), "result".into(), "reason".into()],
        )
        .unwrap();
        assert!(table.contains("no address"), "{table}");
    }
}
