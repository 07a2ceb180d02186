//! Keystone authentication for the CLI, as the OpenStack clients (`baremetal`, `openstack`) do
//! it: credentials from a `clouds.yaml` cloud (`OS_CLOUD` / `--os-cloud`) and the `OS_*`
//! variables, a token from Keystone, and the Bare Metal endpoint from the token's catalog.
//!
//! Theory of operation: [`KeystoneConfig::from_env`] gathers the settings — the cloud's `auth`
//! section first, each `OS_*` variable that is set overriding it — and says whether Keystone is
//! in use at all (an auth URL or a token). [`KeystoneConfig::login`] then gets a token: the
//! given `OS_TOKEN`, or `POST /v3/auth/tokens` with the password, scoped to the system
//! (`OS_SYSTEM_SCOPE=all`) or to a project; the catalog comes with the answer (or from `GET
//! /v3/auth/catalog` for a given token), and its `baremetal` endpoint of the chosen interface
//! and region is the API's URL unless `OS_BAREMETAL_ENDPOINT` or `OS_ENDPOINT` names one.
//!
//! clouds.yaml is looked for where openstacksdk looks: `OS_CLIENT_CONFIG_FILE`, then
//! `./clouds.yaml`, `~/.config/openstack/clouds.yaml`, `/etc/openstack/clouds.yaml`.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::{Value, json};

use crate::CliError;

/// What the CLI needs to get a token, gathered from clouds.yaml and `OS_*`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct KeystoneConfig {
    pub auth_url: Option<String>,
    pub username: Option<String>,
    pub password: Option<String>,
    pub project_name: Option<String>,
    pub project_id: Option<String>,
    pub user_domain_name: Option<String>,
    pub project_domain_name: Option<String>,
    /// `all` for a system-scoped token.
    pub system_scope: Option<String>,
    /// A token to use as is (`OS_TOKEN`, or `auth.token` with the `token` auth type).
    pub token: Option<String>,
    pub region_name: Option<String>,
    /// The catalog interface: `public` (default), `internal` or `admin`.
    pub interface: Option<String>,
    /// `OS_BAREMETAL_ENDPOINT`, `OS_ENDPOINT` or the cloud's `baremetal_endpoint_override`.
    pub endpoint: Option<String>,
}

/// A token and where the Bare Metal API is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Session {
    pub token: String,
    /// The API's root from the catalog or the override; `None`: the catalog has no
    /// `baremetal` service.
    pub endpoint: Option<String>,
}

impl KeystoneConfig {
    /// The settings of `cloud` (or `OS_CLOUD`) overridden by the `OS_*` variables; `lookup`
    /// reads a variable (the environment, or a test's map).
    pub fn from_env(
        cloud: Option<&str>,
        lookup: &dyn Fn(&str) -> Option<String>,
    ) -> Result<Self, CliError> {
        let mut config = match cloud.map(str::to_owned).or_else(|| lookup("OS_CLOUD")) {
            Some(cloud) => Self::from_cloud(&cloud, lookup)?,
            None => Self::default(),
        };
        let set = |target: &mut Option<String>, names: &[&str]| {
            if let Some(value) = names
                .iter()
                .find_map(|name| lookup(name).filter(|value| !value.is_empty()))
            {
                *target = Some(value);
            }
        };
        set(&mut config.auth_url, &["OS_AUTH_URL"]);
        set(&mut config.username, &["OS_USERNAME"]);
        set(&mut config.password, &["OS_PASSWORD"]);
        set(
            &mut config.project_name,
            &["OS_PROJECT_NAME", "OS_TENANT_NAME"],
        );
        set(&mut config.project_id, &["OS_PROJECT_ID", "OS_TENANT_ID"]);
        set(&mut config.user_domain_name, &["OS_USER_DOMAIN_NAME"]);
        set(&mut config.project_domain_name, &["OS_PROJECT_DOMAIN_NAME"]);
        set(&mut config.system_scope, &["OS_SYSTEM_SCOPE"]);
        set(&mut config.token, &["OS_TOKEN", "OS_AUTH_TOKEN"]);
        set(&mut config.region_name, &["OS_REGION_NAME"]);
        set(&mut config.interface, &["OS_INTERFACE"]);
        set(
            &mut config.endpoint,
            &["OS_BAREMETAL_ENDPOINT", "OS_ENDPOINT"],
        );
        Ok(config)
    }

    /// Whether the CLI should authenticate with Keystone (an auth URL or a token is set).
    pub fn in_use(&self) -> bool {
        self.auth_url.is_some() || self.token.is_some()
    }

    fn from_cloud(cloud: &str, lookup: &dyn Fn(&str) -> Option<String>) -> Result<Self, CliError> {
        let mut candidates: Vec<PathBuf> = Vec::new();
        if let Some(file) = lookup("OS_CLIENT_CONFIG_FILE") {
            candidates.push(file.into());
        }
        candidates.push("clouds.yaml".into());
        if let Some(home) = lookup("HOME") {
            candidates.push(PathBuf::from(home).join(".config/openstack/clouds.yaml"));
        }
        candidates.push("/etc/openstack/clouds.yaml".into());
        let Some(path) = candidates.into_iter().find(|path| path.is_file()) else {
            return Err(CliError::Usage(format!(
                "OS_CLOUD is {cloud} but no clouds.yaml was found (OS_CLIENT_CONFIG_FILE, \
                 ./clouds.yaml, ~/.config/openstack/clouds.yaml, /etc/openstack/clouds.yaml)"
            )));
        };
        let text = std::fs::read_to_string(&path)
            .map_err(|error| CliError::Usage(format!("cannot read {}: {error}", path.display())))?;
        let document: Value = serde_yaml_ng::from_str(&text).map_err(|error| {
            CliError::Usage(format!("{} is not valid YAML: {error}", path.display()))
        })?;
        let Some(entry) = document["clouds"].get(cloud) else {
            return Err(CliError::Usage(format!(
                "{} has no cloud named {cloud}",
                path.display()
            )));
        };
        let auth = &entry["auth"];
        let text = |value: &Value| match value {
            Value::String(text) => Some(text.clone()),
            Value::Bool(flag) => Some(flag.to_string()),
            Value::Number(number) => Some(number.to_string()),
            _ => None,
        };
        let system_scope = match &auth["system_scope"] {
            Value::Bool(true) => Some("all".to_owned()),
            other => text(other),
        };
        Ok(Self {
            auth_url: text(&auth["auth_url"]),
            username: text(&auth["username"]),
            password: text(&auth["password"]),
            project_name: text(&auth["project_name"]).or_else(|| text(&auth["tenant_name"])),
            project_id: text(&auth["project_id"]).or_else(|| text(&auth["tenant_id"])),
            user_domain_name: text(&auth["user_domain_name"]),
            project_domain_name: text(&auth["project_domain_name"]),
            system_scope,
            token: text(&auth["token"]),
            region_name: text(&entry["region_name"]),
            interface: text(&entry["interface"]),
            endpoint: text(&entry["baremetal_endpoint_override"]),
        })
    }

    /// The body of `POST /v3/auth/tokens` for these credentials.
    fn password_request(&self) -> Result<Value, CliError> {
        let (Some(username), Some(password)) = (&self.username, &self.password) else {
            return Err(CliError::Usage(
                "Keystone authentication needs OS_USERNAME and OS_PASSWORD (or a clouds.yaml \
                 cloud with both), or OS_TOKEN"
                    .to_owned(),
            ));
        };
        let user_domain = self.user_domain_name.as_deref().unwrap_or("Default");
        let mut auth = json!({
            "identity": {
                "methods": ["password"],
                "password": {"user": {
                    "name": username,
                    "domain": {"name": user_domain},
                    "password": password,
                }},
            }
        });
        let project_domain = self.project_domain_name.as_deref().unwrap_or(user_domain);
        if self.system_scope.as_deref() == Some("all") {
            auth["scope"] = json!({"system": {"all": true}});
        } else if let Some(id) = &self.project_id {
            auth["scope"] = json!({"project": {"id": id}});
        } else if let Some(name) = &self.project_name {
            auth["scope"] = json!({"project": {"name": name, "domain": {"name": project_domain}}});
        }
        Ok(json!({ "auth": auth }))
    }

    /// A token and the Bare Metal endpoint.
    pub fn login(&self) -> Result<Session, CliError> {
        let http = reqwest::blocking::Client::builder()
            .user_agent(concat!("ferric-cli/", env!("CARGO_PKG_VERSION")))
            .timeout(Duration::from_secs(30))
            .build()
            .map_err(|source| CliError::Http {
                url: self.auth_url.clone().unwrap_or_default(),
                reason: CliError::reason(&source),
            })?;
        let auth_url = self.auth_url.as_deref().map(keystone_v3);
        let failed = |url: &str, source: &reqwest::Error| CliError::Http {
            url: url.to_owned(),
            reason: format!("Keystone: {}", CliError::reason(source)),
        };
        let (token, catalog) = match (&self.token, &auth_url) {
            (Some(token), None) => (token.clone(), Value::Null),
            (Some(token), Some(auth_url)) => {
                let url = format!("{auth_url}/auth/catalog");
                let response = http
                    .get(&url)
                    .header("X-Auth-Token", token)
                    .send()
                    .map_err(|source| failed(&url, &source))?;
                let catalog = if response.status().is_success() {
                    let body: Value = response.json().map_err(|source| failed(&url, &source))?;
                    body["catalog"].clone()
                } else {
                    return Err(keystone_refused(&url, response));
                };
                (token.clone(), catalog)
            }
            (None, Some(auth_url)) => {
                let url = format!("{auth_url}/auth/tokens");
                let response = http
                    .post(&url)
                    .json(&self.password_request()?)
                    .send()
                    .map_err(|source| failed(&url, &source))?;
                if !response.status().is_success() {
                    return Err(keystone_refused(&url, response));
                }
                let token = response
                    .headers()
                    .get("X-Subject-Token")
                    .and_then(|value| value.to_str().ok())
                    .map(str::to_owned)
                    .ok_or_else(|| CliError::Http {
                        url: url.clone(),
                        reason: "Keystone issued no X-Subject-Token".to_owned(),
                    })?;
                let body: Value = response.json().map_err(|source| failed(&url, &source))?;
                (token, body["token"]["catalog"].clone())
            }
            (None, None) => {
                return Err(CliError::Usage(
                    "no Keystone auth URL (OS_AUTH_URL or the cloud's auth_url) and no token"
                        .to_owned(),
                ));
            }
        };
        let endpoint = self.endpoint.clone().or_else(|| {
            baremetal_endpoint(
                &catalog,
                self.interface.as_deref().unwrap_or("public"),
                self.region_name.as_deref(),
            )
        });
        Ok(Session {
            token,
            endpoint: endpoint.map(|url| api_root(&url)),
        })
    }
}

/// `http://keystone:5000` or `…/v3/` → `…/v3`.
fn keystone_v3(url: &str) -> String {
    let url = url.trim_end_matches('/');
    if url.ends_with("/v3") {
        url.to_owned()
    } else {
        format!("{url}/v3")
    }
}

/// The API's root: catalogs may name it with its `/v1`.
fn api_root(url: &str) -> String {
    let url = url.trim_end_matches('/');
    url.strip_suffix("/v1").unwrap_or(url).to_owned()
}

fn keystone_refused(url: &str, response: reqwest::blocking::Response) -> CliError {
    let status = response.status().as_u16();
    let body: Value = response.json().unwrap_or(Value::Null);
    let message = body["error"]["message"]
        .as_str()
        .unwrap_or("no explanation")
        .to_owned();
    CliError::Http {
        url: url.to_owned(),
        reason: format!(
            "Keystone refused the credentials (HTTP {status}: {message}); check OS_CLOUD or the \
             OS_* variables"
        ),
    }
}

/// The `baremetal` endpoint of `interface` (in `region`, if named) in a catalog.
fn baremetal_endpoint(catalog: &Value, interface: &str, region: Option<&str>) -> Option<String> {
    catalog
        .as_array()?
        .iter()
        .filter(|service| service["type"] == "baremetal")
        .flat_map(|service| service["endpoints"].as_array().into_iter().flatten())
        .find(|endpoint| {
            endpoint["interface"] == interface
                && region.is_none_or(|region| {
                    endpoint["region_id"] == region || endpoint["region"] == region
                })
        })
        .and_then(|endpoint| endpoint["url"].as_str())
        .map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    #[test]
    fn clouds_yaml_then_os_variables() {
        let dir = std::env::temp_dir().join(format!("ferric-cli-clouds-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = dir.join("clouds.yaml");
        std::fs::write(
            &file,
            "clouds:\n  lab:\n    region_name: R1\n    auth:\n      auth_url: http://k:5000\n      \
             username: alice\n      password: pw\n      project_name: p\n      \
             user_domain_name: Default\n      project_domain_name: Default\n  ops:\n    auth:\n      \
             auth_url: http://k:5000\n      username: bob\n      password: pw\n      \
             system_scope: all\n",
        )
        .unwrap();
        let variables = HashMap::from([
            ("OS_CLIENT_CONFIG_FILE", file.display().to_string()),
            ("OS_PASSWORD", "from-env".to_owned()),
        ]);
        let lookup = |name: &str| variables.get(name).cloned();
        let config = KeystoneConfig::from_env(Some("lab"), &lookup).unwrap();
        assert!(config.in_use());
        assert_eq!(config.username.as_deref(), Some("alice"));
        assert_eq!(config.password.as_deref(), Some("from-env"));
        assert_eq!(config.region_name.as_deref(), Some("R1"));
        let request = config.password_request().unwrap();
        assert_eq!(request["auth"]["scope"]["project"]["name"], "p");

        let ops = KeystoneConfig::from_env(Some("ops"), &lookup).unwrap();
        let request = ops.password_request().unwrap();
        assert_eq!(request["auth"]["scope"], json!({"system": {"all": true}}));

        let error = KeystoneConfig::from_env(Some("nowhere"), &lookup).unwrap_err();
        assert!(
            error.to_string().contains("no cloud named nowhere"),
            "{error}"
        );
        std::fs::remove_dir_all(&dir).unwrap();

        let none = KeystoneConfig::from_env(None, &|_| None).unwrap();
        assert!(!none.in_use());
    }

    #[test]
    fn the_catalog_gives_the_baremetal_endpoint() {
        let catalog = json!([
            {"type": "identity", "endpoints": [{"interface": "public", "url": "http://k"}]},
            {"type": "baremetal", "endpoints": [
                {"interface": "internal", "region_id": "R1", "url": "http://internal:6385"},
                {"interface": "public", "region_id": "R1", "url": "http://public:6385/v1/"},
            ]},
        ]);
        let public = baremetal_endpoint(&catalog, "public", Some("R1")).unwrap();
        assert_eq!(api_root(&public), "http://public:6385");
        assert_eq!(
            baremetal_endpoint(&catalog, "internal", None).as_deref(),
            Some("http://internal:6385")
        );
        assert_eq!(baremetal_endpoint(&catalog, "admin", None), None);
        assert_eq!(keystone_v3("http://k:5000/"), "http://k:5000/v3");
        assert_eq!(keystone_v3("http://k/identity/v3"), "http://k/identity/v3");
    }
}
