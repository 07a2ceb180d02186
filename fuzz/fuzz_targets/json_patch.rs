//! JSON-PATCH bodies (`PATCH /v1/nodes/{node}`, `/v1/ports/{port}`) at any microversion,
//! applied to a node that already has nested `extra`/`properties`/`driver_info` values so
//! deep paths have something to walk. Invariant: every refusal is a 4xx, and an accepted patch
//! renders.
#![no_main]

use std::sync::LazyLock;

use libfuzzer_sys::fuzz_target;
use serde_json::{Value, json};

static NODE: LazyLock<Value> = LazyLock::new(|| {
    json!({
        "name": "node-0",
        "extra": {"a": {"b": [1, 2, {"c": "d"}]}, "list": []},
        "properties": {"cpus": 4, "capabilities": "boot_mode:uefi", "root_device": {"size": 10}},
        "driver_info": {"ipmi_address": "10.0.0.1", "ipmi_password": "secret"},
        "instance_info": {"image_source": "http://example.invalid/image"},
    })
});

fuzz_target!(|data: &[u8]| {
    let Some((&[high, low], body)) = data.split_first_chunk::<2>().map(|(v, b)| (v, b)) else {
        return;
    };
    let minor = u16::from_be_bytes([high, low]);
    for result in [
        ferric_api::fuzzing::node_patch(body, minor, &NODE),
        ferric_api::fuzzing::port_patch(body, minor),
    ] {
        match result {
            Ok(rendered) => assert!(rendered.is_object()),
            Err(error) => assert!(error.status.is_client_error(), "{error}"),
        }
    }
});
