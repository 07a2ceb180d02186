//! node-1's phases: a node whose ramdisk never calls back (aborts and timeouts), then a
//! firmware update a DELETE may not interrupt.

use std::time::{Duration, Instant};

use anyhow::ensure;
use serde_json::{Value, json};

use super::{Client, PHASE_TIMEOUT, bmc_power, image_info, phase};

/// node-1 (IPMI, no ramdisk to boot): abort in `inspect wait`; an inspection that never
/// calls back; a deploy that never calls back; then, over Redfish, a DELETE that may not
/// interrupt a firmware update on the BMC (403).
pub(super) fn silent_node(
    client: &Client,
    uuid: &str,
    machine: &Value,
    digest: &str,
) -> anyhow::Result<()> {
    client.provision(uuid, json!({"target": "manage"}))?;
    client.wait_for(uuid, "manageable")?;

    let started = Instant::now();
    client.provision(uuid, json!({"target": "inspect"}))?;
    client.wait_for(uuid, "inspect wait")?;
    client.provision(uuid, json!({"target": "abort"}))?;
    let node = client.wait_for(uuid, "inspect failed")?;
    let bmc = bmc_power(machine)?;
    ensure!(
        bmc == "Off" && node["power_state"] == "power off",
        "the BMC says node-1 is {bmc} after the inspection abort: {node}"
    );
    phase("abort in inspect wait (node-1)", started);

    client.provision(uuid, json!({"target": "manage"}))?;
    client.wait_for(uuid, "manageable")?;
    let started = Instant::now();
    client.provision(uuid, json!({"target": "inspect"}))?;
    let node = client.wait_for(uuid, "inspect failed")?;
    ensure!(
        node["last_error"]
            .as_str()
            .unwrap_or("")
            .contains("Timeout reached while inspecting"),
        "node-1's inspection failed for another reason: {}",
        node["last_error"]
    );
    let bmc = bmc_power(machine)?;
    ensure!(
        bmc == "Off",
        "the BMC says node-1 is {bmc} after the inspection timeout"
    );
    phase("inspection timeout (node-1)", started);

    client.provision(uuid, json!({"target": "manage"}))?;
    client.wait_for(uuid, "manageable")?;
    client.provision(uuid, json!({"target": "provide"}))?;
    client.wait_for(uuid, "available")?;
    let started = Instant::now();
    client.provision(uuid, json!({"target": "active"}))?;
    let node = client.wait_for(uuid, "deploy failed")?;
    ensure!(
        node["last_error"]
            .as_str()
            .unwrap_or("")
            .contains("Timeout"),
        "node-1's deploy failed for another reason: {}",
        node["last_error"]
    );
    phase("callback timeout (node-1, from its deploy)", started);

    // 403: a firmware update may not be interrupted (seed 001). The lab's Redfish BMC flashes
    // through UpdateService (each update's task takes a few of Ferric's 1 s polls): node-1
    // moves to the `redfish` driver and firmware interface, and its deploy starts with a
    // `firmware.update` step of several updates. Interfaces change only at rest: undeploy
    // first.
    client.provision(uuid, json!({"target": "deleted"}))?;
    client.wait_for(uuid, "available")?;
    let mut patch = vec![
        json!({"op": "replace", "path": "/driver", "value": "redfish"}),
        json!({"op": "replace", "path": "/power_interface", "value": "redfish"}),
        json!({"op": "replace", "path": "/management_interface", "value": "redfish"}),
        json!({"op": "replace", "path": "/firmware_interface", "value": "redfish"}),
    ];
    for key in [
        "redfish_address",
        "redfish_system_id",
        "redfish_username",
        "redfish_password",
    ] {
        patch.push(
            json!({"op": "add", "path": format!("/driver_info/{key}"), "value": machine[key]}),
        );
    }
    // Undeploy forgot the instance; name the image again so the deploy goes on after the
    // update.
    patch.extend(image_info(digest).as_object().into_iter().flatten().map(
        |(key, value)| json!({"op": "add", "path": format!("/instance_info/{key}"), "value": value}),
    ));
    client.patch(uuid, Value::Array(patch))?;
    let updates: Vec<Value> = ["bios", "bmc", "bios", "bmc", "bios", "bmc"]
        .iter()
        .map(|component| json!({"component": component, "url": "http://10.231.0.1:8080/images/fw.bin"}))
        .collect();
    client.provision(
        uuid,
        json!({"target": "active", "deploy_steps": [
            {"interface": "firmware", "step": "update", "args": {"settings": updates}, "priority": 150}
        ]}),
    )?;
    let flashing = Instant::now();
    loop {
        let node = client.node(uuid)?;
        if node["provision_state"] == "deploying" && node["deploy_step"]["interface"] == "firmware"
        {
            break;
        }
        ensure!(
            node["provision_state"] == "deploying" && flashing.elapsed() < PHASE_TIMEOUT,
            "node-1 never showed its firmware update running (now {}, step {}): {}",
            node["provision_state"],
            node["deploy_step"],
            node["last_error"]
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    let refused = client.expect(
        reqwest::Method::DELETE,
        &format!("/v1/nodes/{uuid}/provision"),
        None,
        403,
    )?;
    eprintln!("lab_lifecycle: DELETE during firmware.update: 403 {refused}");
    // The update runs on; the deploy then waits for the missing ramdisk.
    let node = client.wait_for(uuid, "wait call-back")?;
    ensure!(
        node["deploy_step"]["step"] == "deploy",
        "the refused DELETE stopped node-1's deploy: {}",
        node["deploy_step"]
    );
    Ok(())
}
