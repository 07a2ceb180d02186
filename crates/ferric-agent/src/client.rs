//! The agent's side of the Bare Metal API: lookup until the node is found, then heartbeats
//! (IPA §4.3).

use std::net::{IpAddr, UdpSocket};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rand::Rng;
use serde_json::{Value, json};

use crate::agent::{Agent, NodeInfo};

/// The newest microversions the agent needs: lookup with tokens (1.62), heartbeat with
/// `agent_verify_ca` (1.68). The server's maximum caps both.
const LOOKUP_VERSION: u32 = 62;
const HEARTBEAT_VERSION: u32 = 68;
/// Used when `GET /` does not say (IPA's fallback).
const FALLBACK_MAX_VERSION: u32 = 31;
const VERSION_HEADER: &str = "X-OpenStack-Ironic-API-Version";
/// A token shorter than this is refused, as IPA does.
const MIN_TOKEN_LENGTH: usize = 32;
/// Forced heartbeats (after a command) come at most this often.
const MIN_FORCED_INTERVAL: Duration = Duration::from_secs(5);
/// How long the agent waits at start for a route to the API (the ramdisk's DHCP client runs
/// beside it) before it goes on to the lookup's own backoff anyway, and how often it looks.
const ROUTE_WAIT_LIMIT: Duration = Duration::from_secs(30);
const ROUTE_POLL: Duration = Duration::from_millis(50);

/// Why the agent stopped talking to the API.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("no API URL: pass --api-url or boot with ipa-api-url=/ferric.api_url=")]
    NoApiUrl,
    #[error("lookup found no node within {0:?} (addresses {1})")]
    LookupTimedOut(Duration, String),
    #[error("cannot build the HTTP client")]
    Http(#[source] reqwest::Error),
    #[error("auto-TLS: {0}")]
    Tls(String),
    #[error("the API's CA file {0}: {1} (fix ipa-cafile= or --api-ca-file)")]
    ApiCaFile(String, String),
}

/// A lookup's outcome for one try.
#[derive(Debug)]
enum LookupOutcome {
    Found(NodeInfo),
    /// Not (yet) found or refused: try again after the backoff.
    Retry(String),
    /// 409: the node is busy; IPA waits longer.
    Conflict,
}

/// Runs the lookup, then heartbeats forever.
pub async fn run(
    agent: Arc<Agent>,
    listener: tokio::net::TcpListener,
    router: axum::Router,
) -> Result<(), ClientError> {
    let listen_port = listener
        .local_addr()
        .map(|address| address.port())
        .unwrap_or(9999);
    let api_url = agent
        .config
        .api_urls
        .first()
        .cloned()
        .ok_or(ClientError::NoApiUrl)?;
    let http = api_client(&agent.config)?;
    // /init starts the agent while udhcpc is still asking: a request sent before the lease
    // fails at once and costs the first backoff (1–2 s, 5 s for the inspection post).
    wait_for_route(&agent.config.api_urls, ROUTE_WAIT_LIMIT).await;
    if let Some(url) = agent.config.inspection_callback_url.clone() {
        inspect(&agent, &http, &url).await;
    }
    let macs = crate::inventory::mac_addresses(&agent.config);
    let info = lookup_until_found(&agent, &http, &macs).await?;
    let node_uuid = info.node["uuid"].as_str().unwrap_or_default().to_owned();
    accept_lookup(&agent, &info);
    let heartbeat_timeout = info.config["heartbeat_timeout"].as_f64().unwrap_or(300.0);
    // The TLS versions and suites the server asks the agent's API to accept.
    let tls_policy = crate::tls::TlsPolicy::from_lookup(&info.config).map_err(ClientError::Tls)?;
    agent.set_node_info(info);
    let advertise = advertise_host(&agent, &api_url);
    // Auto-TLS when the API takes the agent's certificate (1.68), as IPA decides it.
    let takes_certificate = server_max_version(&http, &api_url)
        .await
        .is_some_and(|version| version >= HEARTBEAT_VERSION);
    let certificate = if agent.config.auto_tls && takes_certificate {
        Some(
            crate::tls::AgentCertificate::generate(&advertise, &tls_policy)
                .map_err(ClientError::Tls)?,
        )
    } else {
        None
    };
    let scheme = if certificate.is_some() {
        "https"
    } else {
        "http"
    };
    agent.set_certificate(
        certificate
            .as_ref()
            .map(|certificate| certificate.pem.clone()),
    );
    let callback_url = format!("{scheme}://{}:{listen_port}", bracket_ipv6(&advertise));
    tracing::info!(node = %node_uuid, %callback_url, "lookup succeeded; serving the API and heartbeating");
    let serve = async {
        match certificate {
            Some(certificate) => crate::tls::serve(listener, certificate, router).await,
            None => crate::agent::serve_plain(&agent, listener, router).await,
        }
    };
    let beat = heartbeat_loop(&agent, &http, &node_uuid, &callback_url, heartbeat_timeout);
    tokio::select! {
        () = serve => {}
        () = beat => {}
        () = agent.stop.notified() => {}
    }
    Ok(())
}

/// The HTTP client for the Bare Metal API: the system's roots plus `api_ca_file`, or no
/// verification with `api_insecure`.
pub fn api_client(config: &crate::config::AgentConfig) -> Result<reqwest::Client, ClientError> {
    let mut builder = reqwest::Client::builder().timeout(Duration::from_secs(60));
    if let Some(path) = &config.api_ca_file {
        let shown = path.display().to_string();
        let pem = std::fs::read(path)
            .map_err(|error| ClientError::ApiCaFile(shown.clone(), error.to_string()))?;
        let certificates = reqwest::Certificate::from_pem_bundle(&pem)
            .map_err(|error| ClientError::ApiCaFile(shown.clone(), error.to_string()))?;
        if certificates.is_empty() {
            return Err(ClientError::ApiCaFile(
                shown,
                "no PEM certificate in it".to_owned(),
            ));
        }
        for certificate in certificates {
            builder = builder.add_root_certificate(certificate);
        }
    }
    if config.api_insecure {
        tracing::warn!("ipa-insecure: the Bare Metal API's certificate is not verified");
        builder = builder.danger_accept_invalid_certs(true);
    }
    builder.build().map_err(ClientError::Http)
}

/// Heartbeats forever: after each success at 30–60 % of the timeout, 5–10 s after a failure,
/// and early (at most every 5 s) when an asynchronous command finished.
async fn heartbeat_loop(
    agent: &Agent,
    http: &reqwest::Client,
    node_uuid: &str,
    callback_url: &str,
    heartbeat_timeout: f64,
) {
    let mut last_forced = Instant::now() - MIN_FORCED_INTERVAL;
    loop {
        let delay = match heartbeat(agent, http, node_uuid, callback_url).await {
            Ok(()) => heartbeat_timeout * rand::thread_rng().gen_range(0.3..0.6),
            Err(error) => {
                tracing::warn!("heartbeat failed: {error}");
                5.0 * rand::thread_rng().gen_range(1.0..2.0)
            }
        };
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs_f64(delay)) => {}
            _ = agent.heartbeat_now.notified() => {
                let since = last_forced.elapsed();
                if since < MIN_FORCED_INTERVAL {
                    tokio::time::sleep(MIN_FORCED_INTERVAL - since).await;
                }
                last_forced = Instant::now();
                tracing::debug!("forced heartbeat after a command");
            }
        }
    }
}

/// In-band inspection at start-up: posts the inventory to the inspection callback until it
/// is accepted (at most ten tries), then goes on to the lookup. Ferric's
/// `/v1/continue_inspection` answers with the node and a token (API 1.84), which the agent
/// keeps as if a lookup had given it.
async fn inspect(agent: &Agent, http: &reqwest::Client, url: &str) {
    let body = match crate::inventory::collect(&agent.config, false) {
        Ok(inventory) => serde_json::json!({
            "inventory": inventory,
            "boot_interface": agent.config.pxe_mac,
        }),
        Err(error) => serde_json::json!({
            "inventory": {"interfaces": []},
            "error": format!("the agent could not read the hardware inventory: {error:?}"),
        }),
    };
    for attempt in 1..=10u32 {
        let sent = http
            .post(url)
            .header("X-OpenStack-Ironic-API-Version", "1.84")
            .json(&body)
            .send()
            .await;
        match sent {
            Ok(response) if response.status().is_success() => {
                let answer: Value = response.json().await.unwrap_or(Value::Null);
                if answer["config"].is_object() {
                    let info = NodeInfo {
                        node: answer["node"].clone(),
                        config: answer["config"].clone(),
                    };
                    accept_lookup(agent, &info);
                }
                tracing::info!(%url, "inspection data accepted");
                return;
            }
            Ok(response) => {
                tracing::warn!(%url, status = %response.status(), attempt, "inspection data refused");
            }
            Err(error) => tracing::warn!(%url, attempt, "cannot post inspection data: {error}"),
        }
        tokio::time::sleep(Duration::from_secs(u64::from(attempt.min(6)) * 5)).await;
    }
    tracing::error!(%url, "inspection data was not accepted; going on to the lookup");
}

/// Takes the token from the lookup answer unless one was given in advance.
fn accept_lookup(agent: &Agent, info: &NodeInfo) {
    match info.config["agent_token"].as_str() {
        Some(token) if token.len() >= MIN_TOKEN_LENGTH && !token.starts_with('*') => {
            if agent.token().is_none() {
                agent.set_token(token.to_owned());
            }
        }
        Some(_) if agent.token().is_some() => {}
        Some(token) => tracing::error!(
            masked = token.starts_with('*'),
            "the lookup gave no usable agent token (already issued to another agent?); \
             every command will be refused with 401"
        ),
        None => tracing::error!("the lookup gave no agent token; every command will be refused"),
    }
}

/// The API's maximum version, `None` when the API did not answer. A server that answers
/// without a version document is taken as an old one (1.31).
async fn server_max_version(http: &reqwest::Client, api_url: &str) -> Option<u32> {
    let answer = async {
        let body: Value = http.get(format!("{api_url}/")).send().await?.json().await?;
        Ok::<_, reqwest::Error>(body)
    }
    .await;
    // An unreachable API must not pass for an old one: a lookup made at the old version
    // gets no agent token, and the agent could then never heartbeat (seen when the first
    // request raced the network coming up).
    let body = answer.ok()?;
    Some(
        body["default_version"]["version"]
            .as_str()
            .and_then(|version| version.strip_prefix("1."))
            .and_then(|minor| minor.parse().ok())
            .unwrap_or(FALLBACK_MAX_VERSION),
    )
}

async fn lookup_until_found(
    agent: &Agent,
    http: &reqwest::Client,
    macs: &[String],
) -> Result<NodeInfo, ClientError> {
    let started = Instant::now();
    let mut backoff = 1.0_f64;
    // Consecutive rounds that met a 409: IPA waits 5, then 10, then 30 s.
    let mut conflicts = 0usize;
    loop {
        let mut conflicted = false;
        for api_url in &agent.config.api_urls {
            match lookup_once(agent, http, api_url, macs).await {
                LookupOutcome::Found(info) => return Ok(info),
                LookupOutcome::Retry(reason) => {
                    tracing::info!(%api_url, "lookup: {reason}");
                }
                LookupOutcome::Conflict => conflicted = true,
            }
        }
        if !agent.config.lookup_timeout.is_zero() && started.elapsed() > agent.config.lookup_timeout
        {
            return Err(ClientError::LookupTimedOut(
                agent.config.lookup_timeout,
                macs.join(","),
            ));
        }
        // Otherwise random exponential backoff, up to 60 s.
        let delay = if conflicted {
            conflicts += 1;
            match conflicts {
                1 => 5.0,
                2 => 10.0,
                _ => 30.0,
            }
        } else {
            conflicts = 0;
            let delay = backoff * rand::thread_rng().gen_range(1.0..2.0);
            backoff = (backoff * 2.0).min(60.0);
            delay.min(60.0)
        };
        tokio::time::sleep(Duration::from_secs_f64(delay)).await;
    }
}

async fn lookup_once(
    agent: &Agent,
    http: &reqwest::Client,
    api_url: &str,
    macs: &[String],
) -> LookupOutcome {
    let Some(version) = server_max_version(http, api_url).await else {
        return LookupOutcome::Retry("API unreachable (no version document)".to_owned());
    };
    let version = version.min(LOOKUP_VERSION);
    let mut query = vec![("addresses", macs.join(","))];
    if let Some(uuid) = &agent.config.node_uuid {
        query.push(("node_uuid", uuid.clone()));
    }
    let response = http
        .get(format!("{api_url}/v1/lookup"))
        .header(VERSION_HEADER, format!("1.{version}"))
        .query(&query)
        .send()
        .await;
    let response = match response {
        Ok(response) => response,
        Err(error) => return LookupOutcome::Retry(format!("API unreachable: {error}")),
    };
    let status = response.status();
    if status == reqwest::StatusCode::CONFLICT {
        return LookupOutcome::Conflict;
    }
    if !status.is_success() {
        return LookupOutcome::Retry(format!("no node yet ({status})"));
    }
    match response.json::<Value>().await {
        Ok(body) if body["node"]["uuid"].is_string() => LookupOutcome::Found(NodeInfo {
            node: body["node"].clone(),
            config: body["config"].clone(),
        }),
        Ok(_) => LookupOutcome::Retry("the lookup answer has no node uuid".to_owned()),
        Err(error) => LookupOutcome::Retry(format!("unreadable lookup answer: {error}")),
    }
}

async fn heartbeat(
    agent: &Agent,
    http: &reqwest::Client,
    node_uuid: &str,
    callback_url: &str,
) -> Result<(), String> {
    let mut last_error = String::from("no API URL");
    for api_url in &agent.config.api_urls {
        let Some(version) = server_max_version(http, api_url).await else {
            last_error = format!("{api_url}: API unreachable (no version document)");
            continue;
        };
        let version = version.min(HEARTBEAT_VERSION);
        let mut body = json!({"callback_url": callback_url});
        if version >= 36 {
            body["agent_version"] = json!(crate::AGENT_VERSION);
        }
        if version >= 62 {
            body["agent_token"] = json!(agent.token());
        }
        if version >= 68
            && let Some(pem) = agent.certificate()
        {
            body["agent_verify_ca"] = json!(pem);
        }
        let response = http
            .post(format!("{api_url}/v1/heartbeat/{node_uuid}"))
            .header(VERSION_HEADER, format!("1.{version}"))
            .json(&body)
            .send()
            .await;
        match response {
            Ok(response) if response.status().is_success() => return Ok(()),
            Ok(response) => {
                let status = response.status();
                let text = response.text().await.unwrap_or_default();
                last_error = format!("{api_url}: {status} {text}");
            }
            Err(error) => last_error = format!("{api_url}: {error}"),
        }
    }
    Err(last_error)
}

/// The host for the callback URL: the flag, else the local address that routes to the API
/// (a connected UDP socket sends nothing but tells which source address the kernel picks).
fn advertise_host(agent: &Agent, api_url: &str) -> String {
    if let Some(host) = &agent.config.advertise_host {
        return host.clone();
    }
    let fallback = || "127.0.0.1".to_owned();
    let Ok(url) = reqwest::Url::parse(api_url) else {
        return fallback();
    };
    let Some(host) = url.host_str() else {
        return fallback();
    };
    let port = url.port_or_known_default().unwrap_or(6385);
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let bind: IpAddr = if host.contains(':') {
        IpAddr::from([0u16; 8])
    } else {
        IpAddr::from([0u8; 4])
    };
    UdpSocket::bind((bind, 0))
        .and_then(|socket| {
            socket.connect((host, port))?;
            socket.local_addr()
        })
        .map(|address| address.ip().to_string())
        .unwrap_or_else(|_| fallback())
}

/// The API's address and port when `api_url` names its host by IP address (a name would need
/// the resolver, which is no use before the network is up).
fn api_socket(api_url: &str) -> Option<std::net::SocketAddr> {
    let url = reqwest::Url::parse(api_url).ok()?;
    let port = url.port_or_known_default().unwrap_or(6385);
    let host = url.host_str()?;
    let ip: IpAddr = host
        .trim_start_matches('[')
        .trim_end_matches(']')
        .parse()
        .ok()?;
    Some((ip, port).into())
}

/// The local address the host would send from to reach `api`, `None` while it has no route
/// there (no address yet). A UDP `connect` sends nothing.
fn route_to(api: std::net::SocketAddr) -> Option<IpAddr> {
    let bind: IpAddr = if api.is_ipv6() {
        IpAddr::from([0u16; 8])
    } else {
        IpAddr::from([0u8; 4])
    };
    let socket = UdpSocket::bind((bind, 0)).ok()?;
    socket.connect(api).ok()?;
    socket.local_addr().ok().map(|address| address.ip())
}

/// Waits until one of `api_urls` is routable (polling every [`ROUTE_POLL`]) or `limit` has
/// passed, and logs how long it took. Returns whether a route was found; API URLs that name
/// their host by DNS name are not waited for.
async fn wait_for_route(api_urls: &[String], limit: Duration) -> bool {
    let apis: Vec<_> = api_urls.iter().filter_map(|url| api_socket(url)).collect();
    if apis.is_empty() {
        return false;
    }
    let started = Instant::now();
    loop {
        if let Some(local) = apis.iter().find_map(|api| route_to(*api)) {
            tracing::info!(
                %local,
                waited_ms = started.elapsed().as_millis(),
                "the API is routable"
            );
            return true;
        }
        if started.elapsed() >= limit {
            tracing::warn!(?limit, "no route to the API yet; trying the lookup anyway");
            return false;
        }
        tokio::time::sleep(ROUTE_POLL).await;
    }
}

fn bracket_ipv6(host: &str) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]")
    } else {
        host.to_owned()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_route_wait_finds_a_routable_api_and_skips_names() {
        // Loopback is always routable; a name is not resolved before the network is up.
        let limit = Duration::from_secs(60);
        assert!(wait_for_route(&["http://127.0.0.1:6385".to_owned()], limit).await);
        assert!(!wait_for_route(&["https://ironic.example:6385".to_owned()], limit).await);
        assert_eq!(
            route_to("127.0.0.1:6385".parse().unwrap()),
            Some(IpAddr::from([127, 0, 0, 1]))
        );
        assert_eq!(
            api_socket("https://10.0.0.1/v1"),
            Some("10.0.0.1:443".parse().unwrap())
        );
        assert_eq!(
            api_socket("http://[fd00::1]:6385"),
            Some("[fd00::1]:6385".parse().unwrap())
        );
        assert_eq!(api_socket("https://ironic.example:6385"), None);
    }

    #[test]
    fn ipv6_hosts_get_brackets_in_urls() {
        assert_eq!(bracket_ipv6("fd00::1"), "[fd00::1]");
        assert_eq!(bracket_ipv6("10.0.0.2"), "10.0.0.2");
    }

    #[test]
    fn loopback_api_advertises_loopback() {
        let agent = Agent::new(crate::AgentConfig::new(vec![]));
        assert_eq!(advertise_host(&agent, "http://127.0.0.1:6385"), "127.0.0.1");
    }

    #[test]
    fn an_unusable_api_ca_file_is_named() {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut config = crate::AgentConfig::new(vec![]);
        config.api_ca_file = Some(dir.path().join("missing.pem"));
        let error = api_client(&config).expect_err("a missing file is refused");
        assert!(error.to_string().contains("missing.pem"), "{error}");
        let empty = dir.path().join("empty.pem");
        std::fs::write(&empty, b"not a certificate").expect("write");
        config.api_ca_file = Some(empty);
        let error = api_client(&config).expect_err("a file without certificates is refused");
        assert!(error.to_string().contains("no PEM certificate"), "{error}");
        let good = dir.path().join("ca.pem");
        let certificate = rcgen::generate_simple_self_signed(vec!["api.example".to_owned()])
            .expect("certificate");
        std::fs::write(&good, certificate.cert.pem()).expect("write");
        config.api_ca_file = Some(good);
        assert!(api_client(&config).is_ok());
    }
}
