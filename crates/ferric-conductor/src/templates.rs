//! Deploy templates at deploy time (`reference/ironic.md` §2.7): the templates whose names are
//! among the node's `instance_info.traits` add their steps to the deployment. As Ironic does,
//! a step the caller passed in `deploy_steps` wins over a template's step of the same
//! `interface.step`, a template step overrides the driver's step of that name, and priority 0
//! disables it (`steps::automated_plan` applies the last two).

use ferric_drivers::{Interfaces, StepCall, StepKind};
use ferric_model::resources::{InterfaceKind, Node};
use serde_json::Value;

use crate::ConductorError;
use crate::steps::check_requested;
use crate::task::Task;

/// The node's instance traits: `instance_info.traits`, a list of trait names.
fn instance_traits(node: &Node) -> Vec<String> {
    node.instance_info
        .get("traits")
        .and_then(Value::as_array)
        .map(|traits| {
            traits
                .iter()
                .filter_map(Value::as_str)
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

/// `requested` (the caller's `deploy_steps`) plus the steps of every deploy template matching
/// the node's instance traits, validated against the node's driver. 400 (Invalid) names the
/// matching templates when one of their steps does not fit.
pub(crate) async fn deploy_steps_with_templates(
    task: &Task,
    interfaces: &Interfaces,
    requested: Vec<StepCall>,
) -> Result<Vec<StepCall>, ConductorError> {
    let traits = instance_traits(&task.node);
    let templates = task
        .inner
        .store
        .deploy_template_list_by_names(&traits)
        .await?;
    if templates.is_empty() {
        return Ok(requested);
    }
    let names: Vec<&str> = templates
        .iter()
        .map(|template| template.name.as_str())
        .collect();
    let invalid = |why: String| {
        ConductorError::Invalid(format!(
            "Validation of deploy steps from deploy templates matching this node's instance \
             traits failed. Matching deploy templates: {}. Errors: {why}",
            names.join(",")
        ))
    };
    let mut template_steps = Vec::new();
    for template in &templates {
        for step in &template.steps {
            let interface = InterfaceKind::from_name(&step.interface).ok_or_else(|| {
                invalid(format!(
                    "deploy template {} names the unknown interface '{}'",
                    template.name, step.interface
                ))
            })?;
            if interface == InterfaceKind::Deploy && step.step == "deploy" && step.priority > 0 {
                return Err(invalid(
                    "deploy step deploy on interface deploy is a core step and cannot be \
                     overridden by user steps. It may be disabled by setting the priority to 0"
                        .to_owned(),
                ));
            }
            template_steps.push(StepCall {
                interface,
                step: step.step.clone(),
                args: step.args.clone(),
                priority: step.priority,
            });
        }
    }
    check_requested(interfaces, &task.node, StepKind::Deploy, &template_steps).map_err(
        |error| {
            invalid(match error {
                ConductorError::Invalid(message) => message,
                other => other.to_string(),
            })
        },
    )?;
    let mut steps = requested;
    let extra: Vec<StepCall> = template_steps
        .into_iter()
        .filter(|step| {
            !steps
                .iter()
                .any(|given| given.interface == step.interface && given.step == step.step)
        })
        .collect();
    tracing::info!(
        node = %task.uuid(),
        templates = %names.join(","),
        steps = extra.len(),
        "deploy templates add steps to the deployment"
    );
    steps.extend(extra);
    Ok(steps)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn instance_traits_are_read_from_instance_info() {
        let mut node = Node::new(
            uuid::Uuid::new_v4(),
            "fake-hardware",
            ferric_model::ProvisionState::Available,
        );
        assert!(instance_traits(&node).is_empty());
        node.instance_info
            .insert("traits".into(), json!(["CUSTOM_A", 3, "CUSTOM_B"]));
        assert_eq!(instance_traits(&node), ["CUSTOM_A", "CUSTOM_B"]);
    }
}
