//! Bodies of a Redfish BMC's answers as the `redfish` interfaces read them (service root,
//! Systems collection, ComputerSystem, error bodies). Invariant: no panic; a body that is not
//! JSON reads as an unknown power state.
#![no_main]

use ferric_model::resources::PowerState;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let reading = ferric_drivers::fuzzing::redfish_answer(data);
    if serde_json::from_slice::<serde_json::Value>(data).is_err() {
        assert_eq!(reading.power_state, PowerState::Error);
        assert!(reading.members.is_empty());
    }
});
