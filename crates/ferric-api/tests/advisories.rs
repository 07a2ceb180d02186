//! Ironic's security advisories replayed against Ferric's API, each as the attack: the request
//! an attacker would send, through the real router (with `http_basic` and project-scoped users
//! where the advisory is about who may see what), and what Ferric answers instead. The table
//! in `docs/security.md` names the advisory behind each test; the agent's side is in
//! `crates/ferric-agent/tests/advisories.rs`.
#![allow(
    clippy::unwrap_used,
    reason = "in tests a failed unwrap is a failed test"
)]

mod common;

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use common::{Answer, LATEST, answer, faultstring};
use ferric_api::auth::BasicAuth;
use ferric_api::policy::Policy;
use ferric_api::{ApiConfig, AuthStrategy};
use ferric_conductor::ConductorConfig;
use ferric_db::testing::TestDb;
use ferric_drivers::{BootSettings, DriverSettings, Drivers};
use serde_json::{Value, json};
use tower::ServiceExt;

const PASSWORD: &str = "s3cret";
const MAC: &str = "52:54:00:0a:d5:01";

const USERS: &str = r#"
[admin]
roles = ["admin"]

[member-owner]
roles = ["member"]
project = "p-owner"

[member-other]
roles = ["member"]
project = "p-other"
"#;

/// An API with `http_basic`, the users above, and the default policy. `setup` sends as the
/// site itself (no authentication), to arrange what the attacker then meets.
struct Site {
    api: common::Api,
    config: ApiConfig,
    _dir: tempfile::TempDir,
}

impl Site {
    async fn new(api: common::Api) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let hash = bcrypt::hash(PASSWORD, 4).unwrap();
        let htpasswd = dir.path().join("htpasswd");
        let lines: String = ["admin", "member-owner", "member-other"]
            .iter()
            .map(|user| format!("{user}:{hash}\n"))
            .collect();
        std::fs::write(&htpasswd, lines).unwrap();
        let users = dir.path().join("users.toml");
        std::fs::write(&users, USERS).unwrap();
        let auth = BasicAuth::from_file(&htpasswd)
            .unwrap()
            .with_roles_file(&users)
            .unwrap();
        Self {
            api,
            config: ApiConfig {
                auth: AuthStrategy::HttpBasic(auth),
                policy: Arc::new(Policy::default()),
                ..ApiConfig::default()
            },
            _dir: dir,
        }
    }

    async fn setup(&self, method: Method, path: &str, body: Option<Value>) -> Answer {
        let answer = self.api.send_latest(method.clone(), path, body).await;
        assert!(
            answer.status.is_success(),
            "{method} {path}: {} {}",
            answer.status,
            answer.body
        );
        answer
    }

    /// A request as `user` (`None`: no credentials), with a raw body.
    async fn raw(&self, user: Option<&str>, method: Method, path: &str, body: String) -> Answer {
        let mut request = Request::builder()
            .method(method)
            .uri(path)
            .header("host", "ferric.test")
            .header("content-type", "application/json")
            .header("X-OpenStack-Ironic-API-Version", format!("1.{LATEST}"));
        if let Some(user) = user {
            let credentials = STANDARD.encode(format!("{user}:{PASSWORD}"));
            request = request.header("authorization", format!("Basic {credentials}"));
        }
        let router = ferric_api::router_with(self.api.state.clone(), self.config.clone());
        let request = request.body(Body::from(body)).unwrap();
        answer(router.oneshot(request).await.unwrap()).await
    }

    async fn send(
        &self,
        user: Option<&str>,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> Answer {
        let body = body.map_or(String::new(), |body| body.to_string());
        self.raw(user, method, path, body).await
    }

    /// A node owned by project `p-owner`, powered off (volume changes need that), with a
    /// port of `MAC`, a portgroup, shard `s-owner` and an instance.
    async fn owned_node(&self) -> String {
        let uuid = self.api.enroll(json!({"driver": "fake-hardware"})).await;
        self.api.provision(&uuid, "manage").await;
        self.api.settle().await;
        let patch = json!([
            {"op": "add", "path": "/owner", "value": "p-owner"},
            {"op": "add", "path": "/shard", "value": "s-owner"},
            {"op": "add", "path": "/instance_uuid", "value": "0dd5e11a-0000-4000-8000-000000000041"},
        ]);
        self.setup(Method::PATCH, &format!("/v1/nodes/{uuid}"), Some(patch))
            .await;
        self.setup(
            Method::PUT,
            &format!("/v1/nodes/{uuid}/states/power"),
            Some(json!({"target": "power off"})),
        )
        .await;
        self.api.settle().await;
        self.setup(
            Method::POST,
            "/v1/ports",
            Some(json!({"node_uuid": uuid, "address": MAC})),
        )
        .await;
        self.setup(
            Method::POST,
            "/v1/portgroups",
            Some(json!({"node_uuid": uuid, "name": "bond-owner"})),
        )
        .await;
        uuid
    }
}

/// The UUIDs in a listing's `key` array.
fn listed(answer: &Answer, key: &str) -> Vec<String> {
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.body);
    answer.body[key]
        .as_array()
        .unwrap_or_else(|| panic!("no {key} in {}", answer.body))
        .iter()
        .map(|item| item["uuid"].as_str().unwrap_or_default().to_owned())
        .collect()
}

/// CVE-2016-4985: a crafted POST to a driver's vendor passthru (`lookup`) answered anyone who
/// knew a MAC with the whole node, BMC password included, without authentication.
#[tokio::test(flavor = "current_thread")]
async fn cve_2016_4985_driver_vendor_passthru_answers_no_one_without_credentials() {
    let site = Site::new(common::Api::new().await).await;
    site.api
        .enroll(json!({"driver": "fake-hardware", "driver_info": {"ipmi_password": "bmc-pa55"}}))
        .await;
    let attack = json!({"addresses": [MAC], "node_uuid": null});
    for path in [
        "/v1/drivers/fake-hardware/vendor_passthru/lookup",
        "/v1/drivers/fake-hardware/vendor_passthru?method=lookup",
        "/v1/drivers/ipmi/vendor_passthru/lookup",
    ] {
        let answer = site
            .send(None, Method::POST, path, Some(attack.clone()))
            .await;
        assert_eq!(answer.status, StatusCode::UNAUTHORIZED, "{path}");
        assert!(!answer.body.to_string().contains("bmc-pa55"));
        // A tenant is no better placed: driver passthru is the admin's.
        let tenant = site
            .send(
                Some("member-owner"),
                Method::POST,
                path,
                Some(attack.clone()),
            )
            .await;
        assert_eq!(tenant.status, StatusCode::FORBIDDEN, "{path}");
        assert!(!tenant.body.to_string().contains("bmc-pa55"));
    }
}

/// OSSN-0099: a deeply nested JSON document crashed an API worker before any validation.
/// Ferric refuses it as a malformed body and keeps serving, on authenticated and public
/// (ramdisk) endpoints alike.
#[tokio::test(flavor = "current_thread")]
async fn ossn_0099_deeply_nested_json_is_refused_and_the_api_keeps_serving() {
    let site = Site::new(common::Api::new().await).await;
    let uuid = site.api.enroll(json!({"driver": "fake-hardware"})).await;
    let depth = 200_000;
    let bomb = format!("{}{}", "[".repeat(depth), "]".repeat(depth));
    let object_bomb = format!("{}1{}", r#"{"a":"#.repeat(depth), "}".repeat(depth));
    for (user, method, path) in [
        (Some("admin"), Method::PATCH, format!("/v1/nodes/{uuid}")),
        (Some("admin"), Method::POST, "/v1/nodes".to_owned()),
        (None, Method::POST, format!("/v1/heartbeat/{uuid}")),
        (None, Method::POST, "/v1/continue_inspection".to_owned()),
    ] {
        for body in [&bomb, &object_bomb] {
            let answer = site.raw(user, method.clone(), &path, body.clone()).await;
            assert!(
                answer.status.is_client_error(),
                "{method} {path}: {} {}",
                answer.status,
                answer.body
            );
        }
    }
    let still = site
        .send(Some("admin"), Method::GET, "/v1/nodes", None)
        .await;
    assert_eq!(listed(&still, "nodes"), vec![uuid]);
}

/// Ironic bugs 2150461 and its portgroup follow-up: a project-scoped user listed other
/// projects' ports and portgroups by naming their shard, and volume connectors and targets by
/// naming their node.
#[tokio::test(flavor = "current_thread")]
async fn bug_2150461_listings_by_shard_or_node_stay_within_the_callers_project() {
    let site = Site::new(common::Api::new().await).await;
    let uuid = site.owned_node().await;
    site.setup(
        Method::POST,
        "/v1/volume/connectors",
        Some(json!({"node_uuid": uuid, "type": "iqn", "connector_id": "iqn.owner"})),
    )
    .await;
    site.setup(
        Method::POST,
        "/v1/volume/targets",
        Some(
            json!({"node_uuid": uuid, "volume_type": "iscsi", "boot_index": 0,
            "volume_id": "vol-owner", "properties": {"auth_password": "chap-pa55"}}),
        ),
    )
    .await;
    let probes = [
        ("/v1/ports?shard=s-owner", "ports"),
        ("/v1/ports/detail?shard=s-owner", "ports"),
        ("/v1/portgroups?shard=s-owner", "portgroups"),
        ("/v1/portgroups/detail?shard=s-owner", "portgroups"),
        (&*format!("/v1/ports?node={uuid}"), "ports"),
        (&*format!("/v1/volume/connectors?node={uuid}"), "connectors"),
        (
            &*format!("/v1/volume/targets?node={uuid}&detail=true"),
            "targets",
        ),
        ("/v1/nodes?shard=s-owner", "nodes"),
    ]
    .map(|(path, key)| (path.to_owned(), key));
    for (path, key) in &probes {
        let owner = site
            .send(Some("member-owner"), Method::GET, path, None)
            .await;
        assert_eq!(
            listed(&owner, key).len(),
            1,
            "the owner sees its {key}: {path}"
        );
        let other = site
            .send(Some("member-other"), Method::GET, path, None)
            .await;
        // Either an empty list or the node is "not found": never the other project's items.
        if other.status == StatusCode::OK {
            assert_eq!(listed(&other, key), Vec::<String>::new(), "{path}");
        } else {
            assert_eq!(
                other.status,
                StatusCode::NOT_FOUND,
                "{path}: {}",
                other.body
            );
        }
        assert!(!other.body.to_string().contains(&uuid), "{path}");
    }
}

/// Ironic story 2008976: `GET /v1/nodes/detail?instance_uuid=` returned a node of another
/// project to anyone who knew its instance's UUID.
#[tokio::test(flavor = "current_thread")]
async fn story_2008976_an_instance_uuid_filter_finds_no_other_projects_node() {
    let site = Site::new(common::Api::new().await).await;
    let uuid = site.owned_node().await;
    let instance = "0dd5e11a-0000-4000-8000-000000000041";
    for path in [
        format!("/v1/nodes/detail?instance_uuid={instance}"),
        format!("/v1/nodes?instance_uuid={instance}"),
    ] {
        let owner = site
            .send(Some("member-owner"), Method::GET, &path, None)
            .await;
        assert_eq!(listed(&owner, "nodes"), vec![uuid.clone()], "{path}");
        let other = site
            .send(Some("member-other"), Method::GET, &path, None)
            .await;
        assert_eq!(listed(&other, "nodes"), Vec::<String>::new(), "{path}");
    }
    // Naming the instance as if it were a node answers as for any unknown node.
    let unknown = "0dd5e11a-0000-4000-8000-00000000dead";
    let [by_instance, by_nothing] = [instance, unknown].map(|ident| {
        let path = format!("/v1/nodes/{ident}");
        let site = &site;
        async move {
            site.send(Some("member-other"), Method::GET, &path, None)
                .await
        }
    });
    let (by_instance, by_nothing) = (by_instance.await, by_nothing.await);
    assert!(by_instance.status.is_client_error(), "{}", by_instance.body);
    assert_eq!(by_instance.status, by_nothing.status);
    assert!(!by_instance.body.to_string().contains(&uuid));
}

/// Ironic's `allocations-restricted-rbac-create`: a project's user could create allocations
/// and so claim nodes. Allocation create is the system's and the service's.
#[tokio::test(flavor = "current_thread")]
async fn project_members_cannot_claim_nodes_with_an_allocation() {
    let site = Site::new(common::Api::new().await).await;
    site.owned_node().await;
    let claim = json!({"resource_class": "baremetal", "owner": "p-other"});
    let answer = site
        .send(
            Some("member-other"),
            Method::POST,
            "/v1/allocations",
            Some(claim),
        )
        .await;
    assert_eq!(answer.status, StatusCode::FORBIDDEN, "{}", answer.body);
}

/// Ironic's `volume-target-redact-sensitive-properties`: a PATCH answer echoed a volume
/// target's CHAP password. Every answer masks it, the PATCH's included.
#[tokio::test(flavor = "current_thread")]
async fn volume_target_chap_secrets_are_masked_in_patch_answers() {
    let site = Site::new(common::Api::new().await).await;
    let uuid = site.owned_node().await;
    let created = site
        .setup(
            Method::POST,
            "/v1/volume/targets",
            Some(
                json!({"node_uuid": uuid, "volume_type": "iscsi", "boot_index": 0,
                "volume_id": "vol-0", "properties": {"target_iqn": "iqn.t"}}),
            ),
        )
        .await;
    let target = created.body["uuid"].as_str().unwrap().to_owned();
    let patch = json!([
        {"op": "add", "path": "/properties/auth_password", "value": "chap-pa55"},
        {"op": "add", "path": "/properties/auth_secret", "value": "chap-s3cret"},
    ]);
    let path = format!("/v1/volume/targets/{target}");
    let patched = site
        .send(Some("member-owner"), Method::PATCH, &path, Some(patch))
        .await;
    assert_eq!(patched.status, StatusCode::OK, "{}", patched.body);
    let shown = site.send(Some("admin"), Method::GET, &path, None).await;
    for answer in [&patched, &shown] {
        let text = answer.body.to_string();
        assert!(
            !text.contains("chap-pa55") && !text.contains("chap-s3cret"),
            "{text}"
        );
        assert_eq!(answer.body["properties"]["auth_password"], "******");
    }
}

/// OSSA-2025-001 (CVE-2025-44021) and CVE-2026-44919: an `image_source` of `file:///etc/…`
/// deployed a conductor's file onto a tenant's machine, and `file:///dev/zero` hung a
/// conductor thread checksumming it. Ferric never reads an image itself: a name that is not
/// an http(s) URL must be a file under the boot server's `images/`, and anything else is
/// refused when the node is validated and when it is deployed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ossa_2025_001_an_image_source_cannot_name_a_file_of_the_host() {
    let root = tempfile::tempdir().unwrap();
    let drivers = Drivers::default().with_settings(DriverSettings {
        boot: BootSettings {
            http_url: Some("http://10.9.0.1:8080".into()),
            http_root: root.path().to_owned(),
            api_url: Some("http://10.9.0.1:6385".into()),
            ..BootSettings::default()
        },
        ..DriverSettings::default()
    });
    let api =
        common::Api::with_drivers(TestDb::sqlite().await, ConductorConfig::default(), drivers)
            .await;
    let site = Site::new(api).await;
    for (index, source) in [
        "file:///etc/ferric/ferric.toml",
        "file:///dev/zero",
        "/../../etc/shadow",
        "images/../../../proc/self/environ",
        "ftp://images.test/os.raw",
    ]
    .into_iter()
    .enumerate()
    {
        let created = site
            .setup(
                Method::POST,
                "/v1/nodes",
                Some(json!({
                    "driver": "fake-hardware", "boot_interface": "ipxe",
                    "deploy_interface": "direct", "owner": "p-owner",
                    "instance_info": {"image_source": source,
                        "image_os_hash_algo": "sha256", "image_os_hash_value": "ab".repeat(32)},
                })),
            )
            .await;
        let uuid = created.body["uuid"].as_str().unwrap().to_owned();
        site.setup(
            Method::POST,
            "/v1/ports",
            Some(json!({"node_uuid": uuid, "address": format!("52:54:00:0a:d6:{index:02x}")})),
        )
        .await;
        let validate = site
            .send(
                Some("member-owner"),
                Method::GET,
                &format!("/v1/nodes/{uuid}/validate"),
                None,
            )
            .await;
        assert_eq!(validate.status, StatusCode::OK, "{}", validate.body);
        assert_eq!(
            validate.body["deploy"]["result"], false,
            "{source}: {}",
            validate.body
        );
        let reason = validate.body["deploy"]["reason"]
            .as_str()
            .unwrap_or_default();
        assert!(
            reason.contains("neither an http(s) URL"),
            "{source}: {reason}"
        );
        site.api.provision(&uuid, "manage").await;
        site.api.settle().await;
        site.api.provision(&uuid, "provide").await;
        site.api.settle().await;
        let deploy = site
            .send(
                Some("member-owner"),
                Method::PUT,
                &format!("/v1/nodes/{uuid}/states/provision"),
                Some(json!({"target": "active"})),
            )
            .await;
        site.api.settle().await;
        let node = site.api.node(&uuid).await;
        assert!(
            deploy.status == StatusCode::BAD_REQUEST || node["provision_state"] == "deploy failed",
            "{source}: {} {} / {}",
            deploy.status,
            deploy.body,
            node["provision_state"]
        );
        assert!(!root.path().join("ipxe").exists() || node["provision_state"] != "active");
    }
}

/// ironic-inspector story 2005678: values from the inspection data reached the node lookup
/// unfiltered (an SQL injection through `/v1/continue`). Ferric's lookup binds every value;
/// a tautology in place of a MAC or BMC address matches nothing, even with a node waiting.
#[tokio::test(flavor = "current_thread")]
async fn inspector_story_2005678_lookup_values_are_data_not_sql() {
    let site = Site::new(common::Api::new().await).await;
    let uuid = site
        .api
        .enroll(json!({"driver": "fake-hardware", "driver_info": {"fake_wait": "inspect"}}))
        .await;
    site.setup(
        Method::POST,
        "/v1/ports",
        Some(json!({"node_uuid": uuid, "address": MAC})),
    )
    .await;
    site.api.provision(&uuid, "manage").await;
    site.api.settle().await;
    site.api.provision(&uuid, "inspect").await;
    site.api.settle().await;
    assert_eq!(
        site.api.node(&uuid).await["provision_state"],
        "inspect wait"
    );
    for injected in ["' OR '1'='1", "x' OR 1=1 --", "%", "*", "\") OR (\"1\"=\"1"] {
        let data = json!({
            "inventory": {
                "interfaces": [{"name": "eth0", "mac_address": injected}],
                "bmc_address": injected,
            },
            "macs": [injected],
        });
        let answer = site
            .send(None, Method::POST, "/v1/continue_inspection", Some(data))
            .await;
        assert!(
            answer.status == StatusCode::NOT_FOUND || answer.status == StatusCode::BAD_REQUEST,
            "{injected}: {} {}",
            answer.status,
            answer.body
        );
        assert!(!answer.body.to_string().contains(&uuid));
    }
    assert_eq!(
        site.api.node(&uuid).await["provision_state"],
        "inspect wait"
    );
}

/// Ironic's `additional-agent-url-validation` and story 2006773: a heartbeat could hand the
/// conductor a callback URL of any scheme, or move it to another host mid-deployment.
#[tokio::test(flavor = "current_thread")]
async fn heartbeats_cannot_point_the_conductor_at_a_non_http_or_new_callback() {
    let site = Site::new(common::Api::new().await).await;
    let uuid = site
        .api
        .enroll(json!({"driver": "fake-hardware", "driver_info": {"fake_wait": "deploy"}}))
        .await;
    site.setup(
        Method::POST,
        "/v1/ports",
        Some(json!({"node_uuid": uuid, "address": MAC})),
    )
    .await;
    site.api.provision(&uuid, "active").await;
    site.api.settle().await;
    let found = site
        .send(
            None,
            Method::GET,
            &format!("/v1/lookup?addresses={MAC}"),
            None,
        )
        .await;
    assert_eq!(found.status, StatusCode::OK, "{}", found.body);
    let token = found.body["config"]["agent_token"]
        .as_str()
        .unwrap()
        .to_owned();
    let heartbeat = format!("/v1/heartbeat/{uuid}");
    let beat = |url: &str| json!({"callback_url": url, "agent_token": token, "agent_version": "t"});
    for url in [
        "file:///etc/passwd",
        "gopher://10.0.0.1:70/",
        "javascript:alert(1)",
        "http://",
        "10.0.0.1:9999",
    ] {
        let answer = site
            .send(None, Method::POST, &heartbeat, Some(beat(url)))
            .await;
        assert_eq!(
            answer.status,
            StatusCode::BAD_REQUEST,
            "{url}: {}",
            answer.body
        );
    }
    let first = site
        .send(
            None,
            Method::POST,
            &heartbeat,
            Some(beat("http://10.0.0.1:9999")),
        )
        .await;
    assert_eq!(first.status, StatusCode::ACCEPTED, "{}", first.body);
    let moved = site
        .send(
            None,
            Method::POST,
            &heartbeat,
            Some(beat("http://10.66.66.66:9999")),
        )
        .await;
    assert!(moved.status.is_client_error(), "{}", moved.body);
    assert!(!faultstring(&moved.body).is_empty());
    let node = site.api.node(&uuid).await;
    assert_eq!(
        node["driver_internal_info"]["agent_url"], "http://10.0.0.1:9999",
        "{node:#}"
    );
}

/// CVE-2026-46447: a `kernel_append_params` (driver_info or instance_info) carrying iPXE
/// script syntax took over the node's boot. A project member may set both on its node; the
/// boot script is never written with them, and the deploy is refused or fails.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cve_2026_46447_kernel_parameters_cannot_inject_ipxe_commands() {
    let root = tempfile::tempdir().unwrap();
    let drivers = Drivers::default().with_settings(DriverSettings {
        boot: BootSettings {
            http_url: Some("http://10.9.0.1:8080".into()),
            http_root: root.path().to_owned(),
            api_url: Some("http://10.9.0.1:6385".into()),
            ..BootSettings::default()
        },
        ..DriverSettings::default()
    });
    let api =
        common::Api::with_drivers(TestDb::sqlite().await, ConductorConfig::default(), drivers)
            .await;
    let site = Site::new(api).await;
    let injected = "quiet ; chain http://elsewhere.test/x";
    for (index, field) in ["driver_info", "instance_info"].into_iter().enumerate() {
        let created = site
            .setup(
                Method::POST,
                "/v1/nodes",
                Some(json!({
                    "driver": "fake-hardware", "boot_interface": "ipxe",
                    "deploy_interface": "direct", "owner": "p-owner", "automated_clean": false,
                    "instance_info": {"image_source": "http://images.test/os.raw",
                        "image_os_hash_algo": "sha256", "image_os_hash_value": "ab".repeat(32)},
                })),
            )
            .await;
        let uuid = created.body["uuid"].as_str().unwrap().to_owned();
        site.setup(
            Method::POST,
            "/v1/ports",
            Some(json!({"node_uuid": uuid, "address": format!("52:54:00:0a:d7:{index:02x}")})),
        )
        .await;
        site.api.provision(&uuid, "manage").await;
        site.api.settle().await;
        site.api.provision(&uuid, "provide").await;
        site.api.settle().await;
        let patch = json!([{"op": "add", "path": format!("/{field}/kernel_append_params"),
            "value": injected}]);
        let patched = site
            .send(
                Some("member-owner"),
                Method::PATCH,
                &format!("/v1/nodes/{uuid}"),
                Some(patch),
            )
            .await;
        if patched.status != StatusCode::OK {
            assert_eq!(patched.status, StatusCode::BAD_REQUEST, "{}", patched.body);
            continue;
        }
        site.send(
            Some("member-owner"),
            Method::PUT,
            &format!("/v1/nodes/{uuid}/states/provision"),
            Some(json!({"target": "active"})),
        )
        .await;
        site.api.settle().await;
        // Either the deploy is refused, or the agent boots from a script without them (Ferric
        // takes no agent kernel parameters from instance_info).
        let scripts = std::fs::read_dir(root.path().join("ipxe"))
            .map(|dir| dir.flatten().collect::<Vec<_>>())
            .unwrap_or_default();
        for script in scripts {
            let text = std::fs::read_to_string(script.path()).unwrap_or_default();
            assert!(!text.contains("elsewhere.test"), "{field}: {text}");
        }
    }
}
