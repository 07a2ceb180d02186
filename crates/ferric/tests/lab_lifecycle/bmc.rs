//! The lab's BMC as an operator reaches it (Redfish, beside Ferric), and power through the API.

use std::time::{Duration, Instant};

use anyhow::ensure;
use serde_json::{Value, json};

use super::{Client, PHASE_TIMEOUT};

/// A PATCH of `machine`'s ComputerSystem at its BMC (what an operator does by hand).
pub(super) fn bmc_patch(machine: &Value, body: Value) -> anyhow::Result<()> {
    let url = format!(
        "{}{}",
        machine["redfish_address"].as_str().unwrap_or(""),
        machine["redfish_system_id"].as_str().unwrap_or("")
    );
    let response = reqwest::blocking::Client::new()
        .patch(&url)
        .basic_auth(
            machine["redfish_username"].as_str().unwrap_or(""),
            machine["redfish_password"].as_str(),
        )
        .json(&body)
        .send()?;
    ensure!(
        response.status().is_success(),
        "PATCH {url}: {}",
        response.status()
    );
    Ok(())
}

/// `PUT /v1/nodes/{node}/states/power` and a wait until the node shows the new state.
pub(super) fn set_power(client: &Client, uuid: &str, target: &str) -> anyhow::Result<()> {
    client.expect(
        reqwest::Method::PUT,
        &format!("/v1/nodes/{uuid}/states/power"),
        Some(json!({"target": target})),
        202,
    )?;
    let started = Instant::now();
    loop {
        let node = client.node(uuid)?;
        if node["power_state"] == target && node["target_power_state"].is_null() {
            return Ok(());
        }
        ensure!(
            started.elapsed() < PHASE_TIMEOUT,
            "node {uuid} did not reach {target}: {}",
            node["last_error"]
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// The power state the lab's BMC reports for `machine`, read over Redfish.
pub(super) fn bmc_power(machine: &Value) -> anyhow::Result<String> {
    let url = format!(
        "{}{}",
        machine["redfish_address"].as_str().unwrap_or(""),
        machine["redfish_system_id"].as_str().unwrap_or("")
    );
    let body: Value = reqwest::blocking::Client::new()
        .get(url)
        .basic_auth(
            machine["redfish_username"].as_str().unwrap_or(""),
            machine["redfish_password"].as_str(),
        )
        .send()?
        .json()?;
    Ok(body["PowerState"].as_str().unwrap_or("?").to_owned())
}
