//! Tidy checks that run as ordinary tests (rust-analyzer's `xtask/src/tidy.rs` idea), so the
//! normal test run (`cargo xtask test`, CI) enforces them: every Rust source file opens with a
//! `//!` comment saying what it is for, none is over 1,000 lines (a short list of exceptions
//! that may only shrink), and every TODO carries a tag saying what kind of debt it is.

use std::path::{Path, PathBuf};

/// The most lines a source file may have (`STYLE.md`: split by state or resource well before).
const MAX_LINES: usize = 1_000;

/// Files over [`MAX_LINES`] today, to be split along their seams. The list may only shrink: a
/// test fails when one of them is back under the limit, so it is removed from here.
const TOO_LONG: &[&str] = &[];

/// The tags a TODO may carry (`TODO-correctness: …`).
const TODO_TAGS: &[&str] = &["correctness", "security", "perf", "compat", "ipmi"];

pub(crate) fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_else(|| PathBuf::from(".."))
}

/// Every `.rs` file of the workspace and the fuzz targets, as paths relative to the root,
/// skipping build output and hidden directories.
fn rust_files() -> Vec<(String, String)> {
    let root = workspace_root();
    let mut files = Vec::new();
    for top in ["crates", "xtask", "fuzz"] {
        walk(&root, &root.join(top), &mut files);
    }
    files.sort();
    assert!(files.len() > 100, "only {} source files found", files.len());
    files
}

fn walk(root: &Path, dir: &Path, files: &mut Vec<(String, String)>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if path.is_dir() {
            if name != "target" && !name.starts_with('.') {
                walk(root, &path, files);
            }
        } else if name.ends_with(".rs") {
            let relative = path
                .strip_prefix(root)
                .unwrap_or(&path)
                .to_string_lossy()
                .into_owned();
            let text = std::fs::read_to_string(&path).unwrap_or_default();
            files.push((relative, text));
        }
    }
}

#[test]
fn every_source_file_opens_with_a_doc_comment() {
    let missing: Vec<String> = rust_files()
        .into_iter()
        .filter(|(_, text)| {
            let first = text.lines().find(|line| !line.trim().is_empty());
            !first.is_some_and(|line| line.starts_with("//!"))
        })
        .map(|(path, _)| path)
        .collect();
    assert!(
        missing.is_empty(),
        "these files do not open with a `//!` line saying what they are for: {missing:#?}"
    );
}

#[test]
fn no_source_file_is_over_the_line_limit() {
    let files = rust_files();
    let long: Vec<(String, usize)> = files
        .iter()
        .map(|(path, text)| (path.clone(), text.lines().count()))
        .filter(|(path, lines)| *lines > MAX_LINES && !TOO_LONG.contains(&path.as_str()))
        .collect();
    assert!(
        long.is_empty(),
        "these files are over {MAX_LINES} lines; split them along their seams (by resource, \
         state or interface): {long:#?}"
    );
    for exception in TOO_LONG {
        let lines = files
            .iter()
            .find(|(path, _)| path == exception)
            .map(|(_, text)| text.lines().count());
        assert!(
            lines.is_some_and(|lines| lines > MAX_LINES),
            "{exception} is no longer over {MAX_LINES} lines ({lines:?}); remove it from \
             TOO_LONG in xtask/src/tidy.rs"
        );
    }
}

#[test]
fn every_todo_is_tagged() {
    let marker = "TODO";
    let mut untagged = Vec::new();
    // This file names the marker to explain it.
    for (path, text) in rust_files()
        .into_iter()
        .filter(|(path, _)| path != "xtask/src/tidy.rs")
    {
        for (number, line) in text.lines().enumerate() {
            for (at, _) in line.match_indices(marker) {
                let rest = &line[at + marker.len()..];
                let tagged = rest.strip_prefix('-').is_some_and(|rest| {
                    TODO_TAGS.iter().any(|tag| {
                        rest.strip_prefix(tag)
                            .is_some_and(|after| !after.starts_with(char::is_alphanumeric))
                    })
                });
                if !tagged {
                    untagged.push(format!("{path}:{}: {}", number + 1, line.trim()));
                }
            }
        }
    }
    assert!(
        untagged.is_empty(),
        "tag every {marker} with one of {TODO_TAGS:?} ({marker}-correctness: …): {untagged:#?}"
    );
}
