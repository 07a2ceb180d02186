//! How fast the lab's machines run: QEMU's accelerator and the vCPU count, each overridable
//! from the environment of `ferric lab up` for benchmarks (`cargo xtask bench-agent-lab`).

/// QEMU's accelerator: TCG (software emulation, every host), or KVM with the host's CPU when
/// `FERRIC_LAB_ACCEL=kvm` was set for `ferric lab up` (its BMCs start the machines) — for
/// measurements that must not be dominated by emulating the CPU (`cargo xtask
/// bench-agent-lab`).
pub fn accelerator(setting: Option<&str>) -> &'static [&'static str] {
    match setting {
        Some("kvm") => &["-accel", "kvm", "-cpu", "host"],
        _ => &["-accel", "tcg"],
    }
}

/// The machine's vCPUs: its own count, or `FERRIC_LAB_CPUS` (1..=16) when set for `ferric
/// lab up` — for `cargo xtask bench-agent-lab --cpus`, where a second vCPU lets the agent hash
/// while it writes; a value out of range is ignored.
pub fn vcpus(own: u32, setting: Option<&str>) -> u32 {
    setting
        .and_then(|text| text.trim().parse::<u32>().ok())
        .filter(|count| (1..=16).contains(count))
        .unwrap_or(own)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_vcpu_count_can_be_overridden() {
        assert_eq!(vcpus(1, None), 1);
        assert_eq!(vcpus(1, Some("2")), 2);
        assert_eq!(vcpus(1, Some(" 4 ")), 4);
        assert_eq!(vcpus(1, Some("0")), 1);
        assert_eq!(vcpus(1, Some("lots")), 1);
        assert_eq!(vcpus(2, Some("64")), 2);
    }

    #[test]
    fn kvm_only_when_asked() {
        assert_eq!(accelerator(None), ["-accel", "tcg"]);
        assert_eq!(accelerator(Some("tcg")), ["-accel", "tcg"]);
        assert_eq!(accelerator(Some("kvm")), ["-accel", "kvm", "-cpu", "host"]);
    }
}
