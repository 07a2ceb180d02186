//! How callers name a resource: by UUID or by its (unique) name.

use std::fmt;

use serde::{Deserialize, Serialize};
use uuid::Uuid;

/// A node (or port, portgroup) named by UUID or by name, as `/v1/nodes/{node_ident}` accepts.
///
/// Names that look like UUIDs are refused by the API, so parsing is unambiguous: anything that
/// parses as a UUID is one.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(untagged)]
pub enum Ident {
    Uuid(Uuid),
    Name(String),
}

impl Ident {
    /// Reads a path segment: a UUID if it parses as one, a name otherwise.
    pub fn parse(text: &str) -> Self {
        match Uuid::parse_str(text) {
            Ok(uuid) => Self::Uuid(uuid),
            Err(_) => Self::Name(text.to_owned()),
        }
    }
}

impl From<Uuid> for Ident {
    fn from(uuid: Uuid) -> Self {
        Self::Uuid(uuid)
    }
}

impl From<&str> for Ident {
    fn from(text: &str) -> Self {
        Self::parse(text)
    }
}

impl fmt::Display for Ident {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Uuid(uuid) => uuid.fmt(f),
            Self::Name(name) => f.write_str(name),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids_parse_as_uuids_and_everything_else_is_a_name() {
        let uuid = Uuid::new_v4();
        assert_eq!(Ident::parse(&uuid.to_string()), Ident::Uuid(uuid));
        assert_eq!(Ident::parse("node-1"), Ident::Name("node-1".to_owned()));
    }
}
