//! The HTTP side: one blocking client that sends every request with the microversion header
//! and the credentials, and turns Ironic's error bodies back into the API's own words.
//!
//! Blocking (`reqwest::blocking`): a CLI makes one request at a time and needs no runtime of its
//! own.

use std::time::Duration;

use reqwest::Method;
use reqwest::blocking::{Client as HttpClient, RequestBuilder};
use serde_json::Value;

use crate::CliError;

/// Where and how to reach the API, from the global flags.
#[derive(Debug, Clone)]
pub struct Connection {
    /// The API's root, e.g. `http://127.0.0.1:6385`, without a trailing slash.
    pub url: String,
    pub username: Option<String>,
    pub password: Option<String>,
    /// A Keystone token, sent as `X-Auth-Token`.
    pub token: Option<String>,
    /// Sent as `X-OpenStack-Ironic-API-Version`: `latest` or `1.N`.
    pub api_version: String,
}

/// A client of one Ferric (or Ironic) API endpoint.
#[derive(Debug)]
pub struct Client {
    http: HttpClient,
    connection: Connection,
}

impl Client {
    pub fn new(mut connection: Connection) -> Result<Self, CliError> {
        while connection.url.ends_with('/') {
            connection.url.pop();
        }
        let http = HttpClient::builder()
            .user_agent(concat!("ferric-cli/", env!("CARGO_PKG_VERSION")))
            .timeout(Duration::from_secs(120))
            .build()
            .map_err(|source| CliError::Http {
                url: connection.url.clone(),
                reason: CliError::reason(&source),
            })?;
        Ok(Self { http, connection })
    }

    pub fn url(&self) -> &str {
        &self.connection.url
    }

    /// Where and how this client reaches the API (the console's WebSocket connects alike).
    pub fn connection(&self) -> &Connection {
        &self.connection
    }

    /// `path` is either absolute (`/v1/nodes`) or a full URL (a collection's `next` link).
    fn build(&self, method: Method, path: &str) -> (String, RequestBuilder) {
        let url = if path.starts_with("http://") || path.starts_with("https://") {
            path.to_owned()
        } else {
            format!("{}{path}", self.connection.url)
        };
        let mut request = self
            .http
            .request(method, &url)
            .header(
                "X-OpenStack-Ironic-API-Version",
                &self.connection.api_version,
            )
            .header("Accept", "application/json");
        if let Some(username) = &self.connection.username {
            request = request.basic_auth(username, self.connection.password.as_deref());
        }
        if let Some(token) = &self.connection.token {
            request = request.header("X-Auth-Token", token);
        }
        (url, request)
    }

    /// Sends one request; 2xx answers give their JSON body (`Null` when empty), others a
    /// [`CliError::Api`] with the API's message.
    pub fn send(
        &self,
        method: Method,
        path: &str,
        query: &[(&str, String)],
        body: Option<&Value>,
    ) -> Result<Value, CliError> {
        let (url, mut request) = self.build(method, path);
        if !query.is_empty() {
            request = request.query(query);
        }
        if let Some(body) = body {
            request = request.json(body);
        }
        let response = request.send().map_err(|source| {
            if source.is_connect() {
                CliError::Connect {
                    url: self.connection.url.clone(),
                    reason: CliError::reason(&source),
                }
            } else {
                CliError::Http {
                    url: url.clone(),
                    reason: CliError::reason(&source),
                }
            }
        })?;
        let status = response.status();
        let text = response.text().map_err(|source| CliError::Http {
            url: url.clone(),
            reason: CliError::reason(&source),
        })?;
        if !status.is_success() {
            return Err(CliError::Api {
                status: status.as_u16(),
                message: error_message(&text)
                    .unwrap_or_else(|| fallback_message(status.as_u16(), &text)),
            });
        }
        if text.trim().is_empty() {
            return Ok(Value::Null);
        }
        serde_json::from_str(&text).map_err(|source| CliError::Decode {
            url,
            reason: source.to_string(),
        })
    }

    pub fn get(&self, path: &str, query: &[(&str, String)]) -> Result<Value, CliError> {
        self.send(Method::GET, path, query, None)
    }

    pub fn post(&self, path: &str, body: &Value) -> Result<Value, CliError> {
        self.send(Method::POST, path, &[], Some(body))
    }

    pub fn put(&self, path: &str, body: &Value) -> Result<Value, CliError> {
        self.send(Method::PUT, path, &[], Some(body))
    }

    pub fn patch(&self, path: &str, body: &Value) -> Result<Value, CliError> {
        self.send(Method::PATCH, path, &[], Some(body))
    }

    pub fn delete(&self, path: &str) -> Result<Value, CliError> {
        self.send(Method::DELETE, path, &[], None)
    }

    /// Every item of a collection, following its `next` links unless `limit` asks for one
    /// page only.
    pub fn list(
        &self,
        path: &str,
        key: &str,
        query: &[(&str, String)],
        limit: Option<u32>,
    ) -> Result<Vec<Value>, CliError> {
        let mut query = query.to_vec();
        if let Some(limit) = limit {
            query.push(("limit", limit.to_string()));
        }
        let mut page = self.get(path, &query)?;
        let mut items = Vec::new();
        loop {
            if let Some(Value::Array(found)) = page.get_mut(key).map(Value::take) {
                items.extend(found);
            }
            let next = match page.get("next").and_then(Value::as_str) {
                Some(next) if limit.is_none() => next.to_owned(),
                _ => return Ok(items),
            };
            page = self.get(&next, &[])?;
        }
    }
}

/// The message of Ironic's error body, `{"error_message": "{\"faultstring\": …}"}`: the inner
/// document is JSON inside a string. Older or foreign servers send the inner object directly
/// or plain text; each is read as well as it can be.
pub fn error_message(body: &str) -> Option<String> {
    let outer: Value = serde_json::from_str(body).ok()?;
    let inner = match outer.get("error_message")? {
        Value::String(text) => match serde_json::from_str::<Value>(text) {
            Ok(Value::Object(object)) => Value::Object(object),
            _ => return Some(text.clone()),
        },
        other => other.clone(),
    };
    match inner.get("faultstring") {
        Some(Value::String(fault)) => Some(fault.clone()),
        _ => Some(inner.to_string()),
    }
}

/// When the body is not Ironic's: the status and the start of whatever came.
fn fallback_message(status: u16, text: &str) -> String {
    let text = text.trim();
    if text.is_empty() {
        return format!("the server answered HTTP {status} with no explanation");
    }
    let shown: String = text.chars().take(300).collect();
    format!("the server answered HTTP {status}: {shown}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn double_encoded_error_bodies_give_the_faultstring() {
        let body = r#"{"error_message": "{\"faultcode\": \"Client\", \"faultstring\": \"Node n1 could not be found.\", \"debuginfo\": null}"}"#;
        assert_eq!(
            error_message(body).as_deref(),
            Some("Node n1 could not be found.")
        );
    }

    #[test]
    fn plain_error_messages_and_foreign_bodies_are_still_readable() {
        assert_eq!(
            error_message(r#"{"error_message": "just words"}"#).as_deref(),
            Some("just words")
        );
        assert_eq!(
            error_message(r#"{"error_message": {"faultstring": "inner object"}}"#).as_deref(),
            Some("inner object")
        );
        assert_eq!(error_message("<html>bad gateway</html>"), None);
        assert_eq!(
            fallback_message(502, "<html>bad gateway</html>"),
            "the server answered HTTP 502: <html>bad gateway</html>"
        );
        assert_eq!(
            fallback_message(500, ""),
            "the server answered HTTP 500 with no explanation"
        );
    }
}
