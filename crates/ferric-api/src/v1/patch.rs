//! The RFC 6902 subset the Bare Metal API accepts: `add`, `replace` and `remove`, with a path
//! whose first segment names a top-level field.
//!
//! Written here instead of using the `json-patch` crate because every operation must first be
//! checked against the resource's field table (read-only → 400, too new → 406) and the other
//! ops (`move`, `copy`, `test`) must be refused; what is left — walking an RFC 6901 pointer
//! inside one field's value — is a few dozen lines.

use serde_json::Value;

use crate::ApiError;

/// One operation, parsed.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct PatchOp {
    pub(crate) op: OpKind,
    /// The top-level field the path starts at.
    pub(crate) field: String,
    /// The rest of the path, unescaped (`~1` → `/`, `~0` → `~`); empty for the whole field.
    pub(crate) rest: Vec<String>,
    pub(crate) value: Option<Value>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OpKind {
    Add,
    Replace,
    Remove,
}

/// Parses a PATCH body: a JSON array of operations.
pub(crate) fn parse_patch(body: &[u8]) -> Result<Vec<PatchOp>, ApiError> {
    let value: Value = serde_json::from_slice(body).map_err(|error| {
        ApiError::bad_request(format!("The PATCH body is not valid JSON: {error}"))
    })?;
    let Value::Array(ops) = value else {
        return Err(ApiError::bad_request(
            "The PATCH body must be a JSON array of operations (RFC 6902).",
        ));
    };
    ops.into_iter().map(parse_op).collect()
}

fn parse_op(op: Value) -> Result<PatchOp, ApiError> {
    let Value::Object(mut op) = op else {
        return Err(ApiError::bad_request(
            "Each PATCH operation must be an object with 'op' and 'path'.",
        ));
    };
    let kind = match op.get("op").and_then(Value::as_str) {
        Some("add") => OpKind::Add,
        Some("replace") => OpKind::Replace,
        Some("remove") => OpKind::Remove,
        other => {
            return Err(ApiError::bad_request(format!(
                "Unsupported PATCH op {}: use 'add', 'replace' or 'remove'.",
                other.unwrap_or("(missing)")
            )));
        }
    };
    let path = op
        .get("path")
        .and_then(Value::as_str)
        .map(str::to_owned)
        .ok_or_else(|| ApiError::bad_request("A PATCH operation is missing its 'path'."))?;
    let Some(pointer) = path.strip_prefix('/') else {
        return Err(ApiError::bad_request(format!(
            "Invalid PATCH path '{path}': it must start with '/'."
        )));
    };
    let mut segments = pointer
        .split('/')
        .map(|segment| segment.replace("~1", "/").replace("~0", "~"));
    let field = segments.next().unwrap_or_default();
    if field.is_empty() {
        return Err(ApiError::bad_request(format!(
            "Invalid PATCH path '{path}': name a field, e.g. '/extra'."
        )));
    }
    let value = op.remove("value");
    if kind != OpKind::Remove && value.is_none() {
        return Err(ApiError::bad_request(format!(
            "The '{}' operation on '{path}' needs a 'value'.",
            if kind == OpKind::Add {
                "add"
            } else {
                "replace"
            }
        )));
    }
    Ok(PatchOp {
        op: kind,
        field,
        rest: segments.collect(),
        value,
    })
}

/// Applies `op` below the top-level field whose current value is `target` (for ops whose
/// `rest` is non-empty). Returns the field's new value.
pub(crate) fn apply_nested(mut target: Value, op: &PatchOp) -> Result<Value, ApiError> {
    let path = format!("/{}/{}", op.field, op.rest.join("/"));
    let not_found = || {
        ApiError::bad_request(format!(
            "Cannot apply the PATCH: '{path}' does not exist in the resource."
        ))
    };
    let Some((last, parents)) = op.rest.split_last() else {
        return Err(not_found());
    };
    let mut parent = &mut target;
    for segment in parents {
        parent = match parent {
            Value::Object(object) => object.get_mut(segment),
            Value::Array(array) => segment
                .parse::<usize>()
                .ok()
                .and_then(|index| array.get_mut(index)),
            _ => None,
        }
        .ok_or_else(not_found)?;
    }
    let value = op.value.clone().unwrap_or(Value::Null);
    match parent {
        Value::Object(object) => match op.op {
            OpKind::Add => {
                object.insert(last.clone(), value);
            }
            OpKind::Replace => {
                *object.get_mut(last).ok_or_else(not_found)? = value;
            }
            OpKind::Remove => {
                object.remove(last).ok_or_else(not_found)?;
            }
        },
        Value::Array(array) => {
            let index = if last == "-" && op.op == OpKind::Add {
                array.len()
            } else {
                last.parse::<usize>().map_err(|_| not_found())?
            };
            match op.op {
                OpKind::Add if index <= array.len() => array.insert(index, value),
                OpKind::Replace if index < array.len() => array[index] = value,
                OpKind::Remove if index < array.len() => {
                    array.remove(index);
                }
                _ => return Err(not_found()),
            }
        }
        _ => return Err(not_found()),
    }
    Ok(target)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn op(body: Value) -> PatchOp {
        parse_patch(json!([body]).to_string().as_bytes())
            .unwrap()
            .remove(0)
    }

    #[test]
    fn paths_split_into_field_and_escaped_rest() {
        let parsed = op(json!({"op": "add", "path": "/extra/a~1b/c~0d", "value": 1}));
        assert_eq!(parsed.field, "extra");
        assert_eq!(parsed.rest, vec!["a/b".to_owned(), "c~d".to_owned()]);
    }

    #[test]
    fn nested_add_replace_remove() {
        let target = json!({"a": {"b": 1}, "list": [1, 2]});
        let added = apply_nested(
            target,
            &op(json!({"op": "add", "path": "/extra/a/c", "value": 2})),
        )
        .unwrap();
        assert_eq!(added["a"], json!({"b": 1, "c": 2}));
        let appended = apply_nested(
            added,
            &op(json!({"op": "add", "path": "/extra/list/-", "value": 3})),
        )
        .unwrap();
        assert_eq!(appended["list"], json!([1, 2, 3]));
        let removed =
            apply_nested(appended, &op(json!({"op": "remove", "path": "/extra/a/b"}))).unwrap();
        assert_eq!(removed["a"], json!({"c": 2}));
        assert!(
            apply_nested(
                removed,
                &op(json!({"op": "replace", "path": "/extra/nope", "value": 1}))
            )
            .is_err()
        );
    }

    #[test]
    fn other_ops_and_bad_bodies_are_refused() {
        assert!(parse_patch(br#"[{"op": "move", "from": "/a", "path": "/b"}]"#).is_err());
        assert!(parse_patch(br#"{"op": "add"}"#).is_err());
        assert!(parse_patch(br#"[{"op": "add", "path": "/extra"}]"#).is_err());
        assert!(parse_patch(br#"[{"op": "add", "path": "extra", "value": 1}]"#).is_err());
    }
}
