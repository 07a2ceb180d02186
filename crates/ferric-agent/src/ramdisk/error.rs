//! Why the ramdisk could not be built, and reading a file of the build host with that error;
//! below the ramdisk's parts (`modules.rs`, `hardware.rs`, …) and the build that uses them
//! (`ramdisk.rs`, which re-exports [`RamdiskError`]).

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use super::programs::TOOLS;

/// Why the ramdisk could not be built.
#[derive(Debug, thiserror::Error)]
pub enum RamdiskError {
    #[error("no kernel in {0}: install linux-image-amd64 (scripts/install-deps.sh --lab)")]
    NoKernel(PathBuf),
    #[error("cannot read {path}")]
    Read {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot write {path}")]
    Write {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("module {module} is neither in {dep} nor built into the kernel")]
    MissingModule { module: String, dep: PathBuf },
    #[error(
        "module file {0} is compressed with something other than XZ; this builder packs `.ko` \
         and `.ko.xz` modules only"
    )]
    CompressedModule(String),
    #[error("cannot unpack the XZ-compressed module {path} with `xz -dc` (install xz-utils)")]
    UnpackModule {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(
        "firmware {name} is not in {dir}: install Debian's {package} (from the non-free-firmware \
         component, which scripts/install-deps.sh --firmware enables)"
    )]
    MissingFirmware {
        name: String,
        dir: PathBuf,
        package: &'static str,
    },
    #[error(
        "{name} ({purpose}) is not at {path}: install {package} (scripts/install-deps.sh --lab), \
         name its place with --tool {name}=PATH, or leave it out with --without {name}"
    )]
    MissingTool {
        name: &'static str,
        purpose: &'static str,
        path: PathBuf,
        package: &'static str,
    },
    #[error("no tool named {0:?}: the tools are {known}", known = tool_names())]
    UnknownTool(String),
    #[error("--tool takes NAME=PATH, not {0:?}")]
    BadToolSpec(String),
    #[error("the file {0} given with --file does not exist")]
    MissingFile(PathBuf),
    #[error("--file {0:?}: the destination must be an absolute path")]
    BadFileSpec(String),
    #[error("{0} is not a statically linked program: install busybox-static")]
    BusyboxNotStatic(PathBuf),
    #[error(
        "the agent binary {0} does not exist: build it (cargo build --release -p ferric-agent) or pass --agent"
    )]
    NoAgent(PathBuf),
}

/// The names of the tools the ramdisk can carry, for the error that names an unknown one.
fn tool_names() -> String {
    TOOLS
        .iter()
        .map(|tool| tool.name)
        .collect::<Vec<_>>()
        .join(", ")
}

/// Reads a file of the build host.
pub(crate) fn read(path: &Path) -> Result<Vec<u8>, RamdiskError> {
    fs::read(path).map_err(|source| RamdiskError::Read {
        path: path.to_owned(),
        source,
    })
}
