//! The doc-freshness check: a document generated from code must equal its checked-in copy,
//! so the docs cannot drift from what they describe. `FERRIC_UPDATE_DOCS=1` (what `cargo
//! xtask docs` sets) rewrites the copy instead of comparing.

use std::path::Path;

/// Compares `rendered` with the file at `path` (or rewrites it when `FERRIC_UPDATE_DOCS=1`)
/// and panics at the first differing line, naming the command that regenerates it.
/// `what` says what the document is generated from ("the API", "the settings").
pub fn assert_up_to_date(path: &Path, rendered: &str, what: &str, regenerate: &str) {
    if std::env::var_os("FERRIC_UPDATE_DOCS").is_some_and(|value| value == "1") {
        if let Err(error) = std::fs::write(path, rendered) {
            panic!("cannot rewrite {}: {error}", path.display());
        }
        return;
    }
    let checked_in = std::fs::read_to_string(path).unwrap_or_default();
    if let Some(message) = staleness(&checked_in, rendered) {
        panic!(
            "{} is out of date with {what} ({message}).\nRegenerate it with `{regenerate}` \
             and commit the result.",
            path.display()
        );
    }
}

/// Where `checked_in` first differs from `rendered`, or `None` when they are equal.
fn staleness(checked_in: &str, rendered: &str) -> Option<String> {
    if checked_in == rendered {
        return None;
    }
    let first_difference = checked_in
        .lines()
        .zip(rendered.lines())
        .position(|(old, new)| old != new)
        .unwrap_or_else(|| checked_in.lines().count().min(rendered.lines().count()));
    Some(format!(
        "first difference at line {}: checked in {:?}, generated {:?}",
        first_difference + 1,
        checked_in
            .lines()
            .nth(first_difference)
            .unwrap_or("<end of file>"),
        rendered
            .lines()
            .nth(first_difference)
            .unwrap_or("<end of file>"),
    ))
}

#[cfg(test)]
mod tests {
    use super::staleness;

    #[test]
    fn equal_documents_are_fresh() {
        assert_eq!(staleness("a\nb\n", "a\nb\n"), None);
    }

    #[test]
    fn the_first_differing_line_is_named() {
        let message = staleness("a\nb\nc\n", "a\nB\nc\n").unwrap();
        assert!(message.contains("line 2"), "{message}");
        assert!(
            message.contains("\"b\"") && message.contains("\"B\""),
            "{message}"
        );
    }

    #[test]
    fn a_missing_tail_is_the_end_of_file() {
        let message = staleness("a\n", "a\nb\n").unwrap();
        assert!(message.contains("line 2"), "{message}");
        assert!(message.contains("<end of file>"), "{message}");
    }
}
