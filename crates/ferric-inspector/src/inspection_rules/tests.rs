//! The rule checks the API makes and the engine the conductor runs.

use chrono::Utc;
use ferric_model::ProvisionState;
use ferric_model::resources::{InspectionRule, Node, Port};
use serde_json::{Value, json};
use uuid::Uuid;

use super::*;

fn object(value: Value) -> Map<String, Value> {
    value.as_object().cloned().unwrap()
}

fn log_rule() -> Value {
    json!({
        "description": "log",
        "conditions": [],
        "actions": [{"op": "log", "args": {"msg": "Node {node.uuid}"}}],
        "phase": "main",
        "priority": 0,
        "sensitive": false,
    })
}

#[test]
fn bodies_ironic_accepts_pass() {
    check_rule(&object(log_rule()), false).unwrap();
    let looped = json!({
        "conditions": [{"op": "eq", "args": ["{inventory.system.product_name}", "{item}"],
                        "loop": ["a", "b"], "multiple": "any"}],
        "actions": [{"op": "set-attribute", "args": ["{item[path]}", "{item[value]}"],
                     "loop": [{"path": "/driver_info/x", "value": "y"}]}],
    });
    check_rule(&object(looped), false).unwrap();
    let negated = json!({
        "conditions": [{"op": "!is-empty", "args": {"value": "{inventory[bmc_address]}"}}],
        "actions": [{"op": "add-trait", "args": ["CUSTOM_X"]}],
        "priority": 9999,
    });
    check_rule(&object(negated), false).unwrap();
}

#[test]
fn bad_bodies_are_refused_with_the_reason() {
    let refused = |patch: Value| {
        let mut rule = object(log_rule());
        for (key, value) in object(patch) {
            rule.insert(key, value);
        }
        check_rule(&rule, false).unwrap_err()
    };
    for priority in [json!(-1), json!(10000), json!(5000.5), json!("1")] {
        assert!(refused(json!({"priority": priority})).contains("riority"));
    }
    assert!(refused(json!({"phase": "later"})).contains("Invalid phase"));
    assert!(refused(json!({"actions": []})).contains("non-empty"));
    assert!(refused(json!({"actions": [{"op": "explode", "args": []}]})).contains("Unsupported"));
    assert!(refused(json!({"actions": [{"op": "log"}]})).contains("'args'"));
    assert!(
        refused(json!({"actions": [{"op": "set-attribute", "args": ["/x"]}]}))
            .contains("Missing: value")
    );
    assert!(
        refused(json!({"actions": [{"op": "log", "args": {"msg": "m", "colour": 1}}]}))
            .contains("unexpected argument(s): colour")
    );
    assert!(
        refused(json!({"conditions": [{"op": "eq", "args": [1, 1], "multiple": "most"}]}))
            .contains("'any'")
    );
    assert!(refused(json!({"built_in": true})).contains("built_in"));
    assert!(refused(json!({"description": "x".repeat(256)})).contains("255"));
    // A built-in rule may have any priority.
    let mut rule = object(log_rule());
    rule.insert("priority".into(), json!(-5));
    check_rule(&rule, true).unwrap();
}

fn rule(priority: i64, conditions: Value, actions: Value) -> InspectionRule {
    let mut rule = InspectionRule::new(Uuid::new_v4());
    rule.priority = priority;
    rule.conditions = serde_json::from_value(conditions).unwrap();
    rule.actions = serde_json::from_value(actions).unwrap();
    rule.created_at = Utc::now();
    rule
}

struct World {
    node: Node,
    ports: Vec<Port>,
    inventory: Value,
    plugin_data: Value,
}

impl World {
    fn new() -> Self {
        let node = Node::new(Uuid::new_v4(), "fake-hardware", ProvisionState::Inspecting);
        let port = Port::new(Uuid::new_v4(), node.uuid, "52:54:00:00:00:01");
        Self {
            node,
            ports: vec![port],
            inventory: json!({
                "bmc_address": "192.0.2.10",
                "cpu": {"count": 8, "architecture": "x86_64"},
                "system_vendor": {"manufacturer": "Dell Inc."},
                "interfaces": [{"name": "eth0", "ipv4_address": "10.1.2.3"}],
            }),
            plugin_data: json!({"auto_discovered": true}),
        }
    }

    fn apply(&mut self, rules: &[InspectionRule]) -> Result<Applied, String> {
        apply(
            rules,
            &mut RuleTarget {
                node: &mut self.node,
                ports: &mut self.ports,
                inventory: &self.inventory,
                plugin_data: &mut self.plugin_data,
            },
        )
    }
}

#[test]
fn actions_run_when_every_condition_holds() {
    let mut world = World::new();
    let dell = rule(
        10,
        json!([
            {"op": "contains", "args": {"value": "{inventory[system_vendor][manufacturer]}", "regex": "(?i)dell"}},
            {"op": "is-true", "args": {"value": "{plugin_data[auto_discovered]}"}},
            {"op": "eq", "args": ["{inventory[cpu][count]}", "8"]},
            {"op": "in-net", "args": ["{inventory[interfaces][0][ipv4_address]}", "10.1.0.0/16"]},
            {"op": "!is-empty", "args": ["{inventory[bmc_address]}"]},
        ]),
        json!([
            {"op": "set-attribute", "args": {"path": "/driver_info/redfish_address", "value": "https://{inventory[bmc_address]}"}},
            {"op": "set-attribute", "args": ["/resource_class", "dell"]},
            {"op": "extend-attribute", "args": {"path": "/extra/tags", "value": "a", "unique": true}},
            {"op": "extend-attribute", "args": {"path": "/extra/tags", "value": "a", "unique": true}},
            {"op": "set-capability", "args": ["boot_mode", "uefi"]},
            {"op": "add-trait", "args": ["CUSTOM_DELL"]},
            {"op": "set-plugin-data", "args": ["seen.by", "rules"]},
        ]),
    );
    let skipped = rule(
        20,
        json!([{"op": "matches", "args": {"value": "{inventory[cpu][architecture]}", "regex": "aarch"}}]),
        json!([{"op": "fail", "args": ["not an ARM machine"]}]),
    );
    let applied = world.apply(&[dell.clone(), skipped]).unwrap();
    assert_eq!(applied.matched, vec![dell.uuid]);
    assert_eq!(
        world.node.driver_info["redfish_address"],
        "https://192.0.2.10"
    );
    assert_eq!(world.node.resource_class.as_deref(), Some("dell"));
    assert_eq!(world.node.extra["tags"], json!(["a"]));
    assert_eq!(world.node.properties["capabilities"], "boot_mode:uefi");
    assert_eq!(world.node.traits, vec!["CUSTOM_DELL".to_owned()]);
    assert_eq!(world.plugin_data["seen"]["by"], "rules");
}

#[test]
fn loops_priorities_ports_and_failures() {
    let mut world = World::new();
    let port = world.ports[0].uuid;
    let first = rule(
        100,
        json!([{"op": "eq", "args": ["{inventory[cpu][architecture]}", "{item}"],
                "loop": ["aarch64", "x86_64"], "multiple": "any"}]),
        json!([
            {"op": "set-attribute", "args": ["{item[path]}", "{item[value]}"],
             "loop": [{"path": "/driver_info/ipmi_username", "value": "admin"},
                      {"path": "/driver_info/ipmi_address", "value": "{inventory[bmc_address]}"}]},
            {"op": "set-port-attribute", "args": [port.to_string(), "/physical_network", "physnet1"]},
            {"op": "api-call", "args": {"url": "http://127.0.0.1:9/{node.uuid}"}},
        ]),
    );
    let applied = world.apply(std::slice::from_ref(&first)).unwrap();
    assert_eq!(world.node.driver_info["ipmi_username"], "admin");
    assert_eq!(world.node.driver_info["ipmi_address"], "192.0.2.10");
    assert_eq!(world.ports[0].physical_network.as_deref(), Some("physnet1"));
    assert_eq!(applied.changed_ports, vec![port]);
    assert_eq!(
        applied.api_calls[0].url,
        format!("http://127.0.0.1:9/{}", world.node.uuid)
    );

    // Higher priority first: the failure stops the lower rule.
    let fail = rule(
        5,
        json!([]),
        json!([{"op": "fail", "args": {"msg": "no {node.uuid}"}}]),
    );
    let later = rule(
        1,
        json!([]),
        json!([{"op": "add-trait", "args": ["CUSTOM_LATE"]}]),
    );
    let error = world.apply(&[later, fail]).unwrap_err();
    assert!(error.contains("no {node.uuid}"), "{error}");
    assert!(world.node.traits.is_empty());

    // Fields the conductor owns are out of reach.
    let sneaky = rule(
        0,
        json!([]),
        json!([{"op": "set-attribute", "args": ["/provision_state", "active"]}]),
    );
    assert!(
        world
            .apply(&[sneaky])
            .unwrap_err()
            .contains("cannot be changed")
    );
    let deleted = rule(
        0,
        json!([]),
        json!([{"op": "del-attribute", "args": ["/driver_info/ipmi_username"]}]),
    );
    world.apply(&[deleted]).unwrap();
    assert!(!world.node.driver_info.contains_key("ipmi_username"));
}
