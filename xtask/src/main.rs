//! `cargo xtask`: the one entry point for chores, so that a developer and CI run the same
//! steps. `cargo xtask test` is the project's test command; `cargo xtask ci` is what `.ci/run`
//! does after installing dependencies.

mod agentlab;
mod bench;
mod bench_http;
mod bench_memory;
mod chaos;
mod chaos_load;
mod chaos_net;
mod chaos_pg;
mod clients;
mod compare;
mod deb;
mod fleet;
mod fleet_deploy;
mod fuzz;
mod keystone;
mod openstack;
mod process;
mod scale;
mod server;
mod tempest;
#[cfg(test)]
mod tidy;
#[cfg(test)]
mod tidy_codemap;
#[cfg(test)]
mod tidy_imports;
mod ui;
mod upgrade;

use process::{run, target_dir, workspace_root};

use anyhow::bail;

const USAGE: &str = "\
usage: cargo xtask <command> [-- extra test-runner arguments]

commands:
  test    install what the tests need (PostgreSQL, cargo-nextest), make sure PostgreSQL is
          running, and run every test of the workspace on SQLite and PostgreSQL
  lint    cargo fmt --check and cargo clippy --all-targets -D warnings (also with lab-e2e)
  ci      lint, test, rolling-upgrade, chaos, deb-test, clients, ui-test, a bounded run of every
          fuzz target (20 s each), then e2e (what .ci/run does)
  e2e     the QEMU end-to-end suites (root): install the lab packages, build the agent, run
          ferric-lab's lab_e2e, ferric's lab_lifecycle (a node's whole life on the lab) and
          lab_vmedia (virtual media with DHCP denied),
          lab_ipa (the same with the unmodified ironic-python-agent),
          lab_agent_tls (ferric-agent over auto-TLS: no agent token in the captured traffic),
          lab_console (boot messages through `ferric node console` over IPMI Serial-over-LAN
          and in the web UI's terminal), lab_partition (a partition image under UEFI),
          lab_raid (a RAID-1 built out of band by the lab BMC; a live ISO), and lab_vmedia
          again with secure boot on, lab_metal3 (virtual media driven by the requests
          Metal3's baremetal-operator sends), lab_switch_ovs (switch ports on an Open
          vSwitch driven over SSH through a node's life)
  rolling-upgrade
          API and conductor processes of an older release (a pinned commit's binary, built
          once and cached in ~/.cache/ferric/release-n; one run per older hand-off version)
          replaced one by one with this build on PostgreSQL while a fake-hardware fleet goes
          round (crates/ferric/tests/rolling_upgrade.rs; docs/operator-guide.md#rolling-upgrades)
  deb     the Debian package from packaging/: ferric, its systemd units, /etc/ferric/ferric.toml
          (`cargo xtask deb --help`; docs/operator-guide.md#packages)
  deb-test
          build the package (dev profile), install it with dpkg -i, check `ferric --version`,
          the units (systemd-analyze verify) and the `ferric db` commands as its user, upgrade,
          purge, and check that only /var/lib/ferric is left (root; scripts/test-deb.sh)
  docs    regenerate the generated documents (docs/state-machine.md, …)
  bench-power-sync
          one power-sync pass over 10,000 redfish nodes against an in-repo BMC simulator that
          answers after 200 ms; prints wall and CPU time (release build; flags after `--`:
          --nodes --delay-ms --nodes-per-bmc --workers --per-bmc)
  bench-agent-write
          build ferric-agent in release mode and time it writing a 2 GiB raw and qcow2 image
          to a file-backed disk next to dd, with its peak RSS (extra arguments go to
          ferric-agent-bench, e.g. `-- --size-mib 512 --dir /var/tmp`)
  bench-agent-lab
          the agent's raw and qcow2 writes against dd on the same virtual disk of a lab
          machine, with its peak RSS (root; `cargo xtask bench-agent-lab --help`)
  clients run the OpenStack clients (baremetal CLI, openstacksdk) against ferric, or against
          Ironic standalone, and compare each step with the goldens recorded from Ironic
          (`cargo xtask clients --help`; part of `ci`: any difference fails it)
  bench-api
          the API read benchmark: a release ferric with 10,000 nodes on SQLite (or
          PostgreSQL with --postgres), p50/p99 of the list and show paths and single-node
          requests/s (`cargo xtask bench-api --help`; results in docs/benchmarks.md)
  bench-compare
          Ferric beside OpenStack Ironic (with --ironic): fleets of 100 and 1,000 nodes
          through manage/provide/deploy/undeploy, reads at 10,000 nodes, peak and idle RSS;
          one table with the ratio (`cargo xtask bench-compare --help`)
  bench-scale
          100,000 nodes on PostgreSQL, 3 conductors + 2 APIs: enroll rate, detail page at
          10k/100k, a 10,000-node deploy cycle, a power-sync pass against simulated BMCs,
          takeover of a SIGKILLed conductor, RSS per process (`cargo xtask bench-scale --help`)
  bench-fleet-deploy
          a rack deploying one image (issue 45): N ferric-agent processes, each in a network
          namespace behind a tc-shaped link, through a release ferric whose link is shaped the
          same; one machine, N from the conductor only, N with peer-assisted delivery: wall
          time, the conductor's bytes as copies of the image, agents' peak RSS (root;
          `cargo xtask bench-fleet-deploy --help`)
  chaos   fake-hardware nodes cycling on a private PostgreSQL (primary + synchronous replica)
          with 3 conductors (one 10 minutes fast) and 2 APIs while processes are SIGKILLed,
          PostgreSQL crashes and fails over; invariants checked, one table
          (`cargo xtask chaos --help`; --long: 1,000 nodes for 10 minutes; docs/benchmarks.md)
  ui-test the web UI's browser test: ferric with http_basic users, 10,000 nodes, Debian's
          headless chromium driven by Playwright (tests/ui/test_ui.py): log in, overview,
          table filters and search timed, deploy and abort from the UI, a reader's read-only
          page, the console terminal; a screenshot of each page (`cargo xtask ui-test --help`)
  keystone
          a real OpenStack Keystone (PyPI, unmodified) on 127.0.0.1 with test users and a
          `baremetal` catalog entry: start|stop|env|status|purge; `start` prints the OS_* and
          FERRIC_KEYSTONE_* environment and writes a clouds.yaml (docs/keystone.md)
  tempest ironic-tempest-plugin's API tests (tempest and the plugin unmodified from PyPI,
          pinned) against a debug ferric behind that Keystone; prints passed/failed/skipped
          and the failing tests (`cargo xtask tempest --help`; docs/keystone.md)
  openstack
          `openstack server create` onto Ferric: ferric (fake hardware) behind a real
          Keystone, Glance, Placement and Nova with the ironic driver (PyPI, unmodified,
          pinned); server create, reboot, stop/start, power changes on Ferric's side that
          Nova follows, rebuild, delete (`cargo xtask openstack --help`; docs/openstack.md)
  fuzz    every cargo-fuzz target in fuzz/ for a bounded time, then schemathesis against
          docs/openapi.json on a running ferric server; prints crashes, 5xx and schema
          violations, and fails unless all are zero (`cargo xtask fuzz --help`;
          docs/fuzzing.md)
";

fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let command = args.next().unwrap_or_default();
    let extra: Vec<String> = args.skip_while(|arg| arg == "--").collect();
    match command.as_str() {
        "test" => test(&extra),
        "lint" => lint(),
        "ci" => {
            lint()?;
            test(&extra)?;
            // Releases N and N+1 side by side on PostgreSQL while processes are replaced one
            // by one: from each older hand-off version (upgrade::RELEASES, each built once and
            // cached in ~/.cache/ferric/release-n).
            upgrade::rolling_upgrade(&[])?;
            // Processes SIGKILLed and cut off, PostgreSQL crashed and failed over, one conductor's
            // clock 10 minutes fast, under a cycling fleet: every invariant of issue 42 holds
            // (about 90 s; docs/benchmarks.md#chaos-issue-42).
            chaos::chaos(&[])?;
            // The package: built, installed, upgraded and purged on this machine (root).
            deb::deb_test(&[])?;
            // The real OpenStack clients against ferric, step by step against Ironic's
            // goldens: any difference fails CI (about 5 minutes, most of it the CLI's start-up).
            clients::clients(&[])?;
            // Ironic's own API conformance tests (ironic-tempest-plugin, by Tempest) against
            // ferric behind a real Keystone (about 12 minutes); the known failures listed with
            // their causes in tests/tempest/known-failures.txt are left out, any other fails
            // (a failed test gets one more try and is then named FLAKY in the output).
            tempest::tempest(&workspace_root(), &["--retry-failed".to_owned()])?;
            // `openstack server create` onto ferric through a real Nova (ironic driver),
            // Placement, Neutron's API and Glance: create, reboot, stop/start, power changes
            // Nova follows, rebuild, delete (about 6 minutes, most of it the services' start).
            openstack::openstack(&workspace_root(), &[])?;
            // The web UI in a real browser (headless chromium, 10,000 nodes; docs/ui.md).
            ui::ui_test(&[])?;
            // A parser regression fails CI: every fuzz target, briefly (fuzz::CI_SECONDS each).
            fuzz::ci()?;
            // The QEMU suites need root (namespaces, taps); CI runs as root.
            e2e()
        }
        "docs" => docs(),
        "deb" => deb::deb(&extra).map(drop),
        "deb-test" => deb::deb_test(&extra),
        "e2e" => e2e(),
        "rolling-upgrade" => upgrade::rolling_upgrade(&extra),
        "clients" => clients::clients(&extra),
        "ui-test" => ui::ui_test(&extra),
        "bench-power-sync" => bench_power_sync(&extra),
        "bench-agent-write" => bench_agent_write(&extra),
        "bench-agent-lab" => agentlab::bench_agent_lab(&extra),
        "bench-api" => bench::bench_api(&extra),
        "bench-compare" => compare::bench_compare(&extra),
        "bench-scale" => scale::bench_scale(&extra),
        "bench-fleet-deploy" => fleet_deploy::bench_fleet_deploy(&extra),
        "chaos" => chaos::chaos(&extra),
        "fuzz" => fuzz::fuzz(&extra),
        "keystone" => keystone::keystone(&workspace_root(), &extra),
        "tempest" => tempest::tempest(&workspace_root(), &extra),
        "openstack" => openstack::openstack(&workspace_root(), &extra),
        "" | "help" | "-h" | "--help" => {
            print!("{USAGE}");
            Ok(())
        }
        other => bail!("unknown command {other:?}\n\n{USAGE}"),
    }
}

fn lint() -> anyhow::Result<()> {
    run("cargo", &["fmt", "--all", "--check"], &[])?;
    run(
        "cargo",
        &[
            "clippy",
            "--workspace",
            "--all-targets",
            "--locked",
            "--",
            "-D",
            "warnings",
        ],
        &[],
    )?;
    // The lab e2e suites are behind a feature the run above leaves off; lint them too.
    run(
        "cargo",
        &[
            "clippy",
            "-p",
            "ferric-lab",
            "-p",
            "ferric",
            "--all-targets",
            // A `test = false` target, which --all-targets leaves out.
            "--test",
            "lab_agent_bench",
            "--features",
            "ferric-lab/lab-e2e,ferric/lab-e2e",
            "--locked",
            "--",
            "-D",
            "warnings",
        ],
        &[],
    )?;
    // Licenses, duplicate crates and where crates come from (deny.toml). Not `advisories`:
    // its database is a git repository this machine and CI cannot reach (docs/security.md).
    run(
        "cargo",
        &["deny", "check", "licenses", "bans", "sources"],
        &[],
    )
}

fn test(extra: &[String]) -> anyhow::Result<()> {
    run("bash", &["scripts/install-deps.sh"], &[])?;
    let postgres_url = std::env::var("FERRIC_TEST_POSTGRES_URL")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/postgres".to_owned());
    let mut args = vec![
        "nextest",
        "run",
        "--workspace",
        "--locked",
        "--no-fail-fast",
    ];
    args.extend(extra.iter().map(String::as_str));
    run(
        "cargo",
        &args,
        &[("FERRIC_TEST_POSTGRES_URL", &postgres_url)],
    )
}

fn e2e() -> anyhow::Result<()> {
    run("bash", &["scripts/install-deps.sh", "--lab"], &[])?;
    // The release agent, as a site's ramdisk carries it: its initramfs is about a third of
    // the debug agent's (19 MiB), which every network boot fetches and unpacks, and it starts
    // and inventories faster under TCG. Only the agent binary is built (its dependencies once,
    // then kept in the target directory between runs).
    run(
        "cargo",
        &[
            "build",
            "--release",
            "--locked",
            "-p",
            "ferric-agent",
            "--bin",
            "ferric-agent",
        ],
        &[],
    )?;
    let agent = target_dir().join("release").join("ferric-agent");
    let agent = agent.to_string_lossy().into_owned();
    // The ramdisk's kernel: the host's, unless FERRIC_LAB_KERNEL_DIR names another one to
    // unpack there and boot (`install-deps.sh --lab-kernel`: bookworm's ZSTD 6.12, which
    // measured slower than the host's 6.1 over whole lab boots; docs/lab.md).
    let kernel = match std::env::var("FERRIC_LAB_KERNEL_DIR") {
        Ok(dir) if !dir.is_empty() => {
            run("bash", &["scripts/install-deps.sh", "--lab-kernel"], &[])?;
            Some(dir)
        }
        _ => None,
    };
    // (crate, test, whether it boots Ferric's own agent ramdisk, extra environment). lab_ipa
    // boots the unmodified ironic-python-agent (scripts/build-ipa-ramdisk.sh, cached) instead
    // and is driven through inspection, cleaning, deploy and the boot from disk. lab_vmedia runs
    // twice: the second time on OVMF with secure boot on (Debian's signed shim, GRUB, kernel).
    /// The environment variable lab_vmedia reads for its secure-boot run.
    const SECURE_BOOT: Option<(&str, &str)> = Some(("FERRIC_E2E_SECURE_BOOT", "1"));
    let suites = [
        ("ferric-lab", "lab_e2e", false, None),
        ("ferric", "lab_lifecycle", true, None),
        ("ferric", "lab_vmedia", true, None),
        ("ferric", "lab_vmedia", true, SECURE_BOOT),
        ("ferric", "lab_ipa", false, None),
        ("ferric", "lab_agent_tls", true, None),
        ("ferric", "lab_console", true, None),
        ("ferric", "lab_partition", true, None),
        ("ferric", "lab_raid", true, None),
        ("ferric", "lab_metal3", true, None),
        ("ferric", "lab_switch_ovs", false, None),
    ];
    for (package, test, uses_agent, extra) in suites {
        let mut envs: Vec<(&str, &str)> = Vec::new();
        if uses_agent {
            envs.push(("FERRIC_E2E_AGENT", &agent));
            if let Some(kernel) = &kernel {
                envs.push(("FERRIC_E2E_KERNEL_DIR", kernel));
            }
        }
        envs.extend(extra);
        run(
            "cargo",
            &[
                "test",
                "--locked",
                "-p",
                package,
                "--features",
                "lab-e2e",
                "--test",
                test,
            ],
            &envs,
        )?;
    }
    Ok(())
}

/// `crates/ferric-conductor/examples/power_sync_bench.rs`, optimised as in production.
fn bench_power_sync(extra: &[String]) -> anyhow::Result<()> {
    let mut args = vec![
        "run",
        "--release",
        "--locked",
        "-p",
        "ferric-conductor",
        "--example",
        "power_sync_bench",
        "--",
    ];
    args.extend(extra.iter().map(String::as_str));
    run("cargo", &args, &[])
}

fn docs() -> anyhow::Result<()> {
    run(
        "cargo",
        &["test", "--workspace", "--locked", "--", "doc_is_up_to_date"],
        &[("FERRIC_UPDATE_DOCS", "1")],
    )
}

/// `cargo xtask bench-agent-write`: a release build, then the benchmark binary.
fn bench_agent_write(extra: &[String]) -> anyhow::Result<()> {
    run(
        "cargo",
        &[
            "build",
            "--release",
            "--locked",
            "-p",
            "ferric-agent",
            "--bins",
        ],
        &[],
    )?;
    let bench = target_dir().join("release").join("ferric-agent-bench");
    let args: Vec<&str> = extra.iter().map(String::as_str).collect();
    run(&bench.to_string_lossy(), &args, &[])
}
