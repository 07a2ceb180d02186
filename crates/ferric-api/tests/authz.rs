//! Authorization through the real router: `http_basic` users with roles and projects from a
//! users file, node `owner`/`lessee` scoping, and the policy file. The matrix test is the
//! table of role × operation × owner/lessee with the status each must get.
#![allow(
    clippy::unwrap_used,
    reason = "in tests a failed unwrap is a failed test"
)]

mod common;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use common::{Answer, LATEST, answer, faultstring};
use ferric_api::auth::BasicAuth;
use ferric_api::policy::Policy;
use ferric_api::{ApiConfig, AuthStrategy};
use serde_json::{Value, json};
use std::sync::Arc;
use tower::ServiceExt;

/// Every user's password (a cheap bcrypt cost keeps the test fast).
const PASSWORD: &str = "s3cret";

/// The users file: who holds which roles in which project. The test's nodes are owned by
/// `p-owner` and leased to `p-lessee`.
const USERS: &str = r#"
[admin]
roles = ["admin"]

[member-owner]
roles = ["member"]
project = "p-owner"

[member-lessee]
roles = ["member"]
project = "p-lessee"

[member-other]
roles = ["member"]
project = "p-other"

[reader-owner]
roles = ["reader"]
project = "p-owner"

[reader-other]
roles = ["reader"]
project = "p-other"

[service]
roles = ["service"]
"#;

struct Server {
    api: common::Api,
    config: ApiConfig,
    _dir: tempfile::TempDir,
}

impl Server {
    async fn new(policy: Option<&str>) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let htpasswd = dir.path().join("htpasswd");
        let hash = bcrypt::hash(PASSWORD, 4).unwrap();
        let mut lines = String::new();
        for user in [
            "admin",
            "member-owner",
            "member-lessee",
            "member-other",
            "reader-owner",
            "reader-other",
            "service",
            "nobody",
        ] {
            lines.push_str(&format!("{user}:{hash}\n"));
        }
        std::fs::write(&htpasswd, lines).unwrap();
        let users = dir.path().join("users.toml");
        std::fs::write(&users, USERS).unwrap();
        let auth = BasicAuth::from_file(&htpasswd)
            .unwrap()
            .with_roles_file(&users)
            .unwrap();
        let policy = match policy {
            Some(text) => {
                let file = dir.path().join("policy.toml");
                std::fs::write(&file, text).unwrap();
                Policy::from_file(&file).unwrap()
            }
            None => Policy::default(),
        };
        Self {
            api: common::Api::new().await,
            config: ApiConfig {
                auth: AuthStrategy::HttpBasic(auth),
                policy: Arc::new(policy),
                ..ApiConfig::default()
            },
            _dir: dir,
        }
    }

    /// A request as `user` (`None`: no credentials) at the newest version.
    async fn send(
        &self,
        user: Option<&str>,
        method: Method,
        path: &str,
        body: Option<Value>,
    ) -> Answer {
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
        let body = body.map_or(Body::empty(), |body| Body::from(body.to_string()));
        let router = ferric_api::router_with(self.api.state.clone(), self.config.clone());
        answer(router.oneshot(request.body(body).unwrap()).await.unwrap()).await
    }

    /// A fresh `available` fake-hardware node owned by `p-owner` and leased to `p-lessee`
    /// (set up through the unauthenticated router).
    async fn project_node(&self) -> String {
        let uuid = self.api.enroll(json!({"driver": "fake-hardware"})).await;
        let patch = json!([
            {"op": "add", "path": "/owner", "value": "p-owner"},
            {"op": "add", "path": "/lessee", "value": "p-lessee"},
        ]);
        let patched = self
            .api
            .send_latest(Method::PATCH, &format!("/v1/nodes/{uuid}"), Some(patch))
            .await;
        assert_eq!(patched.status, StatusCode::OK, "{}", patched.body);
        uuid
    }
}

/// The operations of the matrix, each on a fresh node so none disturbs another.
#[derive(Debug, Clone, Copy)]
enum Operation {
    List,
    Show,
    Patch,
    /// An instance verb (`active`), which lessees may use.
    Deploy,
    /// A verb only owners may use (`manage`).
    Manage,
    Power,
    Delete,
    PortCreate,
}

use Operation::{Delete, Deploy, List, Manage, Patch, PortCreate, Power, Show};

const OPERATIONS: [Operation; 8] = [List, Show, Patch, Deploy, Manage, Power, Delete, PortCreate];

impl Operation {
    async fn run(self, server: &Server, user: Option<&str>, node: &str, n_case: usize) -> Answer {
        let path = format!("/v1/nodes/{node}");
        match self {
            List => server.send(user, Method::GET, "/v1/nodes", None).await,
            Show => server.send(user, Method::GET, &path, None).await,
            Patch => {
                let patch = json!([{"op": "add", "path": "/extra/by", "value": "matrix"}]);
                server.send(user, Method::PATCH, &path, Some(patch)).await
            }
            Deploy | Manage => {
                let target = if matches!(self, Deploy) {
                    "active"
                } else {
                    "manage"
                };
                let body = json!({"target": target});
                let path = format!("{path}/states/provision");
                server.send(user, Method::PUT, &path, Some(body)).await
            }
            Power => {
                let body = json!({"target": "power on"});
                let path = format!("{path}/states/power");
                server.send(user, Method::PUT, &path, Some(body)).await
            }
            Delete => server.send(user, Method::DELETE, &path, None).await,
            PortCreate => {
                let body = json!({
                    "node_uuid": node,
                    "address": format!("52:54:00:00:{:02x}:{:02x}", n_case / 256, n_case % 256),
                });
                server
                    .send(user, Method::POST, "/v1/ports", Some(body))
                    .await
            }
        }
    }
}

#[tokio::test]
async fn role_operation_project_matrix() {
    const OK: u16 = 200;
    const CREATED: u16 = 201;
    const ACCEPTED: u16 = 202;
    const DELETED: u16 = 204;
    const UNAUTHORIZED: u16 = 401;
    const FORBIDDEN: u16 = 403;
    const HIDDEN: u16 = 404;
    // role → the status of List, Show, Patch, Deploy, Manage, Power, Delete, PortCreate.
    let matrix: [(&str, [u16; 8]); 8] = [
        (
            "admin",
            [OK, OK, OK, ACCEPTED, ACCEPTED, ACCEPTED, DELETED, CREATED],
        ),
        (
            "member-owner",
            [
                OK, OK, OK, ACCEPTED, ACCEPTED, ACCEPTED, FORBIDDEN, FORBIDDEN,
            ],
        ),
        (
            "member-lessee",
            [
                OK, OK, FORBIDDEN, ACCEPTED, FORBIDDEN, FORBIDDEN, FORBIDDEN, FORBIDDEN,
            ],
        ),
        (
            "member-other",
            [OK, HIDDEN, HIDDEN, HIDDEN, HIDDEN, HIDDEN, HIDDEN, HIDDEN],
        ),
        (
            "reader-owner",
            [
                OK, OK, FORBIDDEN, FORBIDDEN, FORBIDDEN, FORBIDDEN, FORBIDDEN, FORBIDDEN,
            ],
        ),
        (
            "reader-other",
            [OK, HIDDEN, HIDDEN, HIDDEN, HIDDEN, HIDDEN, HIDDEN, HIDDEN],
        ),
        (
            "service",
            [OK, OK, OK, ACCEPTED, ACCEPTED, ACCEPTED, FORBIDDEN, CREATED],
        ),
        ("none", [UNAUTHORIZED; 8]),
    ];
    let server = Server::new(None).await;
    // A node of no project: only system-wide users see it in listings.
    let unowned = server.api.enroll(json!({"driver": "fake-hardware"})).await;
    let mut n_case = 0;
    let mut failures = Vec::new();
    for (role, expected) in matrix {
        let user = (role != "none").then_some(role);
        for (operation, expected) in OPERATIONS.into_iter().zip(expected) {
            n_case += 1;
            let node = server.project_node().await;
            let got = operation.run(&server, user, &node, n_case).await;
            server.api.settle().await;
            if got.status.as_u16() != expected {
                failures.push(format!(
                    "{role} {operation:?}: expected {expected}, got {} {}",
                    got.status, got.body
                ));
                continue;
            }
            match got.status {
                StatusCode::FORBIDDEN => {
                    let message = faultstring(&got.body);
                    assert!(
                        message.contains(&format!("{role} ("))
                            && message.contains("is not allowed to baremetal:"),
                        "{role} {operation:?}: {message}"
                    );
                }
                StatusCode::NOT_FOUND => {
                    // Indistinguishable from a node that does not exist.
                    assert_eq!(
                        faultstring(&got.body),
                        format!("Node {node} could not be found."),
                        "{role} {operation:?}"
                    );
                }
                _ => {}
            }
            if matches!(operation, List) && got.status == StatusCode::OK {
                let listed: Vec<&str> = got.body["nodes"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|node| node["uuid"].as_str().unwrap())
                    .collect();
                let system_wide = matches!(role, "admin" | "service");
                assert_eq!(
                    listed.contains(&unowned.as_str()),
                    system_wide,
                    "{role}: {listed:?}"
                );
                let sees_project = !role.ends_with("-other");
                assert_eq!(
                    listed.contains(&node.as_str()),
                    sees_project,
                    "{role}: {listed:?}"
                );
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} cells failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[tokio::test]
async fn ports_follow_their_node_in_lists_and_shows() {
    let server = Server::new(None).await;
    let node = server.project_node().await;
    let created = server
        .send(
            Some("admin"),
            Method::POST,
            "/v1/ports",
            Some(json!({"node_uuid": node, "address": "52:54:00:aa:00:01"})),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let port = created.body["uuid"].as_str().unwrap().to_owned();
    let unowned = server.api.enroll(json!({"driver": "fake-hardware"})).await;
    let other_port = server
        .send(
            Some("admin"),
            Method::POST,
            "/v1/ports",
            Some(json!({"node_uuid": unowned, "address": "52:54:00:aa:00:02"})),
        )
        .await;
    assert_eq!(other_port.status, StatusCode::CREATED);

    let listed = |answer: &Answer| -> Vec<String> {
        answer.body["ports"]
            .as_array()
            .unwrap()
            .iter()
            .map(|port| port["uuid"].as_str().unwrap().to_owned())
            .collect()
    };
    let lessee = server
        .send(Some("member-lessee"), Method::GET, "/v1/ports/detail", None)
        .await;
    assert_eq!(listed(&lessee), vec![port.clone()]);
    let other = server
        .send(Some("reader-other"), Method::GET, "/v1/ports", None)
        .await;
    assert!(listed(&other).is_empty(), "{}", other.body);
    let all = server
        .send(Some("service"), Method::GET, "/v1/ports", None)
        .await;
    assert_eq!(listed(&all).len(), 2);

    let path = format!("/v1/ports/{port}");
    let shown = server
        .send(Some("reader-owner"), Method::GET, &path, None)
        .await;
    assert_eq!(shown.status, StatusCode::OK);
    let hidden = server
        .send(Some("member-other"), Method::GET, &path, None)
        .await;
    assert_eq!(hidden.status, StatusCode::NOT_FOUND);
    assert_eq!(
        faultstring(&hidden.body),
        format!("Port {port} could not be found.")
    );
    let refused = server
        .send(Some("member-owner"), Method::DELETE, &path, None)
        .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN);
    let node_ports = format!("/v1/nodes/{node}/ports");
    let hidden = server
        .send(Some("reader-other"), Method::GET, &node_ports, None)
        .await;
    assert_eq!(hidden.status, StatusCode::NOT_FOUND);
}

#[tokio::test]
async fn owners_cannot_give_nodes_away_and_unlisted_users_have_no_rights() {
    let server = Server::new(None).await;
    let node = server.project_node().await;
    let path = format!("/v1/nodes/{node}");
    let give_away = json!([{"op": "replace", "path": "/owner", "value": "p-other"}]);
    let refused = server
        .send(
            Some("member-owner"),
            Method::PATCH,
            &path,
            Some(give_away.clone()),
        )
        .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.body);
    assert!(faultstring(&refused.body).contains("baremetal:node:update:owner"));
    let lease = json!([{"op": "replace", "path": "/lessee", "value": "p-other"}]);
    let leased = server
        .send(Some("member-owner"), Method::PATCH, &path, Some(lease))
        .await;
    assert_eq!(leased.status, StatusCode::OK, "{}", leased.body);
    let admin = server
        .send(Some("admin"), Method::PATCH, &path, Some(give_away))
        .await;
    assert_eq!(admin.status, StatusCode::OK);

    // In the password file but not in the users file: authenticated, allowed nothing.
    let nobody = server
        .send(Some("nobody"), Method::GET, "/v1/nodes", None)
        .await;
    assert_eq!(nobody.status, StatusCode::FORBIDDEN);
    assert!(
        faultstring(&nobody.body).contains("nobody (no roles)"),
        "{}",
        nobody.body
    );
}

#[tokio::test]
async fn a_policy_file_overrides_the_defaults() {
    let server = Server::new(Some(
        "\"baremetal:node:delete\" = [\"admin\", \"owner_member\"]\n\
         \"baremetal:node:get\" = [\"system_reader\", \"owner_reader\"]\n",
    ))
    .await;
    let node = server.project_node().await;
    let path = format!("/v1/nodes/{node}");
    // Lessees no longer see the node at all.
    let hidden = server
        .send(Some("member-lessee"), Method::GET, &path, None)
        .await;
    assert_eq!(hidden.status, StatusCode::NOT_FOUND);
    let deleted = server
        .send(Some("member-owner"), Method::DELETE, &path, None)
        .await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT, "{}", deleted.body);
}

#[tokio::test]
async fn without_a_users_file_every_user_is_an_admin() {
    let dir = tempfile::tempdir().unwrap();
    let htpasswd = dir.path().join("htpasswd");
    std::fs::write(
        &htpasswd,
        format!("ops:{}\n", bcrypt::hash(PASSWORD, 4).unwrap()),
    )
    .unwrap();
    let server = Server {
        api: common::Api::new().await,
        config: ApiConfig {
            auth: AuthStrategy::HttpBasic(BasicAuth::from_file(&htpasswd).unwrap()),
            ..ApiConfig::default()
        },
        _dir: dir,
    };
    let node = server.project_node().await;
    let path = format!("/v1/nodes/{node}");
    let deleted = server.send(Some("ops"), Method::DELETE, &path, None).await;
    assert_eq!(deleted.status, StatusCode::NO_CONTENT, "{}", deleted.body);
}

#[test]
fn users_files_name_known_roles() {
    let dir = tempfile::tempdir().unwrap();
    let htpasswd = dir.path().join("htpasswd");
    std::fs::write(&htpasswd, "").unwrap();
    let users = dir.path().join("users.toml");
    std::fs::write(&users, "[bob]\nroles = [\"superuser\"]\n").unwrap();
    let error = BasicAuth::from_file(&htpasswd)
        .unwrap()
        .with_roles_file(&users)
        .unwrap_err();
    assert!(error.to_string().contains("\"superuser\""), "{error}");
    std::fs::write(&users, "[bob]\nrole = [\"admin\"]\n").unwrap();
    let error = BasicAuth::from_file(&htpasswd)
        .unwrap()
        .with_roles_file(&users)
        .unwrap_err();
    assert!(error.to_string().contains("not a TOML table"), "{error}");
}

#[tokio::test]
async fn deploy_templates_are_for_admins_and_runbooks_follow_their_owner() {
    // Project managers may create runbooks in Ironic; here the policy file grants it.
    let server = Server::new(Some(
        "\"baremetal:runbook:create\" = [\"system_member\", \"service\", \"authenticated\"]\n",
    ))
    .await;
    let template = json!({"name": "CUSTOM_T", "steps": [
        {"interface": "bios", "step": "factory_reset", "args": {}, "priority": 10}]});
    let refused = server
        .send(
            Some("member-owner"),
            Method::POST,
            "/v1/deploy_templates",
            Some(template.clone()),
        )
        .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.body);
    assert!(faultstring(&refused.body).contains("baremetal:deploy_template:create"));
    let created = server
        .send(
            Some("admin"),
            Method::POST,
            "/v1/deploy_templates",
            Some(template),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let project_read = server
        .send(
            Some("reader-owner"),
            Method::GET,
            "/v1/deploy_templates",
            None,
        )
        .await;
    assert_eq!(project_read.status, StatusCode::FORBIDDEN);

    let steps = json!([{"interface": "bios", "step": "factory_reset", "order": 1}]);
    for (name, owner, public) in [
        ("CUSTOM_OWNED", Some("p-owner"), false),
        ("CUSTOM_SHARED", None, true),
        ("CUSTOM_SYSTEM", None, false),
    ] {
        let body = json!({"name": name, "steps": steps, "owner": owner, "public": public});
        let created = server
            .send(Some("admin"), Method::POST, "/v1/runbooks", Some(body))
            .await;
        assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    }
    let names = |answer: &Answer| -> Vec<String> {
        let mut names: Vec<String> = answer.body["runbooks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|runbook| runbook["name"].as_str().unwrap().to_owned())
            .collect();
        names.sort();
        names
    };
    let all = server
        .send(Some("admin"), Method::GET, "/v1/runbooks", None)
        .await;
    assert_eq!(
        names(&all),
        ["CUSTOM_OWNED", "CUSTOM_SHARED", "CUSTOM_SYSTEM"]
    );
    let scoped = server
        .send(
            Some("reader-owner"),
            Method::GET,
            "/v1/runbooks/detail",
            None,
        )
        .await;
    assert_eq!(names(&scoped), ["CUSTOM_OWNED", "CUSTOM_SHARED"]);
    let other = server
        .send(
            Some("member-other"),
            Method::GET,
            "/v1/runbooks/CUSTOM_OWNED",
            None,
        )
        .await;
    assert_eq!(other.status, StatusCode::FORBIDDEN, "{}", other.body);
    let public = server
        .send(
            Some("member-other"),
            Method::GET,
            "/v1/runbooks/CUSTOM_SHARED",
            None,
        )
        .await;
    assert_eq!(public.status, StatusCode::OK, "{}", public.body);

    let extra = json!([{"op": "add", "path": "/extra/by", "value": "owner"}]);
    let owner_patch = server
        .send(
            Some("member-owner"),
            Method::PATCH,
            "/v1/runbooks/CUSTOM_OWNED",
            Some(extra),
        )
        .await;
    assert_eq!(owner_patch.status, StatusCode::OK, "{}", owner_patch.body);
    let go_public = json!([{"op": "replace", "path": "/public", "value": true}]);
    let refused = server
        .send(
            Some("member-owner"),
            Method::PATCH,
            "/v1/runbooks/CUSTOM_OWNED",
            Some(go_public),
        )
        .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.body);
    assert!(faultstring(&refused.body).contains("baremetal:runbook:update:public"));

    // A project-scoped creator's runbook belongs to its project and cannot be public.
    let own = server
        .send(
            Some("member-owner"),
            Method::POST,
            "/v1/runbooks",
            Some(json!({"name": "CUSTOM_MINE", "steps": steps})),
        )
        .await;
    assert_eq!(own.status, StatusCode::CREATED, "{}", own.body);
    assert_eq!(own.body["owner"], "p-owner");
    for (body, message) in [
        (
            json!({"name": "CUSTOM_X", "steps": steps, "owner": "p-other"}),
            "Cannot create a runbook as a project scoped admin with an owner other than your own project.",
        ),
        (
            json!({"name": "CUSTOM_X", "steps": steps, "public": true}),
            "Cannot create a public runbook as a project scoped admin.",
        ),
    ] {
        let answer = server
            .send(
                Some("member-owner"),
                Method::POST,
                "/v1/runbooks",
                Some(body),
            )
            .await;
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{}", answer.body);
        assert_eq!(faultstring(&answer.body), message);
    }

    // Using a runbook needs `baremetal:runbook:use` on it, besides the node's own rule.
    let node = server.project_node().await;
    let traits = server
        .api
        .send_latest(
            Method::PUT,
            &format!("/v1/nodes/{node}/traits"),
            Some(json!({"traits": ["CUSTOM_SYSTEM", "CUSTOM_OWNED"]})),
        )
        .await;
    assert_eq!(traits.status, StatusCode::NO_CONTENT, "{}", traits.body);
    server.api.provision(&node, "manage").await;
    server.api.settle().await;
    let path = format!("/v1/nodes/{node}/states/provision");
    let system = server
        .send(
            Some("member-owner"),
            Method::PUT,
            &path,
            Some(json!({"target": "clean", "runbook": "CUSTOM_SYSTEM"})),
        )
        .await;
    assert_eq!(system.status, StatusCode::FORBIDDEN, "{}", system.body);
    assert!(faultstring(&system.body).contains("baremetal:runbook:use"));
    let owned = server
        .send(
            Some("member-owner"),
            Method::PUT,
            &path,
            Some(json!({"target": "clean", "runbook": "CUSTOM_OWNED"})),
        )
        .await;
    assert_eq!(owned.status, StatusCode::ACCEPTED, "{}", owned.body);
    server.api.settle().await;
}

/// Issue 41, item 3: a node or port cannot be tied to a node of another project by naming
/// it, and the answer for such a node is the answer for one that does not exist.
#[tokio::test]
async fn other_projects_nodes_cannot_be_named_as_parent_or_port_target() {
    // A site that lets project members manage their nodes' ports (Ferric's default keeps
    // ports for admins, who act system-wide).
    let server = Server::new(Some(
        "\"baremetal:port:update\" = [\"admin\", \"owner_member\"]\n",
    ))
    .await;
    let mine = server.project_node().await;
    let theirs = server.api.enroll(json!({"driver": "fake-hardware"})).await;
    let given = server
        .api
        .send_latest(
            Method::PATCH,
            &format!("/v1/nodes/{theirs}"),
            Some(json!([{"op": "add", "path": "/owner", "value": "p-other"}])),
        )
        .await;
    assert_eq!(given.status, StatusCode::OK, "{}", given.body);
    let missing = uuid::Uuid::new_v4().to_string();

    // parent_node: another project's node answers as a node that does not exist.
    let parent = |uuid: &str| json!([{"op": "add", "path": "/parent_node", "value": uuid}]);
    let path = format!("/v1/nodes/{mine}");
    let hidden = server
        .send(
            Some("member-owner"),
            Method::PATCH,
            &path,
            Some(parent(&theirs)),
        )
        .await;
    let absent = server
        .send(
            Some("member-owner"),
            Method::PATCH,
            &path,
            Some(parent(&missing)),
        )
        .await;
    assert_eq!(hidden.status, StatusCode::BAD_REQUEST, "{}", hidden.body);
    assert_eq!(absent.status, hidden.status);
    assert_eq!(
        faultstring(&hidden.body).replace(&theirs, "X"),
        faultstring(&absent.body).replace(&missing, "X")
    );
    let shown = server.api.node(&mine).await;
    assert_eq!(shown["parent_node"], Value::Null);
    // A system admin may.
    let admin = server
        .send(Some("admin"), Method::PATCH, &path, Some(parent(&theirs)))
        .await;
    assert_eq!(admin.status, StatusCode::OK, "{}", admin.body);

    // A port moved to another project's node by a member of the owning project.
    let port = server
        .api
        .send_latest(
            Method::POST,
            "/v1/ports",
            Some(json!({"node_uuid": mine, "address": "52:54:00:41:00:03"})),
        )
        .await;
    assert_eq!(port.status, StatusCode::CREATED, "{}", port.body);
    let port_path = format!("/v1/ports/{}", port.body["uuid"].as_str().unwrap());
    let move_to = |uuid: &str| json!([{"op": "replace", "path": "/node_uuid", "value": uuid}]);
    let hidden = server
        .send(
            Some("member-owner"),
            Method::PATCH,
            &port_path,
            Some(move_to(&theirs)),
        )
        .await;
    let absent = server
        .send(
            Some("member-owner"),
            Method::PATCH,
            &port_path,
            Some(move_to(&missing)),
        )
        .await;
    assert_eq!(hidden.status, StatusCode::BAD_REQUEST, "{}", hidden.body);
    assert_eq!(absent.status, hidden.status, "{}", absent.body);
    assert_eq!(
        faultstring(&hidden.body).replace(&theirs, "X"),
        faultstring(&absent.body).replace(&missing, "X")
    );
    let shown = server.api.send_latest(Method::GET, &port_path, None).await;
    assert_eq!(shown.body["node_uuid"], mine.as_str());
    // Within its own project the member may move it.
    let other_mine = server.project_node().await;
    let moved = server
        .send(
            Some("member-owner"),
            Method::PATCH,
            &port_path,
            Some(move_to(&other_mine)),
        )
        .await;
    assert_eq!(moved.status, StatusCode::OK, "{}", moved.body);
}

/// Issue 41: per-step rules. A site lets project members run cleaning but not
/// `bios.apply_configuration`; steps without a rule stay allowed.
#[tokio::test]
async fn a_policy_file_can_forbid_single_steps() {
    let server = Server::new(Some(
        "\"baremetal:step:execute:bios.apply_configuration\" = [\"admin\"]\n",
    ))
    .await;
    let node = server.project_node().await;
    server.api.provision(&node, "manage").await;
    server
        .api
        .run_until_state(&node, "manageable", common::STATE_TIMEOUT)
        .await;
    let path = format!("/v1/nodes/{node}/states/provision");
    let clean = |interface: &str, step: &str| json!({"target": "clean", "clean_steps": [{"interface": interface, "step": step}]});
    let refused = server
        .send(
            Some("member-owner"),
            Method::PUT,
            &path,
            Some(clean("bios", "apply_configuration")),
        )
        .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.body);
    assert!(
        faultstring(&refused.body).contains("baremetal:step:execute:bios.apply_configuration"),
        "{}",
        refused.body
    );
    let allowed = server
        .send(
            Some("member-owner"),
            Method::PUT,
            &path,
            Some(clean("deploy", "erase_devices_metadata")),
        )
        .await;
    assert_eq!(allowed.status, StatusCode::ACCEPTED, "{}", allowed.body);
}

/// Indicators (1.63) follow Ironic's defaults: the node's readers may read them
/// (`baremetal:node:get_indicator_state`), only its members set them (`…set_indicator_state`),
/// and other projects do not see the node at all.
#[tokio::test]
async fn node_readers_read_indicators_and_node_members_set_them() {
    let server = Server::new(None).await;
    let node = server.project_node().await;
    let led = format!("/v1/nodes/{node}/management/indicators/led@system");
    let blink = json!({"state": "blinking"});
    for (user, read, set) in [
        ("reader-owner", 200, 403),
        ("member-lessee", 200, 403),
        ("reader-other", 404, 404),
        ("member-owner", 200, 204),
        ("service", 200, 204),
    ] {
        let got = server.send(Some(user), Method::GET, &led, None).await;
        assert_eq!(got.status.as_u16(), read, "{user} GET: {}", got.body);
        let listed = server
            .send(
                Some(user),
                Method::GET,
                &format!("/v1/nodes/{node}/management/indicators"),
                None,
            )
            .await;
        assert_eq!(listed.status.as_u16(), read, "{user} list: {}", listed.body);
        let got = server
            .send(Some(user), Method::PUT, &led, Some(blink.clone()))
            .await;
        assert_eq!(got.status.as_u16(), set, "{user} PUT: {}", got.body);
    }
    let shown = server.send(Some("admin"), Method::GET, &led, None).await;
    assert_eq!(shown.body, json!({"state": "blinking"}));
}
