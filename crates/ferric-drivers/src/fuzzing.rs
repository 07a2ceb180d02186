//! Entry points for the fuzz targets in `fuzz/` (feature `fuzzing`) into what is private to
//! the crate: the Redfish client's reading of a BMC's answers.

use serde_json::Value;

use crate::interfaces::{BootDeviceSetting, BootMode};
use crate::redfish;
use ferric_model::resources::PowerState;

/// Everything the `redfish` interfaces read out of one answer body, as they read it.
#[derive(Debug)]
pub struct RedfishReading {
    pub body: Value,
    pub power_state: PowerState,
    pub boot_device: BootDeviceSetting,
    pub boot_mode: Option<BootMode>,
    pub members: Vec<String>,
    pub error_message: String,
    pub sessions_path: Option<String>,
}

/// Reads `bytes` as the body of a BMC's answer: the service root, the Systems collection, a
/// ComputerSystem or an error.
pub fn redfish_answer(bytes: &[u8]) -> RedfishReading {
    let body = redfish::client::decode_body(bytes);
    RedfishReading {
        power_state: redfish::power_state_of(&body),
        boot_device: redfish::boot_device_of(&body),
        boot_mode: redfish::boot_mode_of(&body),
        members: redfish::system_members(&body)
            .into_iter()
            .map(str::to_owned)
            .collect(),
        error_message: redfish::client::error_message(&body),
        sessions_path: body
            .pointer("/Links/Sessions/@odata.id")
            .and_then(Value::as_str)
            .map(str::to_owned),
        body,
    }
}
