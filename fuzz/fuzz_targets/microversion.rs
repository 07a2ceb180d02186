//! The two microversion request headers (`OpenStack-API-Version`,
//! `X-OpenStack-Ironic-API-Version`), present or not. Invariant: a negotiated version lies in
//! the supported range, and `1.N` written back out negotiates to itself.
#![no_main]

use ferric_api::version::{MAX_VERSION, MIN_VERSION};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(rest) else {
        return;
    };
    let (standard, legacy) = text.split_once('\n').unwrap_or((text, text));
    let standard = (selector & 1 != 0).then_some(standard);
    let legacy = (selector & 2 != 0).then_some(legacy);
    if let Ok(version) = ferric_api::fuzzing::version_headers(standard, legacy) {
        assert!((MIN_VERSION..=MAX_VERSION).contains(&version));
        let written = format!("1.{}", version.minor());
        assert_eq!(
            ferric_api::fuzzing::version_headers(None, Some(&written)),
            Ok(version)
        );
        assert_eq!(
            ferric_api::fuzzing::version_headers(Some(&format!("baremetal {written}")), None),
            Ok(version)
        );
    }
});
