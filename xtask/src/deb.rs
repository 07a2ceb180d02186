//! `cargo xtask deb`: the Debian package, assembled from `packaging/` and built with
//! `dpkg-deb` (no cargo-deb: the package is a binary, two units, a settings file, three
//! maintainer scripts and the docs, which a staging directory and one `dpkg-deb --build`
//! express directly, without another tool to install and keep building).
//! `cargo xtask deb-test` builds it and runs `scripts/test-deb.sh` on it (root).
//!
//! Runtime dependencies are declared, not guessed: each shared library the binary needs
//! (`readelf -d`) is traced to the package that ships it on the build host, at least at the
//! version installed there. SQLite is compiled in (sqlx's bundled libsqlite3), so it is not
//! among them.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, bail};

use crate::process::{run, target_dir, workspace_root};

const USAGE: &str = "\
usage: cargo xtask deb [--profile release|dev] [--out DIR]

  --profile  the cargo profile of the packaged binary (default release; `dev` builds in a
             fraction of the time, for testing the package itself)
  --out      where to write ferric_<version>_<arch>.deb (default <target>/deb)
";

/// Builds the package; returns its path.
pub(crate) fn deb(extra: &[String]) -> anyhow::Result<PathBuf> {
    let mut profile = "release".to_owned();
    let mut out = target_dir().join("deb");
    let mut args = extra.iter();
    while let Some(arg) = args.next() {
        match arg.as_str() {
            "--profile" => profile = args.next().context("--profile needs a value")?.clone(),
            "--out" => out = PathBuf::from(args.next().context("--out needs a value")?),
            "-h" | "--help" => {
                print!("{USAGE}");
                return Ok(out);
            }
            other => bail!("unknown argument {other:?}\n\n{USAGE}"),
        }
    }
    run(
        "cargo",
        &[
            "build",
            "--locked",
            "--profile",
            &profile,
            "--bin",
            "ferric",
        ],
        &[],
    )?;
    let profile_dir = if profile == "dev" { "debug" } else { &profile };
    let binary = target_dir().join(profile_dir).join("ferric");

    let version = output(&binary, &["--version"])?;
    let version = version
        .trim()
        .strip_prefix("ferric ")
        .with_context(|| format!("unexpected `ferric --version`: {version}"))?
        .to_owned();
    let arch = output(Path::new("dpkg"), &["--print-architecture"])?
        .trim()
        .to_owned();
    let debian_version = format!("{version}-1");
    let name = format!("ferric_{debian_version}_{arch}");

    let staging = target_dir().join("deb-staging").join(&name);
    if staging.exists() {
        std::fs::remove_dir_all(&staging)
            .with_context(|| format!("cannot clear {}", staging.display()))?;
    }
    let root = workspace_root();
    let packaging = root.join("packaging");
    install(&binary, &staging.join("usr/bin/ferric"), 0o755)?;
    // Debug information is most of a binary's size and no use to an operator.
    run(
        "strip",
        &[
            "--strip-debug",
            &staging.join("usr/bin/ferric").display().to_string(),
        ],
        &[],
    )?;
    for unit in ["ferric.service", "ferric-inspector.service"] {
        install(
            &packaging.join("systemd").join(unit),
            &staging.join("lib/systemd/system").join(unit),
            0o644,
        )?;
    }
    install(
        &packaging.join("ferric.toml"),
        &staging.join("etc/ferric/ferric.toml"),
        0o640,
    )?;
    for doc in [
        "operator-guide.md",
        "configuration.md",
        "inspection.md",
        "scale-out.md",
    ] {
        install(
            &root.join("docs").join(doc),
            &staging.join("usr/share/doc/ferric").join(doc),
            0o644,
        )?;
    }
    std::fs::write(
        staging.join("usr/share/doc/ferric/copyright"),
        "Ferric\nLicense: Apache-2.0 (see /usr/share/common-licenses/Apache-2.0)\n",
    )?;
    for script in ["postinst", "prerm", "postrm"] {
        install(
            &packaging.join("deb").join(script),
            &staging.join("DEBIAN").join(script),
            0o755,
        )?;
    }
    std::fs::write(
        staging.join("DEBIAN/conffiles"),
        "/etc/ferric/ferric.toml\n",
    )?;
    let control = std::fs::read_to_string(packaging.join("deb/control.in"))?
        .replace("@VERSION@", &debian_version)
        .replace("@ARCH@", &arch)
        .replace("@SIZE@", &(tree_size(&staging)? / 1024).to_string())
        .replace("@DEPENDS@", &shared_library_depends(&binary)?.join(", "));
    std::fs::write(staging.join("DEBIAN/control"), control)?;

    std::fs::create_dir_all(&out)?;
    let deb = out.join(format!("{name}.deb"));
    run(
        "dpkg-deb",
        &[
            "--root-owner-group",
            "-Zgzip",
            "--build",
            &staging.display().to_string(),
            &deb.display().to_string(),
        ],
        &[],
    )?;
    eprintln!("xtask: wrote {}", deb.display());
    Ok(deb)
}

/// `cargo xtask deb-test`: a package of the dev-profile binary (the package's layout, units
/// and scripts do not depend on the optimisation level, and a release build costs several
/// minutes of CI on two cores), installed, checked and purged by `scripts/test-deb.sh`.
pub(crate) fn deb_test(extra: &[String]) -> anyhow::Result<()> {
    let mut args = vec!["--profile".to_owned(), "dev".to_owned()];
    args.extend(extra.iter().cloned());
    let deb = deb(&args)?;
    run(
        "bash",
        &["scripts/test-deb.sh", &deb.display().to_string()],
        &[],
    )
}

fn install(from: &Path, to: &Path, mode: u32) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    if let Some(parent) = to.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::fs::copy(from, to)
        .with_context(|| format!("cannot copy {} to {}", from.display(), to.display()))?;
    std::fs::set_permissions(to, std::fs::Permissions::from_mode(mode))?;
    Ok(())
}

fn output(program: &Path, args: &[&str]) -> anyhow::Result<String> {
    let output = Command::new(program)
        .args(args)
        .output()
        .with_context(|| format!("cannot run {}", program.display()))?;
    if !output.status.success() {
        bail!(
            "{} {} failed: {}",
            program.display(),
            args.join(" "),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    Ok(String::from_utf8(output.stdout)?)
}

/// Bytes in the files under `dir`, for `Installed-Size`.
fn tree_size(dir: &Path) -> anyhow::Result<u64> {
    let mut total = 0;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let metadata = entry.metadata()?;
        total += if metadata.is_dir() {
            tree_size(&entry.path())?
        } else {
            metadata.len()
        };
    }
    Ok(total)
}

/// `package (>= upstream version)` for each shared library `binary` needs, from the build
/// host's packages.
fn shared_library_depends(binary: &Path) -> anyhow::Result<Vec<String>> {
    let dynamic = output(Path::new("readelf"), &["-d", &binary.display().to_string()])?;
    let cache = output(Path::new("ldconfig"), &["-p"])?;
    let mut depends: Vec<String> = Vec::new();
    for line in dynamic.lines().filter(|line| line.contains("(NEEDED)")) {
        let soname = line
            .rsplit_once('[')
            .and_then(|(_, rest)| rest.strip_suffix(']'))
            .with_context(|| format!("unexpected readelf line: {line}"))?;
        let path = cache
            .lines()
            .find(|entry| entry.trim_start().starts_with(&format!("{soname} ")))
            .and_then(|entry| entry.rsplit_once("=> "))
            .map(|(_, path)| path.trim().to_owned())
            .with_context(|| format!("{soname} is not in the linker cache"))?;
        let package = owning_package(&path)?;
        let version = output(Path::new("dpkg-query"), &["-W", "-f=${Version}", &package])?;
        // The upstream part: `2.36-9+deb12u9` → `2.36`.
        let upstream = version.split('-').next().unwrap_or(&version).to_owned();
        let depend = format!("{package} (>= {upstream})");
        if !depends.contains(&depend) {
            depends.push(depend);
        }
    }
    Ok(depends)
}

/// The package that ships `path` (trying the merged-/usr spelling too).
fn owning_package(path: &str) -> anyhow::Result<String> {
    let candidates = [
        path.to_owned(),
        path.strip_prefix("/usr").unwrap_or(path).to_owned(),
        format!("/usr{path}"),
    ];
    for candidate in &candidates {
        if let Ok(found) = output(Path::new("dpkg"), &["-S", candidate])
            && let Some((package, _)) = found.lines().next().and_then(|line| line.split_once(':'))
        {
            return Ok(package.trim().to_owned());
        }
    }
    bail!("no installed package ships {path}; cannot declare it as a dependency")
}
