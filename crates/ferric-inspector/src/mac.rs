//! MAC addresses as the inspection service compares them: lower case, colon separated.

/// A MAC address in lower-case colon form, or `None`.
pub fn normalize_mac(text: &str) -> Option<String> {
    let parts: Vec<&str> = text.trim().split([':', '-']).collect();
    let valid = parts.len() == 6
        && parts
            .iter()
            .all(|part| part.len() == 2 && part.chars().all(|c| c.is_ascii_hexdigit()));
    valid.then(|| parts.join(":").to_ascii_lowercase())
}
