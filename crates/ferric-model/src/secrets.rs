//! Which values are secrets, and how they are shown: the one masking rule that the API (node
//! documents, the agent lookup) and the conductor (what it sends an agent) apply alike.

use serde_json::{Map, Value};

/// What a masked secret looks like.
pub const MASK: &str = "******";

/// The masking rule: a key names a secret when its lowercase form contains `password`,
/// `secret`, `token` or `key` (e.g. `redfish_password`, `auth_token`, `ssh_key`,
/// `encryption_key`). This is broader than Ironic's fixed list on purpose: showing a secret
/// is worse than hiding a harmless value.
pub fn is_secret_key(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    ["password", "secret", "token", "key"]
        .iter()
        .any(|word| key.contains(word))
}

/// Replaces the value of every secret key, at any depth (objects and the objects inside
/// arrays, such as a step's `args`), with [`MASK`].
pub fn mask_secrets(object: &Map<String, Value>) -> Value {
    Value::Object(
        object
            .iter()
            .map(|(key, value)| {
                let shown = if is_secret_key(key) {
                    Value::String(MASK.to_owned())
                } else {
                    mask_value(value)
                };
                (key.clone(), shown)
            })
            .collect(),
    )
}

fn mask_value(value: &Value) -> Value {
    match value {
        Value::Object(inner) => mask_secrets(inner),
        Value::Array(items) => Value::Array(items.iter().map(mask_value).collect()),
        other => other.clone(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn secrets_are_masked_at_any_depth_and_nothing_else() {
        let Value::Object(object) = json!({
            "image_source": "http://images/disk.img",
            "image_server_password": "p",
            "nested": {"auth_token": "t", "plain": 1},
            "steps": [{"step": "x", "args": {"ssh_key": "k", "size": 2}}, "text"],
        }) else {
            unreachable!()
        };
        assert_eq!(
            mask_secrets(&object),
            json!({
                "image_source": "http://images/disk.img",
                "image_server_password": MASK,
                "nested": {"auth_token": MASK, "plain": 1},
                "steps": [{"step": "x", "args": {"ssh_key": MASK, "size": 2}}, "text"],
            })
        );
    }
}
