//! Request bodies declared once: a [`BodySpec`] names each field of a JSON request body with
//! its type, whether it is required, how `null` counts, the microversion it appeared in, its
//! length limit and the words each refusal uses. [`BodySpec::parse`] is the one parser every
//! declared body goes through, and the OpenAPI request schema is generated from the same
//! declaration (`openapi/schemas.rs`, `body_schema`); the endpoint table names the spec
//! (`Endpoint::body_spec`), so a body's parser and its documentation cannot drift apart
//! (`endpoints/tests.rs` checks the parser against the generated schema).
//!
//! Theory of operation: the parser takes each declared field out of the body in declaration
//! order and checks, in this order, that it is present (or may be left out), that the request's
//! microversion has it, its JSON type, its value (one of the choices, at least the minimum, an
//! http(s) URL) and its length; then it refuses the first key no field declares. What is left
//! to the handler are the rules between fields or against stored records (a provision verb
//! that does not take `configdrive`, a runbook that must exist). The refusals keep the words
//! each handler used before the bodies were declared, since clients and the Tempest suite
//! match on them: each template may name `{name}`, `{value}` (the JSON value), `{text}` (a
//! string's text, other values as JSON), `{choices}`, `{min}`, `{max}`, `{since}` and
//! `{version}`.

use std::str::FromStr;

use axum::http::StatusCode;
use ferric_model::Microversion;
use serde_json::{Map, Value};

use super::json_object_body;
use crate::ApiError;

/// The words a [`Kind::Flag`] accepts as text, as query parameters do (`parse_bool_param`).
pub(crate) const TRUE_WORDS: &[&str] = &["true", "1", "yes", "on", "y", "t"];
pub(crate) const FALSE_WORDS: &[&str] = &["false", "0", "no", "off", "n", "f"];

/// The wire names of a model enum with `ALL` and a `const fn as_str`, as a constant slice.
macro_rules! wire_names {
    ($ty:ty) => {{
        const COUNT: usize = <$ty>::ALL.len();
        const NAMES: [&str; COUNT] = {
            let mut names = [""; COUNT];
            let mut index = 0;
            while index < COUNT {
                names[index] = <$ty>::ALL[index].as_str();
                index += 1;
            }
            names
        };
        &NAMES
    }};
}
pub(crate) use wire_names;

/// A field's JSON type, and what the parser checks of its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    /// A string.
    Text,
    /// One of these strings (exactly).
    Choice(&'static [&'static str]),
    /// One of these strings, in any letter case.
    ChoiceAnyCase(&'static [&'static str]),
    /// A boolean.
    Bool,
    /// A boolean, or one of [`TRUE_WORDS`] / [`FALSE_WORDS`] in any letter case (Ironic reads
    /// these fields as booleans, text included).
    Flag,
    /// A whole number of at least `min`.
    Integer { min: i64 },
    /// A string or a JSON object.
    TextOrObject,
    /// A list of step objects (each step is the handler's to read: its rules depend on the
    /// list).
    Steps,
    /// An `http://` or `https://` URL.
    HttpUrl,
}

/// What `null` means for a field.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Null {
    /// The same as leaving the field out.
    Absent,
    /// A value the handler reads (a field the caller sets to nothing).
    Value,
    /// Refused as of the wrong type.
    Refused,
}

/// One field of a request body.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BodyField {
    pub(crate) name: &'static str,
    pub(crate) kind: Kind,
    pub(crate) required: bool,
    pub(crate) null: Null,
    /// The minor microversion the field appeared in (1: always there).
    pub(crate) since: u16,
    /// Longest accepted text, in bytes.
    pub(crate) max_len: Option<usize>,
    /// The refusal of a value of the wrong JSON type.
    pub(crate) invalid: &'static str,
    /// The refusal of a value of the right type the field does not take (not a choice, below
    /// the minimum, not an http(s) URL, not a boolean word); handlers use it for their own
    /// rules on the field too ([`Body::refuse`]).
    pub(crate) refused: &'static str,
    /// The refusal when the request is older than `since`; the body's own when `None`.
    pub(crate) too_new: Option<&'static str>,
    pub(crate) description: Option<&'static str>,
}

impl BodyField {
    /// An optional field of `kind`, there since 1.1, `null` refused, with the plainest words.
    pub(crate) const fn new(name: &'static str, kind: Kind) -> Self {
        Self {
            name,
            kind,
            required: false,
            null: Null::Refused,
            since: 1,
            max_len: None,
            invalid: "Invalid value for {name}: {value}.",
            refused: "Invalid value for {name}: {value}.",
            too_new: None,
            description: None,
        }
    }

    pub(crate) const fn required(mut self) -> Self {
        self.required = true;
        self
    }

    pub(crate) const fn null(mut self, null: Null) -> Self {
        self.null = null;
        self
    }

    pub(crate) const fn since(mut self, minor: u16) -> Self {
        self.since = minor;
        self
    }

    pub(crate) const fn max_len(mut self, bytes: usize) -> Self {
        self.max_len = Some(bytes);
        self
    }

    /// The words for a value of the wrong type, and (unless [`Self::refused`] follows) for a
    /// value of the right type the field does not take.
    pub(crate) const fn invalid(mut self, template: &'static str) -> Self {
        self.invalid = template;
        self.refused = template;
        self
    }

    pub(crate) const fn refused(mut self, template: &'static str) -> Self {
        self.refused = template;
        self
    }

    pub(crate) const fn too_new(mut self, template: &'static str) -> Self {
        self.too_new = Some(template);
        self
    }

    pub(crate) const fn describe(mut self, description: &'static str) -> Self {
        self.description = Some(description);
        self
    }
}

/// Whether a body may be left out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Empty {
    /// A body is required (an empty one is not JSON).
    Refused,
    /// No bytes at all mean `{}`.
    Allowed,
    /// No bytes, or only white space, mean `{}`.
    BlankAllowed,
}

/// A request body: its fields and the words of its refusals.
#[derive(Debug)]
pub(crate) struct BodySpec {
    /// The OpenAPI schema's name (`#/components/schemas/<schema>`).
    pub(crate) schema: &'static str,
    pub(crate) fields: &'static [BodyField],
    /// The refusal of a key no field declares (`{name}`: the first such key).
    pub(crate) unknown: &'static str,
    /// The refusal of a missing required field.
    pub(crate) missing: &'static str,
    /// The refusal of a field newer than the request (`{name}`, `{since}`, `{version}`).
    pub(crate) too_new: &'static str,
    /// 406 (Ironic's usual answer) or 400 (the ramdisk API's) for a field newer than the
    /// request.
    pub(crate) too_new_status: StatusCode,
    pub(crate) empty: Empty,
}

impl BodySpec {
    /// A required body with Ironic's usual words for `request` ("a power request").
    pub(crate) const fn new(schema: &'static str, fields: &'static [BodyField]) -> Self {
        Self {
            schema,
            fields,
            unknown: "Unknown field '{name}' in the request.",
            missing: "Mandatory field missing: '{name}'.",
            too_new: "{name} needs API version 1.{since} or later; the request used {version}.",
            too_new_status: StatusCode::NOT_ACCEPTABLE,
            empty: Empty::Refused,
        }
    }

    pub(crate) const fn unknown(mut self, template: &'static str) -> Self {
        self.unknown = template;
        self
    }

    pub(crate) const fn missing(mut self, template: &'static str) -> Self {
        self.missing = template;
        self
    }

    pub(crate) const fn too_new(mut self, status: StatusCode, template: &'static str) -> Self {
        self.too_new_status = status;
        self.too_new = template;
        self
    }

    pub(crate) const fn empty(mut self, empty: Empty) -> Self {
        self.empty = empty;
        self
    }

    /// Parses and checks `bytes` against this declaration at `version`.
    pub(crate) fn parse(&self, bytes: &[u8], version: Microversion) -> Result<Body, ApiError> {
        let object = self.decode(bytes)?;
        self.check(object, version)
    }

    /// [`Self::parse`], with the refusal of an undeclared key (`unknown`, given the checked
    /// fields and the key) depending on the fields, as a provision request's names its verb.
    pub(crate) fn parse_naming_unknown(
        &self,
        bytes: &[u8],
        version: Microversion,
        unknown: impl FnOnce(&Body, &str) -> ApiError,
    ) -> Result<Body, ApiError> {
        let object = self.decode(bytes)?;
        self.check_with(object, version, unknown)
    }

    fn decode(&self, bytes: &[u8]) -> Result<Map<String, Value>, ApiError> {
        let blank = match self.empty {
            Empty::Refused => false,
            Empty::Allowed => bytes.is_empty(),
            Empty::BlankAllowed => bytes.iter().all(u8::is_ascii_whitespace),
        };
        if blank {
            Ok(Map::new())
        } else {
            json_object_body(bytes)
        }
    }

    /// Checks an already decoded object (see [`Self::parse`]).
    pub(crate) fn check(
        &self,
        object: Map<String, Value>,
        version: Microversion,
    ) -> Result<Body, ApiError> {
        self.check_with(object, version, |_, name| {
            ApiError::bad_request(fill(self.unknown, &Words::named(name)))
        })
    }

    fn check_with(
        &self,
        mut object: Map<String, Value>,
        version: Microversion,
        unknown: impl FnOnce(&Body, &str) -> ApiError,
    ) -> Result<Body, ApiError> {
        let mut values = Map::new();
        for field in self.fields {
            let value = match object.remove(field.name) {
                Some(Value::Null) if field.null == Null::Absent => None,
                other => other,
            };
            let Some(value) = value else {
                if field.required {
                    return Err(ApiError::bad_request(fill(
                        self.missing,
                        &Words::named(field.name),
                    )));
                }
                continue;
            };
            if version.minor() < field.since {
                let words = Words {
                    since: Some(field.since),
                    version: Some(version),
                    ..Words::named(field.name)
                };
                let template = field.too_new.unwrap_or(self.too_new);
                return Err(ApiError::new(self.too_new_status, fill(template, &words)));
            }
            check_value(field, &value)?;
            values.insert(field.name.to_owned(), value);
        }
        let body = Body {
            spec: self.fields,
            values,
        };
        match object.keys().next() {
            Some(name) => Err(unknown(&body, name)),
            None => Ok(body),
        }
    }
}

/// A checked body: each declared field present in it, of its declared type.
#[derive(Debug)]
pub(crate) struct Body {
    spec: &'static [BodyField],
    values: Map<String, Value>,
}

impl Body {
    /// Whether the caller sent the field (`null` counts unless it means absent).
    pub(crate) fn has(&self, name: &str) -> bool {
        self.values.contains_key(name)
    }

    /// The field's value as sent.
    pub(crate) fn take(&mut self, name: &str) -> Option<Value> {
        self.values.remove(name)
    }

    /// A text field (`None` when absent or `null`).
    pub(crate) fn text(&mut self, name: &str) -> Option<String> {
        match self.values.remove(name) {
            Some(Value::String(text)) => Some(text),
            _ => None,
        }
    }

    /// A [`Kind::Bool`] or [`Kind::Flag`] field.
    pub(crate) fn flag(&self, name: &str) -> Option<bool> {
        match self.values.get(name)? {
            Value::Bool(flag) => Some(*flag),
            Value::String(text) => flag_word(text),
            _ => None,
        }
    }

    /// A [`Kind::Integer`] field.
    pub(crate) fn integer(&self, name: &str) -> Option<i64> {
        self.values.get(name).and_then(Value::as_i64)
    }

    /// A choice field as its model value. The choices are the model's own wire names
    /// ([`wire_names!`]), so the model takes every one; were it not to, the caller gets the
    /// field's refusal (a 400), never a 500.
    pub(crate) fn parse<T: FromStr>(&self, name: &str) -> Result<Option<T>, ApiError> {
        let Some(Value::String(text)) = self.values.get(name) else {
            return Ok(None);
        };
        let text = match self.declared(name).map(|field| field.kind) {
            Some(Kind::ChoiceAnyCase(_)) => text.to_ascii_lowercase(),
            _ => text.clone(),
        };
        text.parse().map(Some).map_err(|_| self.refuse(name))
    }

    /// The field's own refusal of the value the caller sent, for a handler's rule on it.
    pub(crate) fn refuse(&self, name: &str) -> ApiError {
        match (self.declared(name), self.values.get(name)) {
            (Some(field), Some(value)) => refusal(field, field.refused, value),
            _ => ApiError::bad_request(format!("Invalid value for {name}.")),
        }
    }

    fn declared(&self, name: &str) -> Option<&'static BodyField> {
        self.spec.iter().find(|field| field.name == name)
    }
}

fn flag_word(text: &str) -> Option<bool> {
    let lower = text.to_ascii_lowercase();
    if TRUE_WORDS.contains(&lower.as_str()) {
        Some(true)
    } else if FALSE_WORDS.contains(&lower.as_str()) {
        Some(false)
    } else {
        None
    }
}

/// The type, value and length checks of one present field.
fn check_value(field: &BodyField, value: &Value) -> Result<(), ApiError> {
    if value.is_null() {
        return match field.null {
            Null::Value | Null::Absent => Ok(()),
            Null::Refused => Err(refusal(field, field.invalid, value)),
        };
    }
    let typed = match field.kind {
        Kind::Text | Kind::Choice(_) | Kind::ChoiceAnyCase(_) | Kind::HttpUrl => value.is_string(),
        Kind::Bool => value.is_boolean(),
        Kind::Flag => value.is_boolean() || value.is_string(),
        Kind::Integer { .. } => value.as_i64().is_some(),
        Kind::TextOrObject => value.is_string() || value.is_object(),
        Kind::Steps => value.is_array(),
    };
    if !typed {
        return Err(refusal(field, field.invalid, value));
    }
    let taken = match (field.kind, value) {
        (Kind::Choice(names), Value::String(text)) => names.contains(&text.as_str()),
        (Kind::ChoiceAnyCase(names), Value::String(text)) => {
            names.iter().any(|name| name.eq_ignore_ascii_case(text))
        }
        (Kind::Flag, Value::String(text)) => flag_word(text).is_some(),
        (Kind::Integer { min }, value) => value.as_i64().is_some_and(|number| number >= min),
        (Kind::HttpUrl, Value::String(text)) => {
            text.starts_with("http://") || text.starts_with("https://")
        }
        _ => true,
    };
    if !taken {
        return Err(refusal(field, field.refused, value));
    }
    if let (Some(max), Value::String(text)) = (field.max_len, value)
        && text.len() > max
    {
        return Err(refusal(
            field,
            "Invalid value for {name}: longer than {max} bytes.",
            value,
        ));
    }
    Ok(())
}

fn refusal(field: &BodyField, template: &str, value: &Value) -> ApiError {
    let choices = match field.kind {
        Kind::Choice(names) | Kind::ChoiceAnyCase(names) => Some(names.join(", ")),
        _ => None,
    };
    let min = match field.kind {
        Kind::Integer { min } => Some(min),
        _ => None,
    };
    let words = Words {
        value: Some(value),
        choices,
        min,
        max: field.max_len,
        ..Words::named(field.name)
    };
    ApiError::bad_request(fill(template, &words))
}

/// What a refusal's template may name.
struct Words<'a> {
    name: &'a str,
    value: Option<&'a Value>,
    choices: Option<String>,
    min: Option<i64>,
    max: Option<usize>,
    since: Option<u16>,
    version: Option<Microversion>,
}

impl<'a> Words<'a> {
    fn named(name: &'a str) -> Self {
        Self {
            name,
            value: None,
            choices: None,
            min: None,
            max: None,
            since: None,
            version: None,
        }
    }

    fn word(&self, key: &str) -> Option<String> {
        Some(match key {
            "name" => self.name.to_owned(),
            "value" => self.value?.to_string(),
            "text" => match self.value? {
                Value::String(text) => text.clone(),
                other => other.to_string(),
            },
            "choices" => self.choices.clone()?,
            "min" => self.min?.to_string(),
            "max" => self.max?.to_string(),
            "since" => self.since?.to_string(),
            "version" => self.version?.to_string(),
            _ => return None,
        })
    }
}

/// `template` with each `{key}` replaced, in one pass (a value the caller sent is never read
/// as a template); an unknown key stays as written.
fn fill(template: &str, words: &Words<'_>) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    while let Some(start) = rest.find('{') {
        out.push_str(&rest[..start]);
        let after = &rest[start + 1..];
        match after
            .find('}')
            .and_then(|end| words.word(&after[..end]).map(|word| (end, word)))
        {
            Some((end, word)) => {
                out.push_str(&word);
                rest = &after[end + 1..];
            }
            None => {
                out.push('{');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const FIELDS: &[BodyField] = &[
        BodyField::new("target", Kind::Choice(&["on", "off"]))
            .required()
            .invalid("Invalid target {value}; valid: {choices}."),
        BodyField::new("timeout", Kind::Integer { min: 1 })
            .null(Null::Absent)
            .since(27)
            .refused("Invalid timeout {value}; at least {min}."),
        BodyField::new("note", Kind::Text).max_len(4),
    ];
    const SPEC: BodySpec = BodySpec::new("Test", FIELDS).unknown("Unknown '{name}'.");

    fn refusal(body: Value, minor: u16) -> (StatusCode, String) {
        let error = SPEC
            .parse(body.to_string().as_bytes(), Microversion::new(minor))
            .unwrap_err();
        (error.status, error.message)
    }

    #[test]
    fn each_check_answers_with_its_declared_words() {
        let bad = StatusCode::BAD_REQUEST;
        assert_eq!(
            refusal(json!({}), 30),
            (bad, "Mandatory field missing: 'target'.".to_owned())
        );
        assert_eq!(
            refusal(json!({"target": 5}), 30),
            (bad, "Invalid target 5; valid: on, off.".to_owned())
        );
        assert_eq!(
            refusal(json!({"target": "up"}), 30),
            (bad, "Invalid target \"up\"; valid: on, off.".to_owned())
        );
        assert_eq!(
            refusal(json!({"target": "on", "timeout": 3}), 20),
            (
                StatusCode::NOT_ACCEPTABLE,
                "timeout needs API version 1.27 or later; the request used 1.20.".to_owned()
            )
        );
        assert_eq!(
            refusal(json!({"target": "on", "timeout": 0}), 30),
            (bad, "Invalid timeout 0; at least 1.".to_owned())
        );
        assert_eq!(
            refusal(json!({"target": "on", "note": "12345"}), 30),
            (
                bad,
                "Invalid value for note: longer than 4 bytes.".to_owned()
            )
        );
        assert_eq!(
            refusal(json!({"target": "on", "extra": 1}), 30),
            (bad, "Unknown 'extra'.".to_owned())
        );
    }

    #[test]
    fn a_null_that_means_absent_is_not_version_checked() {
        let body = SPEC
            .parse(
                br#"{"target": "off", "timeout": null}"#,
                Microversion::new(1),
            )
            .unwrap();
        assert!(!body.has("timeout"));
        assert_eq!(body.integer("timeout"), None);
    }

    #[test]
    fn templates_are_filled_once() {
        let value = json!("{name}");
        let words = Words {
            value: Some(&value),
            ..Words::named("field")
        };
        assert_eq!(
            fill("{name}: {text} {other}", &words),
            "field: {name} {other}"
        );
    }

    #[test]
    fn flags_read_booleans_and_their_words() {
        const FLAGS: &[BodyField] = &[BodyField::new("on", Kind::Flag)];
        const FLAG_SPEC: BodySpec = BodySpec::new("Flags", FLAGS);
        let parsed = |text: &str| {
            FLAG_SPEC
                .parse(text.as_bytes(), Microversion::MIN)
                .map(|body| body.flag("on"))
        };
        assert_eq!(parsed(r#"{"on": "Yes"}"#), Ok(Some(true)));
        assert_eq!(parsed(r#"{"on": false}"#), Ok(Some(false)));
        assert!(parsed(r#"{"on": "maybe"}"#).is_err());
        assert!(parsed(r#"{"on": 1}"#).is_err());
    }
}
