//! Value interpolation in rule arguments, in the syntax of Python's `str.format` that Ironic
//! uses: `{inventory[cpu][count]}`, `{node.uuid}`, `{plugin_data[key]}` and, in a loop,
//! `{item}` / `{item[path]}`; `{{` and `}}` are literal braces. Like Ironic, a string whose
//! fields do not all resolve is left exactly as it was, and a formatted value is always a
//! string (numbers written plainly, `True`/`False`/`None` as Python writes them).

use serde_json::{Map, Value};

/// What the fields of a format string may name.
pub(crate) struct Scope<'a> {
    pub(crate) node: &'a Value,
    pub(crate) inventory: &'a Value,
    pub(crate) plugin_data: &'a Value,
    pub(crate) item: Option<&'a Value>,
}

impl Scope<'_> {
    fn root(&self, name: &str) -> Option<&Value> {
        match name {
            "node" => Some(self.node),
            "inventory" => Some(self.inventory),
            "plugin_data" => Some(self.plugin_data),
            "item" => self.item,
            _ => None,
        }
    }
}

/// `value` with every string in it (at any depth, object keys included) interpolated.
pub(crate) fn interpolate(value: &Value, scope: &Scope<'_>) -> Value {
    match value {
        Value::String(text) => Value::String(format_str(text, scope)),
        Value::Array(items) => Value::Array(items.iter().map(|v| interpolate(v, scope)).collect()),
        Value::Object(object) => Value::Object(
            object
                .iter()
                .map(|(key, v)| (format_str(key, scope), interpolate(v, scope)))
                .collect::<Map<_, _>>(),
        ),
        other => other.clone(),
    }
}

/// One string formatted; the string itself when a field does not resolve or the braces do
/// not pair up.
pub(crate) fn format_str(text: &str, scope: &Scope<'_>) -> String {
    try_format(text, scope).unwrap_or_else(|| text.to_owned())
}

fn try_format(text: &str, scope: &Scope<'_>) -> Option<String> {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.char_indices().peekable();
    while let Some((index, c)) = chars.next() {
        match c {
            '{' if chars.peek().map(|(_, c)| *c) == Some('{') => {
                chars.next();
                out.push('{');
            }
            '}' if chars.peek().map(|(_, c)| *c) == Some('}') => {
                chars.next();
                out.push('}');
            }
            '}' => return None,
            '{' => {
                let rest = &text[index + 1..];
                let end = rest.find('}')?;
                let field = &rest[..end];
                out.push_str(&python_str(resolve(field, scope)?));
                for _ in 0..field.chars().count() + 1 {
                    chars.next();
                }
            }
            c => out.push(c),
        }
    }
    Some(out)
}

/// The value a field names: a root, then `.name` or `[key]` steps (a list takes an index).
/// A conversion (`!r`) or format spec (`:>10`) is not supported: the field does not resolve.
fn resolve<'a>(field: &str, scope: &'a Scope<'a>) -> Option<&'a Value> {
    let field = field.trim();
    let root_end = field.find(['.', '[']).unwrap_or(field.len());
    let mut current = scope.root(&field[..root_end])?;
    let mut rest = &field[root_end..];
    while !rest.is_empty() {
        let key;
        if let Some(after) = rest.strip_prefix('.') {
            let end = after.find(['.', '[']).unwrap_or(after.len());
            key = &after[..end];
            rest = &after[end..];
        } else if let Some(after) = rest.strip_prefix('[') {
            let end = after.find(']')?;
            key = &after[..end];
            rest = &after[end + 1..];
        } else {
            return None;
        }
        current = match current {
            Value::Object(object) => object.get(key)?,
            Value::Array(items) => items.get(key.parse::<usize>().ok()?)?,
            _ => return None,
        };
    }
    Some(current)
}

/// A value as Python's `str()` writes it for the scalars (containers as JSON).
pub(crate) fn python_str(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Bool(true) => "True".to_owned(),
        Value::Bool(false) => "False".to_owned(),
        Value::Null => "None".to_owned(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn fields_resolve_through_keys_attributes_and_indexes() {
        let node = json!({"uuid": "abc", "properties": {"cpus": 4}});
        let inventory = json!({"bmc_address": "10.0.0.1", "interfaces": [{"name": "eth0"}]});
        let plugin_data = json!({"auto_discovered": true});
        let item = json!({"path": "/driver_info/x"});
        let scope = Scope {
            node: &node,
            inventory: &inventory,
            plugin_data: &plugin_data,
            item: Some(&item),
        };
        assert_eq!(format_str("Node {node.uuid}", &scope), "Node abc");
        assert_eq!(format_str("{node.properties[cpus]}", &scope), "4");
        assert_eq!(
            format_str("{inventory[interfaces][0][name]}", &scope),
            "eth0"
        );
        assert_eq!(format_str("{plugin_data[auto_discovered]}", &scope), "True");
        assert_eq!(format_str("{item[path]}", &scope), "/driver_info/x");
        assert_eq!(format_str("{{literal}}", &scope), "{literal}");
        // Unresolved fields and unpaired braces leave the string as it was.
        assert_eq!(
            format_str("{inventory[missing]}", &scope),
            "{inventory[missing]}"
        );
        assert_eq!(
            format_str("{{ inventory.cpu }", &scope),
            "{{ inventory.cpu }"
        );
        assert_eq!(format_str("{other}", &scope), "{other}");
    }
}
