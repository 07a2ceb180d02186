//! How answers are shown: tables for people, JSON or YAML for scripts (`-f`). A record is a
//! two-column Field/Value table; a listing has one row per item and one column per field.

use std::io::IsTerminal;

use clap::ValueEnum;
use comfy_table::{ContentArrangement, Table, presets};
use serde_json::{Map, Value};

use crate::CliError;

/// The output format of `-f/--format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    Table,
    Json,
    Yaml,
}

/// Drops what is for machines that follow links (`links`, and fields that hold only links
/// such as a node's `ports`), and keeps `fields` in their order when given.
pub fn shape(record: &Value, fields: Option<&[String]>) -> Value {
    let Value::Object(object) = record else {
        return record.clone();
    };
    let shaped: Map<String, Value> = match fields {
        Some(fields) => fields
            .iter()
            .map(|field| {
                let value = object.get(field).cloned().unwrap_or(Value::Null);
                (field.clone(), value)
            })
            .collect(),
        None => object
            .iter()
            .filter(|(_, value)| !is_links(value))
            .map(|(key, value)| (key.clone(), value.clone()))
            .collect(),
    };
    Value::Object(shaped)
}

/// A list of `{"href", "rel"}` objects.
fn is_links(value: &Value) -> bool {
    match value {
        Value::Array(items) => {
            !items.is_empty()
                && items
                    .iter()
                    .all(|item| item.get("href").is_some() && item.get("rel").is_some())
        }
        _ => false,
    }
}

/// One record, already shaped. A table lists `fields` in their order when given, else every
/// field alphabetically (JSON objects keep no order: scripts read them by name).
pub fn record(
    format: Format,
    record: &Value,
    fields: Option<&[String]>,
) -> Result<String, CliError> {
    match format {
        Format::Json => json(record),
        Format::Yaml => yaml(record),
        Format::Table => {
            let mut table = new_table();
            table.set_header(["Field", "Value"]);
            if let Value::Object(object) = record {
                let keys: Vec<&String> = match fields {
                    Some(fields) => fields.iter().collect(),
                    None => object.keys().collect(),
                };
                for key in keys {
                    let value = object.get(key).unwrap_or(&Value::Null);
                    table.add_row([key.clone(), cell(value)]);
                }
            }
            Ok(table.to_string())
        }
    }
}

/// A listing: `items` already shaped, `columns` the table's columns in order.
pub fn list(format: Format, items: &[Value], columns: &[String]) -> Result<String, CliError> {
    match format {
        Format::Json => json(&Value::Array(items.to_vec())),
        Format::Yaml => yaml(&Value::Array(items.to_vec())),
        Format::Table => {
            let mut table = new_table();
            table.set_header(columns.iter().cloned());
            for item in items {
                table.add_row(
                    columns
                        .iter()
                        .map(|column| cell(item.get(column).unwrap_or(&Value::Null))),
                );
            }
            Ok(table.to_string())
        }
    }
}

/// The columns of a listing: `fields` when given, else the defaults when every item has them,
/// else every field the items show (as `--long` does).
pub fn columns(items: &[Value], fields: Option<&[String]>, defaults: &[&str]) -> Vec<String> {
    if let Some(fields) = fields {
        return fields.to_vec();
    }
    if !defaults.is_empty() {
        return defaults.iter().map(|&field| field.to_owned()).collect();
    }
    let mut all: Vec<String> = Vec::new();
    for item in items {
        if let Value::Object(object) = item {
            for key in object.keys() {
                if !all.contains(key) {
                    all.push(key.clone());
                }
            }
        }
    }
    all
}

fn new_table() -> Table {
    let mut table = Table::new();
    table.load_preset(presets::ASCII_FULL_CONDENSED);
    // Wrap to the terminal's width, when there is a terminal with a usable width (a pseudo
    // terminal may report 0 columns, which would wrap every cell to one character).
    if std::io::stdout().is_terminal() && table.width().is_some_and(|width| width >= 40) {
        table.set_content_arrangement(ContentArrangement::Dynamic);
    }
    table
}

/// A value in a table cell: strings bare, `None` for null, JSON for the rest.
pub fn cell(value: &Value) -> String {
    match value {
        Value::Null => "None".to_owned(),
        Value::String(text) => text.clone(),
        Value::Bool(flag) => flag.to_string(),
        Value::Number(number) => number.to_string(),
        Value::Array(_) | Value::Object(_) => value.to_string(),
    }
}

fn json(value: &Value) -> Result<String, CliError> {
    serde_json::to_string_pretty(value).map_err(|error| CliError::Output(error.to_string()))
}

fn yaml(value: &Value) -> Result<String, CliError> {
    let text =
        serde_yaml_ng::to_string(value).map_err(|error| CliError::Output(error.to_string()))?;
    Ok(text.trim_end().to_owned())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn shaping_drops_link_lists_and_keeps_requested_fields_in_order() {
        let node = json!({
            "uuid": "u1", "name": "n1", "extra": {},
            "links": [{"href": "http://x/v1/nodes/u1", "rel": "self"}],
            "ports": [{"href": "http://x/v1/nodes/u1/ports", "rel": "self"}],
            "traits": [],
        });
        let shaped = shape(&node, None);
        assert!(shaped.get("links").is_none());
        assert!(shaped.get("ports").is_none());
        assert_eq!(shaped["traits"], json!([]));
        let fields = ["name".to_owned(), "uuid".to_owned(), "missing".to_owned()];
        let shaped = shape(&node, Some(&fields));
        assert_eq!(shaped.as_object().unwrap().len(), 3);
        assert_eq!(shaped["missing"], Value::Null);
        let table = record(Format::Table, &shaped, Some(&fields)).unwrap();
        let order: Vec<usize> = ["| name", "| uuid", "| missing"]
            .iter()
            .map(|row| table.find(row).unwrap())
            .collect();
        assert!(order.is_sorted(), "requested order kept:\n{table}");
    }

    #[test]
    fn tables_show_scalars_bare_and_structures_as_json() {
        let text = record(
            Format::Table,
            &json!({"name": "n1", "maintenance": false, "owner": null, "extra": {"a": 1}}),
            None,
        )
        .unwrap();
        assert!(text.contains("| name "), "{text}");
        assert!(text.contains("| n1 "), "{text}");
        assert!(text.contains("| None "), "{text}");
        assert!(text.contains(r#"{"a":1}"#), "{text}");
        let items = [json!({"uuid": "u1", "name": "n1"}), json!({"uuid": "u2"})];
        let columns = columns(&items, None, &[]);
        assert_eq!(columns, ["name", "uuid"]);
        let text = list(Format::Table, &items, &columns).unwrap();
        let rows: Vec<&str> = text
            .lines()
            .filter(|line| line.contains("| u1 ") || line.contains("| u2 "))
            .collect();
        assert_eq!(rows.len(), 2, "{text}");
        assert!(
            rows[1].contains("| None ") && rows[1].contains("| u2 "),
            "{text}"
        );
        let parsed: Value =
            serde_yaml_ng::from_str(&list(Format::Yaml, &items, &columns).unwrap()).unwrap();
        assert_eq!(parsed[1]["uuid"], "u2");
    }
}
