//! Who may do what: the roles of `http_basic` users, the personas they make up against a node
//! (owner, lessee, system-wide), and the named rules (`baremetal:node:get`, …) every request
//! is checked against. Operators override rules with a policy file (`auth_policy_file`);
//! `docs/security.md` lists every rule and its default.
//!
//! Theory of operation: a rule is a list of personas, any of which grants it. A persona is a
//! predicate over the caller (roles and project) and, for the rules about one resource, the
//! resource's projects (a node's `owner` and `lessee`, an allocation's `owner`). The defaults
//! follow Ironic's secure-RBAC defaults: system-scoped users (no project) act on every node as
//! their role allows; project-scoped users see only nodes their project owns or leases, owners
//! administer those nodes, lessees use them. Roles imply the lesser ones (admin ⊃ member ⊃
//! reader), as Keystone's implied roles do. `admin` is system-wide whatever its project.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A role an `http_basic` user may hold (the users file names them in lower case).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Role {
    /// Everything, on every project's nodes.
    Admin,
    /// Day-to-day operation: updates, power and provisioning.
    Member,
    /// Read only.
    Reader,
    /// Other services (the inspection service, automation): system-wide member rights.
    Service,
    /// A project's manager (Keystone's `manager` role; Keystone's project admin counts as
    /// one): a member who also creates what its project owns, such as runbooks.
    Manager,
}

impl Role {
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "admin" => Some(Self::Admin),
            "member" => Some(Self::Member),
            "reader" => Some(Self::Reader),
            "service" => Some(Self::Service),
            "manager" => Some(Self::Manager),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Admin => "admin",
            Self::Member => "member",
            Self::Reader => "reader",
            Self::Service => "service",
            Self::Manager => "manager",
        }
    }
}

/// The authenticated caller of a request: a request extension set by the auth middleware.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub user: String,
    pub roles: BTreeSet<Role>,
    /// The project a project-scoped user belongs to; `None` is system scope.
    pub project: Option<String>,
}

impl Caller {
    fn has(&self, role: Role) -> bool {
        self.roles.contains(&role)
    }

    /// Member rights: member, manager or admin (implied roles).
    fn is_member(&self) -> bool {
        self.has(Role::Member) || self.has(Role::Manager) || self.has(Role::Admin)
    }

    /// Reader rights: reader, member or admin.
    fn is_reader(&self) -> bool {
        self.has(Role::Reader) || self.is_member()
    }

    fn in_project(&self, project: Option<&str>) -> bool {
        matches!((self.project.as_deref(), project), (Some(mine), Some(theirs)) if mine == theirs)
    }

    /// `alice (member, project p1)`, for messages and logs.
    pub fn describe(&self) -> String {
        let roles: Vec<&str> = self.roles.iter().map(|role| role.as_str()).collect();
        let roles = if roles.is_empty() {
            "no roles".to_owned()
        } else {
            roles.join(", ")
        };
        match &self.project {
            Some(project) => format!("{} ({roles}; project {project})", self.user),
            None => format!("{} ({roles})", self.user),
        }
    }
}

/// The projects of the resource a rule is checked on: a node's owner and lessee, an
/// allocation's owner. Empty for rules about no particular resource.
#[derive(Debug, Clone, Copy, Default)]
pub struct Target<'a> {
    pub owner: Option<&'a str>,
    pub lessee: Option<&'a str>,
}

/// Who a rule grants: each persona is a predicate over the caller and the target.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Persona {
    /// Holds `admin` (any project).
    Admin,
    /// Holds `service`.
    Service,
    /// `member` or `admin` without a project.
    SystemMember,
    /// `reader`, `member` or `admin` without a project.
    SystemReader,
    /// `member` of the target's owner project.
    OwnerMember,
    /// `reader` (or better) of the target's owner project.
    OwnerReader,
    /// `member` of the target's lessee project.
    LesseeMember,
    /// `reader` (or better) of the target's lessee project.
    LesseeReader,
    /// `manager` of a project (Keystone's project admin is one), for what it creates in its
    /// own project.
    ProjectManager,
    /// Any user with at least one role (listings are then filtered to the user's project).
    Authenticated,
    /// Nobody: the rule is switched off.
    Nobody,
}

impl Persona {
    pub const ALL: [Persona; 11] = [
        Self::Admin,
        Self::Service,
        Self::SystemMember,
        Self::SystemReader,
        Self::OwnerMember,
        Self::OwnerReader,
        Self::LesseeMember,
        Self::LesseeReader,
        Self::ProjectManager,
        Self::Authenticated,
        Self::Nobody,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Admin => "admin",
            Self::Service => "service",
            Self::SystemMember => "system_member",
            Self::SystemReader => "system_reader",
            Self::OwnerMember => "owner_member",
            Self::OwnerReader => "owner_reader",
            Self::LesseeMember => "lessee_member",
            Self::LesseeReader => "lessee_reader",
            Self::ProjectManager => "project_manager",
            Self::Authenticated => "authenticated",
            Self::Nobody => "nobody",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        Self::ALL
            .into_iter()
            .find(|persona| persona.as_str() == text)
    }

    fn matches(self, caller: &Caller, target: Target<'_>) -> bool {
        let system = caller.project.is_none();
        match self {
            Self::Admin => caller.has(Role::Admin),
            Self::Service => caller.has(Role::Service),
            Self::SystemMember => caller.has(Role::Admin) || (system && caller.is_member()),
            Self::SystemReader => caller.has(Role::Admin) || (system && caller.is_reader()),
            Self::OwnerMember => caller.is_member() && caller.in_project(target.owner),
            Self::OwnerReader => caller.is_reader() && caller.in_project(target.owner),
            Self::LesseeMember => caller.is_member() && caller.in_project(target.lessee),
            Self::LesseeReader => caller.is_reader() && caller.in_project(target.lessee),
            Self::ProjectManager => caller.project.is_some() && caller.has(Role::Manager),
            Self::Authenticated => !caller.roles.is_empty(),
            Self::Nobody => false,
        }
    }
}

use Persona::{
    Admin, Authenticated, LesseeMember, LesseeReader, OwnerMember, OwnerReader, ProjectManager,
    Service, SystemMember, SystemReader,
};

/// Readers of a node: system readers, services, and the owner's and lessee's readers.
const NODE_READERS: &[Persona] = &[SystemReader, Service, OwnerReader, LesseeReader];
/// Those who administer a node: system members, services, the owner's members.
const NODE_MEMBERS: &[Persona] = &[SystemMember, Service, OwnerMember];
/// Readers of what only the owner should see (inventory, history).
const OWNER_READERS: &[Persona] = &[SystemReader, Service, OwnerReader];
const SYSTEM_READERS: &[Persona] = &[SystemReader, Service];
const SYSTEM_MEMBERS: &[Persona] = &[SystemMember, Service];
const ADMINS_AND_SERVICES: &[Persona] = &[Admin, Service];

/// Every rule: its name, its default personas and what it guards (for the docs).
pub const RULES: &[(&str, &[Persona], &str)] = &[
    ("default", &[Admin], "any route the policy does not name"),
    (
        "baremetal:node:create",
        ADMINS_AND_SERVICES,
        "POST /v1/nodes",
    ),
    (
        "baremetal:node:get",
        NODE_READERS,
        "GET /v1/nodes/{node} and its read-only sub-resources (states, traits, VIFs, BIOS, allocation, ports and portgroups of the node); a caller failing it gets 404 for the node",
    ),
    (
        "baremetal:node:list",
        &[Authenticated],
        "GET /v1/nodes, /v1/nodes/detail, chassis node lists: only the nodes the caller's project owns or leases",
    ),
    (
        "baremetal:node:list_all",
        SYSTEM_READERS,
        "node listings across all projects",
    ),
    (
        "baremetal:node:update",
        NODE_MEMBERS,
        "PATCH /v1/nodes/{node}",
    ),
    (
        "baremetal:node:update:owner",
        SYSTEM_MEMBERS,
        "a PATCH that changes owner",
    ),
    ("baremetal:node:delete", &[Admin], "DELETE /v1/nodes/{node}"),
    (
        "baremetal:node:set_provision_state",
        NODE_MEMBERS,
        "PUT …/states/provision with any verb, DELETE …/provision",
    ),
    (
        "baremetal:node:set_provision_state:instance",
        &[SystemMember, Service, OwnerMember, LesseeMember],
        "PUT …/states/provision with an instance verb: active/deploy, deleted/undeploy, rebuild, rescue, unrescue (Ferric's rule)",
    ),
    (
        "baremetal:node:set_power_state",
        NODE_MEMBERS,
        "PUT …/states/power",
    ),
    (
        "baremetal:node:set_boot_device",
        NODE_MEMBERS,
        "PUT …/management/boot_device",
    ),
    (
        "baremetal:node:get_boot_device",
        NODE_MEMBERS,
        "GET …/management/boot_device(/supported)",
    ),
    (
        "baremetal:node:set_maintenance",
        NODE_MEMBERS,
        "PUT and DELETE …/maintenance",
    ),
    (
        "baremetal:node:set_raid_state",
        NODE_MEMBERS,
        "PUT …/states/raid",
    ),
    ("baremetal:node:validate", NODE_MEMBERS, "GET …/validate"),
    (
        "baremetal:node:set_boot_mode",
        NODE_MEMBERS,
        "PUT …/states/boot_mode",
    ),
    (
        "baremetal:node:set_secure_boot",
        NODE_MEMBERS,
        "PUT …/states/secure_boot",
    ),
    (
        "baremetal:node:inject_nmi",
        NODE_MEMBERS,
        "PUT …/management/inject_nmi",
    ),
    (
        "baremetal:node:get_indicator_state",
        NODE_READERS,
        "GET …/management/indicators[/{indicator}]",
    ),
    (
        "baremetal:node:set_indicator_state",
        NODE_MEMBERS,
        "PUT …/management/indicators/{indicator}",
    ),
    (
        "baremetal:node:get_console",
        NODE_MEMBERS,
        "GET …/states/console",
    ),
    (
        "baremetal:node:set_console_state",
        NODE_MEMBERS,
        "PUT …/states/console",
    ),
    (
        "baremetal:node:console:view",
        NODE_READERS,
        "GET …/console/stream: watch the console over a WebSocket (Ferric's rule)",
    ),
    (
        "baremetal:node:console:input",
        &[SystemMember, Service, OwnerMember, LesseeMember],
        "type on the console over the WebSocket; without it the socket is closed with 1008 at the first keystroke (Ferric's rule)",
    ),
    ("baremetal:node:vmedia:get", NODE_MEMBERS, "GET …/vmedia"),
    (
        "baremetal:node:vmedia:attach",
        NODE_MEMBERS,
        "POST …/vmedia",
    ),
    (
        "baremetal:node:vmedia:detach",
        NODE_MEMBERS,
        "DELETE …/vmedia",
    ),
    (
        "baremetal:node:vendor_passthru",
        &[Admin],
        "GET …/vendor_passthru/methods, any method on …/vendor_passthru (vendor methods)",
    ),
    (
        "baremetal:node:traits:set",
        NODE_MEMBERS,
        "PUT and DELETE …/traits",
    ),
    ("baremetal:node:vif:attach", NODE_MEMBERS, "POST …/vifs"),
    (
        "baremetal:node:vif:detach",
        NODE_MEMBERS,
        "DELETE …/vifs/{vif}",
    ),
    ("baremetal:node:history:get", OWNER_READERS, "GET …/history"),
    (
        "baremetal:node:inventory:get",
        OWNER_READERS,
        "GET …/inventory",
    ),
    (
        "baremetal:port:get",
        NODE_READERS,
        "GET /v1/ports/{port}: ports follow their node",
    ),
    (
        "baremetal:port:list",
        &[Authenticated],
        "GET /v1/ports(/detail): ports of the project's nodes",
    ),
    (
        "baremetal:port:list_all",
        SYSTEM_READERS,
        "port listings across all projects",
    ),
    (
        "baremetal:port:create",
        ADMINS_AND_SERVICES,
        "POST /v1/ports",
    ),
    (
        "baremetal:port:update",
        SYSTEM_MEMBERS,
        "PATCH /v1/ports/{port}",
    ),
    (
        "baremetal:port:delete",
        ADMINS_AND_SERVICES,
        "DELETE /v1/ports/{port}",
    ),
    (
        "baremetal:portgroup:get",
        NODE_READERS,
        "GET /v1/portgroups/{portgroup} and its ports",
    ),
    (
        "baremetal:portgroup:list",
        &[Authenticated],
        "GET /v1/portgroups(/detail): portgroups of the project's nodes",
    ),
    (
        "baremetal:portgroup:list_all",
        SYSTEM_READERS,
        "portgroup listings across all projects",
    ),
    (
        "baremetal:portgroup:create",
        ADMINS_AND_SERVICES,
        "POST /v1/portgroups",
    ),
    (
        "baremetal:portgroup:update",
        SYSTEM_MEMBERS,
        "PATCH /v1/portgroups/{portgroup}",
    ),
    (
        "baremetal:portgroup:delete",
        ADMINS_AND_SERVICES,
        "DELETE /v1/portgroups/{portgroup}",
    ),
    (
        "baremetal:allocation:get",
        &[SystemReader, Service, OwnerReader],
        "GET /v1/allocations/{allocation} (owner: the allocation's)",
    ),
    (
        "baremetal:allocation:list",
        &[Authenticated],
        "GET /v1/allocations: the project's allocations",
    ),
    (
        "baremetal:allocation:list_all",
        SYSTEM_READERS,
        "allocation listings across all projects",
    ),
    (
        "baremetal:allocation:create",
        SYSTEM_MEMBERS,
        "POST /v1/allocations",
    ),
    (
        "baremetal:allocation:update",
        &[SystemMember, Service, OwnerMember],
        "PATCH /v1/allocations/{allocation}",
    ),
    (
        "baremetal:allocation:delete",
        &[SystemMember, Service, OwnerMember],
        "DELETE /v1/allocations/{allocation}, DELETE …/allocation of a node",
    ),
    (
        "baremetal:deploy_template:get",
        SYSTEM_READERS,
        "GET /v1/deploy_templates(…)",
    ),
    (
        "baremetal:deploy_template:create",
        &[Admin],
        "POST /v1/deploy_templates",
    ),
    (
        "baremetal:deploy_template:update",
        &[Admin],
        "PATCH /v1/deploy_templates/{template}",
    ),
    (
        "baremetal:deploy_template:delete",
        &[Admin],
        "DELETE /v1/deploy_templates/{template}",
    ),
    (
        "baremetal:inspection_rule:get",
        SYSTEM_READERS,
        "GET /v1/inspection_rules(…)",
    ),
    (
        "baremetal:inspection_rule:create",
        &[Admin],
        "POST /v1/inspection_rules",
    ),
    (
        "baremetal:inspection_rule:update",
        &[Admin],
        "PATCH /v1/inspection_rules/{rule}",
    ),
    (
        "baremetal:inspection_rule:delete",
        &[Admin],
        "DELETE /v1/inspection_rules/{rule}",
    ),
    (
        "baremetal:runbook:get",
        &[SystemReader, Service, OwnerReader],
        "GET /v1/runbooks/{runbook} (owner: the runbook's); public runbooks are readable by every authenticated caller",
    ),
    (
        "baremetal:runbook:list",
        &[Authenticated],
        "GET /v1/runbooks(/detail): the project's runbooks and the public ones",
    ),
    (
        "baremetal:runbook:list_all",
        SYSTEM_READERS,
        "runbook listings across all projects",
    ),
    (
        "baremetal:runbook:create",
        &[SystemMember, Service, ProjectManager],
        "POST /v1/runbooks (a project-scoped caller's runbook is owned by its project)",
    ),
    (
        "baremetal:runbook:update",
        &[SystemMember, Service, OwnerMember],
        "PATCH /v1/runbooks/{runbook} of fields other than owner and public",
    ),
    (
        "baremetal:runbook:update:owner",
        &[SystemMember],
        "a runbook PATCH that changes owner",
    ),
    (
        "baremetal:runbook:update:public",
        &[SystemMember],
        "a runbook PATCH that changes public",
    ),
    (
        "baremetal:runbook:delete",
        &[SystemMember, Service, OwnerMember],
        "DELETE /v1/runbooks/{runbook}",
    ),
    (
        "baremetal:runbook:use",
        &[SystemMember, Service, OwnerMember],
        "PUT …/states/provision with a runbook (owner: the runbook's), besides the node's provision rule",
    ),
    (
        "baremetal:chassis:get",
        SYSTEM_READERS,
        "GET /v1/chassis(…)",
    ),
    ("baremetal:chassis:create", &[Admin], "POST /v1/chassis"),
    (
        "baremetal:chassis:update",
        SYSTEM_MEMBERS,
        "PATCH /v1/chassis/{chassis}",
    ),
    (
        "baremetal:chassis:delete",
        &[Admin],
        "DELETE /v1/chassis/{chassis}",
    ),
    (
        "baremetal:driver:get",
        &[Authenticated],
        "GET /v1/drivers(…)",
    ),
    (
        "baremetal:driver:vendor_passthru",
        &[Admin],
        "GET /v1/drivers/{driver}/vendor_passthru/methods, any method on …/vendor_passthru",
    ),
    (
        "baremetal:conductor:get",
        SYSTEM_READERS,
        "GET /v1/conductors(…)",
    ),
    ("baremetal:shards:get", SYSTEM_READERS, "GET /v1/shards"),
    (
        "baremetal:volume:get",
        NODE_READERS,
        "GET /v1/volume/{connectors,targets}/{uuid}, GET …/volume(…) of a node: they follow \
         their node",
    ),
    (
        "baremetal:volume:list",
        &[Authenticated],
        "GET /v1/volume(/connectors|/targets): those of the project's nodes",
    ),
    (
        "baremetal:volume:list_all",
        SYSTEM_READERS,
        "volume listings across all projects",
    ),
    (
        "baremetal:volume:create",
        NODE_MEMBERS,
        "POST /v1/volume/{connectors,targets}",
    ),
    (
        "baremetal:volume:update",
        NODE_MEMBERS,
        "PATCH /v1/volume/{connectors,targets}/{uuid}",
    ),
    (
        "baremetal:volume:delete",
        NODE_MEMBERS,
        "DELETE /v1/volume/{connectors,targets}/{uuid}",
    ),
    (
        "baremetal:events:post",
        ADMINS_AND_SERVICES,
        "POST /v1/events",
    ),
];

/// A policy file that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum PolicyError {
    #[error("cannot read the policy file {path}")]
    Unreadable {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "the policy file {path} is not a TOML table of rule = [personas]: {message}; see \
         docs/security.md"
    )]
    Syntax { path: PathBuf, message: String },
    #[error("the policy file {path} names an unknown rule \"{rule}\"; docs/security.md lists them")]
    UnknownRule { path: PathBuf, rule: String },
    #[error(
        "the policy file {path} gives rule \"{rule}\" an unknown persona \"{persona}\"; use \
         one of {known}"
    )]
    UnknownPersona {
        path: PathBuf,
        rule: String,
        persona: String,
        known: String,
    },
}

/// The rules in force: the defaults with the policy file's overrides.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Policy {
    rules: BTreeMap<&'static str, Vec<Persona>>,
    /// `baremetal:step:execute:<interface>.<step>` rules a policy file sets (none by default:
    /// whoever may start a clean, deploy or service may name any step in it).
    step_rules: BTreeMap<String, Vec<Persona>>,
}

/// The prefix of the per-step rules (`baremetal:step:execute:deploy.erase_devices_metadata`).
pub const STEP_RULE_PREFIX: &str = "baremetal:step:execute:";

impl Default for Policy {
    fn default() -> Self {
        Self {
            rules: RULES
                .iter()
                .map(|(name, personas, _)| (*name, personas.to_vec()))
                .collect(),
            step_rules: BTreeMap::new(),
        }
    }
}

/// The personas a policy file gives `rule`, each a known name.
fn parse_personas(
    path: &Path,
    rule: &str,
    personas: Vec<String>,
) -> Result<Vec<Persona>, PolicyError> {
    personas
        .into_iter()
        .map(|persona| {
            Persona::parse(&persona).ok_or_else(|| {
                let known: Vec<&str> = Persona::ALL.iter().map(|p| p.as_str()).collect();
                PolicyError::UnknownPersona {
                    path: path.to_owned(),
                    rule: rule.to_owned(),
                    persona,
                    known: known.join(", "),
                }
            })
        })
        .collect()
}

/// Whether `name` is a per-step rule: the prefix, then `<interface>.<step>` of plain words.
fn is_step_rule(name: &str) -> bool {
    name.strip_prefix(STEP_RULE_PREFIX)
        .and_then(|rest| rest.split_once('.'))
        .is_some_and(|(interface, step)| {
            [interface, step].iter().all(|word| {
                !word.is_empty()
                    && word
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
            })
        })
}

impl Policy {
    /// The defaults overridden by the TOML file at `path` (`"rule" = ["persona", …]`).
    pub fn from_file(path: &Path) -> Result<Self, PolicyError> {
        let text = std::fs::read_to_string(path).map_err(|source| PolicyError::Unreadable {
            path: path.to_owned(),
            source,
        })?;
        Self::from_toml(path, &text)
    }

    fn from_toml(path: &Path, text: &str) -> Result<Self, PolicyError> {
        let overrides: BTreeMap<String, Vec<String>> =
            toml::from_str(text).map_err(|error| PolicyError::Syntax {
                path: path.to_owned(),
                message: error.message().to_owned(),
            })?;
        let mut policy = Self::default();
        for (rule, personas) in overrides {
            if is_step_rule(&rule) {
                let parsed = parse_personas(path, &rule, personas)?;
                policy.step_rules.insert(rule, parsed);
                continue;
            }
            let Some((name, _, _)) = RULES.iter().find(|(name, _, _)| *name == rule) else {
                return Err(PolicyError::UnknownRule {
                    path: path.to_owned(),
                    rule,
                });
            };
            let parsed = parse_personas(path, &rule, personas)?;
            policy.rules.insert(name, parsed);
        }
        Ok(policy)
    }

    /// Whether `caller` may run `interface.step` on `target` in a clean, deploy or service it
    /// may start: yes unless a policy file sets that step's rule.
    pub fn allows_step(
        &self,
        interface: &str,
        step: &str,
        caller: &Caller,
        target: Target<'_>,
    ) -> bool {
        let rule = format!("{STEP_RULE_PREFIX}{interface}.{step}");
        self.step_rules.get(&rule).is_none_or(|personas| {
            personas
                .iter()
                .any(|persona| persona.matches(caller, target))
        })
    }

    /// Whether `caller` may do what `rule` guards on `target`. An unknown rule name is a
    /// programming error; it falls back to `default` rather than granting anything.
    pub fn allows(&self, rule: &str, caller: &Caller, target: Target<'_>) -> bool {
        let personas = self
            .rules
            .get(rule)
            .or_else(|| self.rules.get("default"))
            .map_or(&[][..], Vec::as_slice);
        personas
            .iter()
            .any(|persona| persona.matches(caller, target))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn caller(roles: &[Role], project: Option<&str>) -> Caller {
        Caller {
            user: "u".into(),
            roles: roles.iter().copied().collect(),
            project: project.map(str::to_owned),
        }
    }

    #[test]
    fn roles_imply_lesser_ones_and_projects_scope_them() {
        let policy = Policy::default();
        let node = Target {
            owner: Some("p1"),
            lessee: Some("p2"),
        };
        let owner_reader = caller(&[Role::Reader], Some("p1"));
        assert!(policy.allows("baremetal:node:get", &owner_reader, node));
        assert!(!policy.allows("baremetal:node:update", &owner_reader, node));
        let owner_member = caller(&[Role::Member], Some("p1"));
        assert!(policy.allows("baremetal:node:get", &owner_member, node));
        assert!(policy.allows("baremetal:node:update", &owner_member, node));
        let lessee_member = caller(&[Role::Member], Some("p2"));
        assert!(!policy.allows("baremetal:node:update", &lessee_member, node));
        assert!(policy.allows(
            "baremetal:node:set_provision_state:instance",
            &lessee_member,
            node
        ));
        let other = caller(&[Role::Member], Some("p3"));
        assert!(!policy.allows("baremetal:node:get", &other, node));
        let admin = caller(&[Role::Admin], Some("p3"));
        assert!(policy.allows("baremetal:node:delete", &admin, node));
        let nobody = caller(&[], None);
        assert!(!policy.allows("baremetal:node:list", &nobody, Target::default()));
        assert!(!policy.allows("no:such:rule", &owner_member, node));
    }

    #[test]
    fn a_policy_file_overrides_rules_and_refuses_typos() {
        let path = Path::new("policy.toml");
        let policy = Policy::from_toml(
            path,
            "\"baremetal:node:delete\" = [\"admin\", \"owner_member\"]\n",
        )
        .unwrap();
        let owner_member = caller(&[Role::Member], Some("p1"));
        let node = Target {
            owner: Some("p1"),
            lessee: None,
        };
        assert!(policy.allows("baremetal:node:delete", &owner_member, node));
        assert!(!Policy::default().allows("baremetal:node:delete", &owner_member, node));

        let error = Policy::from_toml(path, "\"baremetal:node:delet\" = []").unwrap_err();
        assert!(error.to_string().contains("unknown rule"), "{error}");
        let error = Policy::from_toml(path, "\"baremetal:node:delete\" = [\"owner\"]").unwrap_err();
        assert!(error.to_string().contains("owner_member"), "{error}");
        let error = Policy::from_toml(path, "rules = 3").unwrap_err();
        assert!(error.to_string().contains("not a TOML table"), "{error}");
    }

    #[test]
    fn policy_rules_are_documented() {
        // docs/security.md's table is the operator's reference: every rule, with its defaults.
        let doc = include_str!("../../../docs/security.md");
        for (name, personas, _) in RULES {
            let defaults: Vec<&str> = personas.iter().map(|persona| persona.as_str()).collect();
            let row = format!("| `{name}` | {} |", defaults.join(", "));
            assert!(doc.contains(&row), "docs/security.md lacks the row {row}");
        }
        for persona in Persona::ALL {
            let row = format!("| `{}` |", persona.as_str());
            assert!(
                doc.contains(&row),
                "docs/security.md lacks the persona {row}"
            );
        }
    }
}
