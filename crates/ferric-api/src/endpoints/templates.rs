//! The declarations of deploy templates (1.55) and runbooks (1.92, their traits 1.112): step
//! lists a deploy or a manual clean runs; and of inspection rules (1.96), what inspection
//! runs. Below their version Ironic answers reads 404 and
//! writes 405 (`resource_gate`). See the parent module for how to add an endpoint.

use super::Guard::{List, Rule, RunbookUpdate};
use super::Verb::{Delete, Get, Patch, Post, Put};
use super::{Endpoint, On, op, since};
use crate::v1::{deploy_templates, inspection_rules, runbook_traits, runbooks};

/// Every deploy template and runbook endpoint.
pub(super) fn endpoints() -> Vec<Endpoint> {
    vec![
        op(
            Get,
            "/v1/deploy_templates",
            "deploy_template_list",
            deploy_templates::deploy_template_list,
        )
        .guard(Rule("baremetal:deploy_template:get", On::Nothing))
        .summary("List deploy templates")
        .since(since::DEPLOY_TEMPLATES)
        .resource_gate("deploy templates")
        .listing(&[], false)
        .ok(200, Some("DeployTemplateCollection"))
        .errors(&[400]),
        op(
            Post,
            "/v1/deploy_templates",
            "deploy_template_create",
            deploy_templates::deploy_template_create,
        )
        .guard(Rule("baremetal:deploy_template:create", On::Nothing))
        .summary("Create a deploy template")
        .since(since::DEPLOY_TEMPLATES)
        .resource_gate("deploy templates")
        .body("DeployTemplateCreate")
        .ok(201, Some("DeployTemplate"))
        .errors(&[400, 405, 409]),
        op(
            Get,
            "/v1/deploy_templates/detail",
            "deploy_template_list_detail",
            deploy_templates::deploy_template_list_detail,
        )
        .guard(Rule("baremetal:deploy_template:get", On::Nothing))
        .summary("List deploy templates with every field")
        .since(since::DEPLOY_TEMPLATES)
        .resource_gate("deploy templates")
        .listing(&[], true)
        .ok(200, Some("DeployTemplateCollection"))
        .errors(&[400]),
        op(
            Get,
            "/v1/deploy_templates/{template_ident}",
            "deploy_template_get",
            deploy_templates::deploy_template_get,
        )
        .guard(Rule("baremetal:deploy_template:get", On::Nothing))
        .summary("Show a deploy template")
        .since(since::DEPLOY_TEMPLATES)
        .resource_gate("deploy templates")
        .refs(&["template_ident", "fields"])
        .ok(200, Some("DeployTemplate"))
        .errors(&[400]),
        op(
            Patch,
            "/v1/deploy_templates/{template_ident}",
            "deploy_template_update",
            deploy_templates::deploy_template_update,
        )
        .guard(Rule("baremetal:deploy_template:update", On::Nothing))
        .summary("Update a deploy template (JSON patch)")
        .since(since::DEPLOY_TEMPLATES)
        .resource_gate("deploy templates")
        .refs(&["template_ident"])
        .body("JsonPatch")
        .ok(200, Some("DeployTemplate"))
        .errors(&[400, 405, 409]),
        op(
            Delete,
            "/v1/deploy_templates/{template_ident}",
            "deploy_template_delete",
            deploy_templates::deploy_template_delete,
        )
        .guard(Rule("baremetal:deploy_template:delete", On::Nothing))
        .summary("Delete a deploy template")
        .since(since::DEPLOY_TEMPLATES)
        .resource_gate("deploy templates")
        .refs(&["template_ident"])
        .ok(204, None)
        .errors(&[400, 405]),
        op(Get, "/v1/runbooks", "runbook_list", runbooks::runbook_list)
            .guard(List("runbook"))
            .summary("List runbooks")
            .since(since::RUNBOOKS)
            .resource_gate("runbooks")
            .listing(&[], false)
            .ok(200, Some("RunbookCollection"))
            .errors(&[400]),
        op(
            Post,
            "/v1/runbooks",
            "runbook_create",
            runbooks::runbook_create,
        )
        .guard(Rule("baremetal:runbook:create", On::Nothing))
        .summary("Create a runbook")
        .since(since::RUNBOOKS)
        .resource_gate("runbooks")
        .body("RunbookCreate")
        .ok(201, Some("Runbook"))
        .errors(&[400, 405, 409]),
        op(
            Get,
            "/v1/runbooks/detail",
            "runbook_list_detail",
            runbooks::runbook_list_detail,
        )
        .guard(List("runbook"))
        .summary("List runbooks with every field")
        .since(since::RUNBOOKS)
        .resource_gate("runbooks")
        .listing(&[], true)
        .ok(200, Some("RunbookCollection"))
        .errors(&[400]),
        op(
            Get,
            "/v1/runbooks/{runbook_ident}",
            "runbook_get",
            runbooks::runbook_get,
        )
        .guard(Rule("baremetal:runbook:get", On::Runbook))
        .summary("Show a runbook")
        .since(since::RUNBOOKS)
        .resource_gate("runbooks")
        .refs(&["runbook_ident", "fields"])
        .ok(200, Some("Runbook"))
        .errors(&[400]),
        op(
            Patch,
            "/v1/runbooks/{runbook_ident}",
            "runbook_update",
            runbooks::runbook_update,
        )
        .guard(RunbookUpdate)
        .summary("Update a runbook (JSON patch)")
        .since(since::RUNBOOKS)
        .resource_gate("runbooks")
        .refs(&["runbook_ident"])
        .body("JsonPatch")
        .ok(200, Some("Runbook"))
        .errors(&[400, 405, 409]),
        op(
            Delete,
            "/v1/runbooks/{runbook_ident}",
            "runbook_delete",
            runbooks::runbook_delete,
        )
        .guard(Rule("baremetal:runbook:delete", On::Runbook))
        .summary("Delete a runbook")
        .since(since::RUNBOOKS)
        .resource_gate("runbooks")
        .refs(&["runbook_ident"])
        .ok(204, None)
        .errors(&[400, 405]),
        op(
            Get,
            "/v1/runbooks/{runbook_ident}/traits",
            "runbook_trait_list",
            runbook_traits::runbook_trait_list,
        )
        .guard(Rule("baremetal:runbook:get", On::Runbook))
        .summary("The runbook's traits")
        .since(since::RUNBOOK_TRAITS)
        .refs(&["runbook_ident"])
        .ok(200, Some("Traits"))
        .errors(&[400]),
        op(
            Put,
            "/v1/runbooks/{runbook_ident}/traits",
            "runbook_trait_replace_all",
            runbook_traits::runbook_trait_replace_all,
        )
        .guard(Rule("baremetal:runbook:update", On::Runbook))
        .summary("Replace all of the runbook's traits")
        .since(since::RUNBOOK_TRAITS)
        .refs(&["runbook_ident"])
        .body("Traits")
        .ok(204, None)
        .errors(&[400, 409]),
        op(
            Delete,
            "/v1/runbooks/{runbook_ident}/traits",
            "runbook_trait_delete_all",
            runbook_traits::runbook_trait_delete_all,
        )
        .guard(Rule("baremetal:runbook:update", On::Runbook))
        .summary("Remove all of the runbook's traits")
        .since(since::RUNBOOK_TRAITS)
        .refs(&["runbook_ident"])
        .ok(204, None)
        .errors(&[400, 409]),
        op(
            Put,
            "/v1/runbooks/{runbook_ident}/traits/{trait_name}",
            "runbook_trait_add",
            runbook_traits::runbook_trait_add,
        )
        .guard(Rule("baremetal:runbook:update", On::Runbook))
        .summary("Add one trait to the runbook")
        .since(since::RUNBOOK_TRAITS)
        .refs(&["runbook_ident", "trait_name"])
        .ok(204, None)
        .errors(&[400, 409]),
        op(
            Delete,
            "/v1/runbooks/{runbook_ident}/traits/{trait_name}",
            "runbook_trait_delete",
            runbook_traits::runbook_trait_delete,
        )
        .guard(Rule("baremetal:runbook:update", On::Runbook))
        .summary("Remove one trait from the runbook")
        .since(since::RUNBOOK_TRAITS)
        .refs(&["runbook_ident", "trait_name"])
        .ok(204, None)
        .errors(&[400, 409]),
        op(
            Get,
            "/v1/inspection_rules",
            "inspection_rule_list",
            inspection_rules::inspection_rule_list,
        )
        .guard(Rule("baremetal:inspection_rule:get", On::Nothing))
        .summary("List inspection rules")
        .since(since::INSPECTION_RULES)
        .resource_gate("inspection rules")
        .listing(&[], false)
        .ok(200, Some("InspectionRuleCollection"))
        .errors(&[400]),
        op(
            Post,
            "/v1/inspection_rules",
            "inspection_rule_create",
            inspection_rules::inspection_rule_create,
        )
        .guard(Rule("baremetal:inspection_rule:create", On::Nothing))
        .summary("Create an inspection rule")
        .since(since::INSPECTION_RULES)
        .resource_gate("inspection rules")
        .body("InspectionRuleCreate")
        .ok(201, Some("InspectionRule"))
        .errors(&[400, 405, 409]),
        op(
            Get,
            "/v1/inspection_rules/detail",
            "inspection_rule_list_detail",
            inspection_rules::inspection_rule_list_detail,
        )
        .guard(Rule("baremetal:inspection_rule:get", On::Nothing))
        .summary("List inspection rules with every field")
        .since(since::INSPECTION_RULES)
        .resource_gate("inspection rules")
        .listing(&[], true)
        .ok(200, Some("InspectionRuleCollection"))
        .errors(&[400]),
        op(
            Get,
            "/v1/inspection_rules/{rule_uuid}",
            "inspection_rule_get",
            inspection_rules::inspection_rule_get,
        )
        .guard(Rule("baremetal:inspection_rule:get", On::Nothing))
        .summary("Show an inspection rule")
        .since(since::INSPECTION_RULES)
        .resource_gate("inspection rules")
        .refs(&["rule_uuid", "fields"])
        .ok(200, Some("InspectionRule"))
        .errors(&[400]),
        op(
            Patch,
            "/v1/inspection_rules/{rule_uuid}",
            "inspection_rule_update",
            inspection_rules::inspection_rule_update,
        )
        .guard(Rule("baremetal:inspection_rule:update", On::Nothing))
        .summary("Update an inspection rule (JSON patch)")
        .since(since::INSPECTION_RULES)
        .resource_gate("inspection rules")
        .refs(&["rule_uuid"])
        .body("JsonPatch")
        .ok(200, Some("InspectionRule"))
        .errors(&[400, 405, 409]),
        op(
            Delete,
            "/v1/inspection_rules/{rule_uuid}",
            "inspection_rule_delete",
            inspection_rules::inspection_rule_delete,
        )
        .guard(Rule("baremetal:inspection_rule:delete", On::Nothing))
        .summary("Delete an inspection rule")
        .since(since::INSPECTION_RULES)
        .resource_gate("inspection rules")
        .refs(&["rule_uuid"])
        .ok(204, None)
        .errors(&[400, 405]),
    ]
}
