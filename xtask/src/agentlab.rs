//! `cargo xtask bench-agent-lab`: the agent's image write against `dd` on the same virtual
//! disk of a lab machine (issue 26). Builds the agent, then runs the benchmark binary
//! `crates/ferric/tests/lab_agent_bench.rs` (root, the lab's packages), which brings the lab
//! up, deploys a raw and a qcow2 image through the agent, runs `dd` in the ramdisk's shell and
//! prints one table (docs/benchmarks.md).

use anyhow::{Context, bail};

use crate::process::{run, target_dir};

pub(crate) const USAGE: &str = "\
usage: cargo xtask bench-agent-lab [--size-mib N] [--memory MIB] [--cpus N]
                                   [--accel kvm|tcg] [--agent release|debug]

  --size-mib N     image size and dd's write, in MiB (default 1024; 16..=3072: the lab's
                   disks are 4 GiB)
  --memory MIB     the lab machine's memory (default 1024)
  --cpus N         the lab machine's vCPUs (default 1; 1..=16): under TCG a second vCPU
                   lets the agent hash on one while it downloads and writes on the other
  --accel A        QEMU's accelerator: tcg (software emulation, the default: the emulated
                   CPU, not the disk, limits every writer) or kvm (`-cpu host`; needs a
                   usable /dev/kvm)
  --agent P        the agent's build profile in the ramdisk (default release)
";

#[derive(Debug, Clone, PartialEq, Eq)]
struct Options {
    size_mib: u64,
    memory_mib: u64,
    cpus: u32,
    accel: String,
    release: bool,
}

fn kvm_usable() -> bool {
    std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/kvm")
        .is_ok()
}

fn parse(args: &[String], kvm: bool) -> anyhow::Result<Options> {
    let mut options = Options {
        size_mib: 1024,
        memory_mib: 1024,
        cpus: 1,
        // Not KVM by default: on nested hosts QEMU's `-cpu host` can fail or hang (docs/lab.md).
        accel: "tcg".to_owned(),
        release: true,
    };
    let mut args = args.iter();
    while let Some(arg) = args.next() {
        let mut value = |name: &str| -> anyhow::Result<String> {
            args.next()
                .cloned()
                .with_context(|| format!("{name} needs a value\n\n{USAGE}"))
        };
        match arg.as_str() {
            "--size-mib" => {
                let text = value("--size-mib")?;
                options.size_mib = match text.parse::<u64>() {
                    Ok(size) if (16..=3072).contains(&size) => size,
                    _ => bail!("--size-mib {text:?}: expected 16..=3072\n\n{USAGE}"),
                };
            }
            "--memory" => {
                let text = value("--memory")?;
                options.memory_mib = match text.parse::<u64>() {
                    Ok(size) if (256..=8192).contains(&size) => size,
                    _ => bail!("--memory {text:?}: expected 256..=8192 MiB\n\n{USAGE}"),
                };
            }
            "--cpus" => {
                let text = value("--cpus")?;
                options.cpus = match text.parse::<u32>() {
                    Ok(count) if (1..=16).contains(&count) => count,
                    _ => bail!("--cpus {text:?}: expected 1..=16\n\n{USAGE}"),
                };
            }
            "--accel" => {
                options.accel = match value("--accel")?.as_str() {
                    "kvm" if kvm => "kvm".to_owned(),
                    "kvm" => bail!("--accel kvm: /dev/kvm cannot be opened here"),
                    "tcg" => "tcg".to_owned(),
                    other => bail!("--accel {other:?}: expected kvm or tcg\n\n{USAGE}"),
                };
            }
            "--agent" => {
                options.release = match value("--agent")?.as_str() {
                    "release" => true,
                    "debug" => false,
                    other => bail!("--agent {other:?}: expected release or debug\n\n{USAGE}"),
                };
            }
            "-h" | "--help" => {
                print!("{USAGE}");
                std::process::exit(0);
            }
            other => bail!("unknown argument {other:?}\n\n{USAGE}"),
        }
    }
    Ok(options)
}

pub(crate) fn bench_agent_lab(args: &[String]) -> anyhow::Result<()> {
    let options = parse(args, kvm_usable())?;
    let mut build = vec![
        "build",
        "--locked",
        "-p",
        "ferric-agent",
        "--bin",
        "ferric-agent",
    ];
    if options.release {
        build.push("--release");
    }
    run("cargo", &build, &[])?;
    let agent = target_dir()
        .join(if options.release { "release" } else { "debug" })
        .join("ferric-agent");
    let agent = agent.to_string_lossy().into_owned();
    let size = options.size_mib.to_string();
    let memory = options.memory_mib.to_string();
    let cpus = options.cpus.to_string();
    run(
        "cargo",
        &[
            "test",
            "--locked",
            "-p",
            "ferric",
            "--features",
            "lab-e2e",
            "--test",
            "lab_agent_bench",
        ],
        &[
            ("FERRIC_E2E_AGENT", &agent),
            ("FERRIC_BENCH_SIZE_MIB", &size),
            ("FERRIC_BENCH_MEMORY", &memory),
            ("FERRIC_LAB_ACCEL", &options.accel),
            ("FERRIC_LAB_CPUS", &cpus),
        ],
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(list: &[&str]) -> Vec<String> {
        list.iter().map(|arg| (*arg).to_owned()).collect()
    }

    #[test]
    fn options_are_checked() {
        let default = parse(&[], true).expect("defaults");
        assert_eq!(
            default,
            Options {
                size_mib: 1024,
                memory_mib: 1024,
                cpus: 1,
                accel: "tcg".into(),
                release: true,
            }
        );
        assert_eq!(
            parse(&args(&["--accel", "kvm"]), true).expect("kvm").accel,
            "kvm"
        );
        let chosen = parse(
            &args(&[
                "--size-mib",
                "2048",
                "--memory",
                "768",
                "--cpus",
                "2",
                "--accel",
                "tcg",
                "--agent",
                "debug",
            ]),
            true,
        )
        .expect("all options");
        assert_eq!(
            chosen,
            Options {
                size_mib: 2048,
                memory_mib: 768,
                cpus: 2,
                accel: "tcg".into(),
                release: false,
            }
        );
        for wrong in [
            &["--size-mib", "8"][..],
            &["--size-mib", "4096"],
            &["--size-mib"],
            &["--memory", "lots"],
            &["--cpus", "0"],
            &["--cpus", "17"],
            &["--accel", "hvf"],
            &["--agent", "fast"],
            &["--nodes", "2"],
        ] {
            assert!(parse(&args(wrong), true).is_err(), "{wrong:?} was accepted");
        }
        assert!(parse(&args(&["--accel", "kvm"]), false).is_err());
    }
}
