//! The `ferric server` flags that override a setting (the last of the settings' layers): only
//! the few an operator gives at a prompt; every other setting comes from the file or the
//! environment.

use std::net::SocketAddr;
use std::path::PathBuf;

use serde::Serialize;

use super::{AuthStrategySetting, LogFormat, Role};

/// Command-line flags; each one, when given, wins over the file and the environment.
#[derive(Debug, Default, clap::Args, Serialize)]
pub(crate) struct SettingsOverrides {
    /// Database: a SQLite file path or URL (default `sqlite://ferric.db`), or a postgres:// URL.
    /// [env: FERRIC_DATABASE_URL]
    #[arg(long, value_name = "URL")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) database_url: Option<String>,

    /// Address and port for the Bare Metal API (default 127.0.0.1:6385).
    /// [env: FERRIC_API_LISTEN]
    #[arg(long, value_name = "ADDR:PORT")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) api_listen: Option<SocketAddr>,

    /// Log format (default text). [env: FERRIC_LOG_FORMAT]
    #[arg(long, value_enum, value_name = "FORMAT")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) log_format: Option<LogFormat>,

    /// Log filter, e.g. `debug` or `info,ferric_db=debug` (default info).
    /// [env: FERRIC_LOG_LEVEL]
    #[arg(long, value_name = "FILTER")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) log_level: Option<String>,

    /// What this process runs: all (default), api or conductor; api and conductor need
    /// PostgreSQL. [env: FERRIC_ROLE]
    #[arg(long, value_enum, value_name = "ROLE")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) role: Option<Role>,

    // --- API access: authentication and request limits ---
    /// Who may call the API: noauth (default), http_basic or keystone.
    /// [env: FERRIC_AUTH_STRATEGY]
    #[arg(long, value_enum, value_name = "STRATEGY")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) auth_strategy: Option<AuthStrategySetting>,

    /// User file (bcrypt htpasswd) for http_basic. [env: FERRIC_HTTP_BASIC_AUTH_USER_FILE]
    #[arg(long, value_name = "PATH")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) http_basic_auth_user_file: Option<PathBuf>,

    /// Largest accepted request body in bytes (default 1048576).
    /// [env: FERRIC_API_MAX_BODY_SIZE]
    #[arg(long, value_name = "BYTES")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) api_max_body_size: Option<usize>,

    /// Bytes of rendered node documents kept for detail listings (default 25165824; 0: none).
    /// [env: FERRIC_API_RENDER_CACHE_SIZE]
    #[arg(long, value_name = "BYTES")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) api_render_cache_size: Option<usize>,

    /// Seconds without a detail listing before the rendered documents are dropped (default 60;
    /// 0: never).
    /// [env: FERRIC_API_RENDER_CACHE_IDLE]
    #[arg(long, value_name = "SECONDS")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) api_render_cache_idle: Option<u64>,
    // --- end of API access settings ---
    /// URL agents reach this API at, for the ramdisk's kernel command line.
    /// [env: FERRIC_API_URL]
    #[arg(long, value_name = "URL")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) api_url: Option<String>,

    /// Address for the boot file server (unset: none). [env: FERRIC_BOOT_HTTP_LISTEN]
    #[arg(long, value_name = "ADDR:PORT")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) boot_http_listen: Option<SocketAddr>,

    /// URL machines reach the boot file server at (default http://<boot-http-listen>).
    /// [env: FERRIC_BOOT_HTTP_URL]
    #[arg(long, value_name = "URL")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) boot_http_url: Option<String>,

    /// Directory the boot file server serves (default ./ferric-boot).
    /// [env: FERRIC_BOOT_HTTP_ROOT]
    #[arg(long, value_name = "DIR")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) boot_http_root: Option<PathBuf>,
}
