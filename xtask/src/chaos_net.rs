//! The network of `cargo xtask chaos`: every conductor runs in a network namespace of its
//! own, joined to the host by a veth pair, so that one can be cut off the database by a
//! firewall rule while it keeps running — its connections hang as on a real network split,
//! rather than closing as when a process dies.
//!
//! Theory of operation: namespace `n` gets `10.S.n.2/30` on its `eth0`, the host end
//! `10.S.n.1/30` (`S` from the run's process id, so two runs on one machine do not collide).
//! The private PostgreSQL clusters also listen on every host end, and conductor `n` connects to
//! them at `10.S.n.1`. A cut is an nftables table in the conductor's namespace that drops
//! everything in and out of `eth0` (`nft`, Debian's nftables); lifting it deletes the table.
//! Everything lives inside namespaces and veths this run made, which are deleted at the end.

use std::process::{Command, Stdio};

use anyhow::{Context, bail};

/// The nftables table of a cut.
const CUT_TABLE: &str = "chaos_cut";

/// The namespaces of one run.
pub(crate) struct Net {
    subnet: u8,
    namespaces: Vec<String>,
}

fn ip(args: &[&str]) -> anyhow::Result<()> {
    quiet("ip", args, None)
}

fn quiet(program: &str, args: &[&str], stdin: Option<&str>) -> anyhow::Result<()> {
    let mut child = Command::new(program)
        .args(args)
        .stdin(if stdin.is_some() {
            Stdio::piped()
        } else {
            Stdio::null()
        })
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("cannot run {program}"))?;
    if let (Some(text), Some(mut pipe)) = (stdin, child.stdin.take()) {
        use std::io::Write;
        pipe.write_all(text.as_bytes())?;
    }
    let output = child.wait_with_output()?;
    if !output.status.success() {
        bail!(
            "{program} {} failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(())
}

impl Net {
    /// `count` namespaces, each joined to the host.
    pub(crate) fn create(count: usize) -> anyhow::Result<Self> {
        if Command::new("nft").arg("--version").output().is_err() {
            bail!("nft is missing: run scripts/install-deps.sh (nftables)");
        }
        let pid = std::process::id();
        let subnet = u8::try_from(pid % 200 + 20).unwrap_or(20);
        let mut net = Self {
            subnet,
            namespaces: Vec::new(),
        };
        for n in 0..count {
            let namespace = format!("ferric-chaos-{pid}-{n}");
            let host_if = format!("fc{}h{n}", pid % 100_000);
            ip(&["netns", "add", &namespace])?;
            net.namespaces.push(namespace.clone());
            ip(&[
                "link", "add", &host_if, "type", "veth", "peer", "name", "eth0", "netns",
                &namespace,
            ])?;
            ip(&[
                "addr",
                "add",
                &format!("{}/30", net.host_addr(n)),
                "dev",
                &host_if,
            ])?;
            ip(&["link", "set", &host_if, "up"])?;
            let inner = format!("10.{subnet}.{n}.2/30");
            ip(&["-n", &namespace, "addr", "add", &inner, "dev", "eth0"])?;
            ip(&["-n", &namespace, "link", "set", "eth0", "up"])?;
            ip(&["-n", &namespace, "link", "set", "lo", "up"])?;
        }
        Ok(net)
    }

    /// The host's address towards namespace `n`: where its conductor finds PostgreSQL.
    pub(crate) fn host_addr(&self, n: usize) -> String {
        format!("10.{}.{n}.1", self.subnet)
    }

    /// Every host end, for PostgreSQL's `listen_addresses`.
    pub(crate) fn host_addrs(&self) -> Vec<String> {
        (0..self.namespaces.len())
            .map(|n| self.host_addr(n))
            .collect()
    }

    /// The addresses PostgreSQL must trust (`pg_hba.conf`).
    pub(crate) fn clients(&self) -> String {
        format!("10.{}.0.0/16", self.subnet)
    }

    /// Namespace `n`'s name, for `ip netns exec`.
    pub(crate) fn namespace(&self, n: usize) -> &str {
        &self.namespaces[n]
    }

    /// Drops every packet in and out of namespace `n`.
    pub(crate) fn cut(&self, n: usize) -> anyhow::Result<()> {
        let rules = format!(
            "table inet {CUT_TABLE} {{\n\
             chain input {{ type filter hook input priority 0; iifname \"eth0\" drop; }}\n\
             chain output {{ type filter hook output priority 0; oifname \"eth0\" drop; }}\n\
             }}\n"
        );
        quiet(
            "ip",
            &["netns", "exec", &self.namespaces[n], "nft", "-f", "-"],
            Some(&rules),
        )
    }

    /// Lifts the cut of namespace `n`.
    pub(crate) fn restore(&self, n: usize) -> anyhow::Result<()> {
        quiet(
            "ip",
            &[
                "netns",
                "exec",
                &self.namespaces[n],
                "nft",
                "delete",
                "table",
                "inet",
                CUT_TABLE,
            ],
            None,
        )
    }
}

impl Drop for Net {
    /// Deleting a namespace deletes its end of the veth, and with it the host's end.
    fn drop(&mut self) {
        for namespace in &self.namespaces {
            let _ = ip(&["netns", "delete", namespace]);
        }
    }
}
