//! The hand-off's wire format: what version 1 (Ferric before the typed contract) wrote must
//! still read, what a pinned process writes must be what version 1 wrote, and what a newer
//! peer sends that this build does not know must be refused, not dropped.

use serde_json::json;

use super::*;
use crate::resources::PowerState;

/// Bodies exactly as the version 1 hand-off (commit 7aea434) wrote them.
const VERSION_1_BODIES: &[&str] = &[
    r#"{"action":"provision","verb":"deploy","configdrive":null,"clean_steps":null,"deploy_steps":[{"interface":"deploy","step":"deploy","args":{},"priority":100}],"service_steps":null,"rescue_password":null,"disable_ramdisk":null}"#,
    r#"{"action":"set_power","power":"soft rebooting","timeout_ms":5000}"#,
    r#"{"action":"set_boot_device","device":"pxe","persistent":true}"#,
    r#"{"action":"get_boot_device"}"#,
    r#"{"action":"set_boot_mode","mode":"uefi"}"#,
    r#"{"action":"vmedia_attach","device":"cdrom","url":"http://x/boot.iso"}"#,
    r#"{"action":"vmedia_detach","devices":["cdrom","floppy"]}"#,
    r#"{"action":"vendor_passthru","method":"m","http_method":"POST","args":{"a":1}}"#,
    r#"{"action":"heartbeat","callback_url":"http://agent:9999","agent_token":"t","agent_version":"10.0","agent_verify_ca":null,"agent_status":null,"agent_status_message":null}"#,
    r#"{"action":"continue_inspection","payload":{"inventory":{}},"mint_token":true}"#,
];

#[test]
fn what_version_1_sent_still_reads_and_a_pinned_process_writes_it_back_unchanged() {
    let pinned = HandoffVersion::pinned(Some(1)).unwrap();
    for body in VERSION_1_BODIES {
        let (version, action) = decode(body).unwrap();
        assert_eq!(version, 1);
        let written: Value = serde_json::from_str(&pinned.encode(&action).unwrap()).unwrap();
        let original: Value = serde_json::from_str(body).unwrap();
        assert_eq!(written, original, "{}", action.name());
    }
}

#[test]
fn fields_are_typed() {
    let (_, action) = decode(VERSION_1_BODIES[1]).unwrap();
    assert_eq!(
        action,
        Action::set_power(PowerAction::SoftReboot, Some(Duration::from_secs(5)))
    );
    assert_eq!(PowerAction::SoftReboot.resulting_state(), PowerState::On);
    let (_, action) = decode(VERSION_1_BODIES[0]).unwrap();
    let Action::Provision { verb, args } = action else {
        panic!("not a provision: {action:?}");
    };
    assert_eq!(verb, Verb::Deploy);
    assert_eq!(
        args.deploy_steps.unwrap()[0].interface,
        InterfaceKind::Deploy
    );
}

#[test]
fn the_current_version_travels_with_each_request() {
    let body = HandoffVersion::default()
        .encode(&Action::InjectNmi)
        .unwrap();
    let value: Value = serde_json::from_str(&body).unwrap();
    assert_eq!(
        value,
        json!({"action": "inject_nmi", "handoff_version": HANDOFF_VERSION})
    );
    assert_eq!(decode(&body).unwrap(), (HANDOFF_VERSION, Action::InjectNmi));
}

#[test]
fn an_unknown_action_from_a_newer_peer_is_refused_saying_so() {
    let body = json!({"action": "console_enable", "handoff_version": HANDOFF_VERSION + 1});
    let error = decode(&body.to_string()).unwrap_err();
    assert!(
        matches!(error, HandoffError::Unsupported { theirs, .. } if theirs == HANDOFF_VERSION + 1),
        "{error:?}"
    );
    assert!(error.to_string().contains("pin_handoff_version"), "{error}");
}

#[test]
fn a_field_a_newer_peer_added_is_refused_not_dropped() {
    let body = json!({
        "action": "set_power", "power": "power on", "timeout_ms": null,
        "wait_for_bmc": true, "handoff_version": HANDOFF_VERSION + 1,
    });
    let error = decode(&body.to_string()).unwrap_err();
    assert!(error.to_string().contains("wait_for_bmc"), "{error}");
    // The same request without the new field is fine.
    let body = json!({"action": "set_power", "power": "power on", "timeout_ms": null,
        "handoff_version": HANDOFF_VERSION + 1});
    assert!(decode(&body.to_string()).is_ok());
}

#[test]
fn nonsense_from_a_peer_of_the_same_version_is_malformed() {
    let error = decode(r#"{"action":"set_power","power":"sideways"}"#).unwrap_err();
    assert!(
        matches!(&error, HandoffError::Malformed(message) if message.contains("sideways")),
        "{error:?}"
    );
}

#[test]
fn a_pin_outside_the_known_versions_is_refused() {
    assert!(HandoffVersion::pinned(Some(0)).is_err());
    assert!(HandoffVersion::pinned(Some(HANDOFF_VERSION + 1)).is_err());
    assert_eq!(
        HandoffVersion::pinned(None).unwrap().sends(),
        HANDOFF_VERSION
    );
}

#[test]
fn a_pinned_process_refuses_what_its_pin_does_not_know() {
    let pinned = HandoffVersion::pinned(Some(1)).unwrap();
    let error = pinned.encode(&Action::VendorMethods).unwrap_err();
    assert!(
        matches!(
            error,
            HandoffError::Pinned {
                since: 2,
                pinned: 1,
                ..
            }
        ),
        "{error:?}"
    );
    assert!(error.to_string().contains("pin_handoff_version"), "{error}");
    // Unpinned it goes.
    assert!(
        HandoffVersion::default()
            .encode(&Action::VendorMethods)
            .is_ok()
    );
}

#[test]
fn only_what_touches_no_hardware_may_run_anywhere() {
    assert!(Action::VendorMethods.runs_anywhere());
    assert!(!Action::InjectNmi.runs_anywhere());
    assert!(!Action::Validate.runs_anywhere());
}

#[test]
fn replies_read_back_as_written() {
    let replies = [
        (
            Action::GetBootDevice,
            ActionReply::BootDevice(BootDeviceSetting {
                device: Some(BootDevice::Pxe),
                persistent: None,
            }),
        ),
        (
            Action::SupportedBootDevices,
            ActionReply::BootDevices(vec![BootDevice::Disk]),
        ),
        (
            Action::VmediaList,
            ActionReply::Vmedia(vec![VmediaSlot {
                device_type: VmediaDevice::Cdrom,
                location: "/cd".to_owned(),
                image: Some("http://x/a.iso".to_owned()),
                inserted: true,
            }]),
        ),
        (
            Action::VendorPassthru {
                method: "m".into(),
                http_method: "GET".into(),
                args: JsonObject::new(),
            },
            ActionReply::Vendor(VendorReply {
                value: json!([1]),
                is_async: false,
                attach: false,
            }),
        ),
        (
            Action::Validate,
            ActionReply::Validation(NodeValidation::from([(
                InterfaceKind::Power,
                ValidationResult {
                    result: false,
                    reason: Some("no address".to_owned()),
                },
            )])),
        ),
        (
            Action::AgentLookupToken,
            ActionReply::Token(Some("t".to_owned())),
        ),
        (Action::AgentLookupToken, ActionReply::Token(None)),
        (Action::InjectNmi, ActionReply::Done),
        (
            Action::VendorMethods,
            ActionReply::Methods(json!({"m": {"async": false}})),
        ),
        (
            Action::Indicators,
            ActionReply::Indicators(vec![crate::values::Indicator {
                component: "system".to_owned(),
                name: "led".to_owned(),
                readonly: false,
                states: vec![IndicatorState::Off, IndicatorState::On],
            }]),
        ),
        (
            Action::GetIndicator {
                component: "system".to_owned(),
                name: "led".to_owned(),
            },
            ActionReply::IndicatorState(IndicatorState::Blinking),
        ),
    ];
    for (action, reply) in replies {
        let value = reply.to_value();
        assert_eq!(ActionReply::from_value(&action, value).unwrap(), reply);
    }
}

#[test]
fn indicators_came_with_version_4() {
    let set = Action::SetIndicator {
        component: "system".to_owned(),
        name: "led".to_owned(),
        state: IndicatorState::Blinking,
    };
    assert_eq!(set.since(), 4);
    let body = HandoffVersion::default().encode(&set).unwrap();
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&body).unwrap(),
        json!({"action": "set_indicator", "component": "system", "name": "led",
            "state": "blinking", "handoff_version": HANDOFF_VERSION})
    );
    assert!(
        HandoffVersion::pinned(Some(3))
            .unwrap()
            .encode(&set)
            .is_err()
    );
}
