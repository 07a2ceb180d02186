//! Tidy checks that keep ARCHITECTURE.md a true map (issue 43): every module is named in it, and
//! every repository path it names exists. The rules are stated in the page's introduction:
//! - a crate's section is the part under a `##` or `###` heading that names the crate's
//!   directory in backticks (`crates/ferric-db`, `xtask`; one heading may name several), up to
//!   the next such heading. Each module file of the crate (every `.rs` file under its `src/`
//!   but test files: under a `tests/` directory, `tests.rs`, `*_tests.rs`) must appear in it as
//!   its path under `src/`, or as its bare file name when no other module of the crate has the
//!   same one. A name counts where it does not continue a longer path or word (`raid.rs` inside
//!   `redfish/raid.rs` names only the latter);
//! - a backticked span made only of path characters (letters, digits, `_ . / -`, after an
//!   optional `#fragment` is cut) names a repository path when it contains a `/` (and neither
//!   starts with one nor holds `//`) or ends in `.rs`, `.md`, `.toml` or `.sh` after a non-empty
//!   stem. With a `/` it must exist from the root, from `crates/`, or from the directory or the
//!   `src/` of a crate its section names; a bare file name must exist somewhere under the
//!   section's crates (anywhere in the repository outside crate sections).

use std::path::{Path, PathBuf};

use crate::tidy::workspace_root;
use crate::tidy_imports::is_test_file;

/// The extensions that make a bare backticked name a file path.
const FILE_EXTENSIONS: &[&str] = &[".rs", ".md", ".toml", ".sh"];

/// One section of ARCHITECTURE.md with the crate directories its heading names.
struct Section {
    heading: String,
    crates: Vec<String>,
    text: String,
}

fn architecture() -> String {
    std::fs::read_to_string(workspace_root().join("ARCHITECTURE.md"))
        .expect("ARCHITECTURE.md is readable")
}

/// Backticked spans of a text.
fn spans(text: &str) -> Vec<&str> {
    text.split('`').skip(1).step_by(2).collect()
}

/// The page cut at every `##`/`###` heading; a section's crates are the crate directories
/// (holding a `Cargo.toml`) its heading names.
fn sections(page: &str) -> Vec<Section> {
    let root = workspace_root();
    let mut out = vec![Section {
        heading: String::new(),
        crates: Vec::new(),
        text: String::new(),
    }];
    for line in page.lines() {
        if line.starts_with("## ") || line.starts_with("### ") {
            let crates = spans(line)
                .into_iter()
                .filter(|span| root.join(span).join("Cargo.toml").is_file())
                .map(str::to_owned)
                .collect();
            out.push(Section {
                heading: line.to_owned(),
                crates,
                text: String::new(),
            });
        } else if let Some(section) = out.last_mut() {
            section.text.push_str(line);
            section.text.push('\n');
        }
    }
    out
}

/// Every module file of a crate, relative to its `src/`.
fn modules(crate_dir: &Path) -> Vec<String> {
    let src = crate_dir.join("src");
    let mut found = Vec::new();
    walk(&src, &src, &mut found);
    found.retain(|relative| relative.ends_with(".rs") && !is_test_file(relative));
    found.sort();
    found
}

/// Every file and directory below `dir`, relative to `base`, skipping build output.
fn walk(base: &Path, dir: &Path, found: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if name == "target" || name.starts_with('.') && name != ".ci" && name != ".config" {
            continue;
        }
        if let Ok(relative) = path.strip_prefix(base) {
            found.push(relative.to_string_lossy().into_owned());
        }
        if path.is_dir() {
            walk(base, &path, found);
        }
    }
}

fn is_path_char(c: char) -> bool {
    c.is_alphanumeric() || matches!(c, '_' | '.' | '/' | '-')
}

/// Whether `text` names `name` where it does not continue a longer path or word.
fn names(text: &str, name: &str) -> bool {
    text.match_indices(name).any(|(at, _)| {
        let before = text[..at].chars().next_back();
        let after = text[at + name.len()..].chars().next();
        !before.is_some_and(is_path_char)
            && !after.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == '/')
    })
}

#[test]
fn every_module_is_named_in_the_architecture_page() {
    let root = workspace_root();
    let page = architecture();
    let sections = sections(&page);
    let mut crate_dirs: Vec<String> = std::fs::read_dir(root.join("crates"))
        .map(|entries| {
            entries
                .flatten()
                .filter(|entry| entry.path().join("src").is_dir())
                .map(|entry| format!("crates/{}", entry.file_name().to_string_lossy()))
                .collect()
        })
        .unwrap_or_default();
    crate_dirs.push("xtask".to_owned());
    crate_dirs.sort();
    let mut unnamed = Vec::new();
    let mut without_section = Vec::new();
    for crate_dir in &crate_dirs {
        let text: String = sections
            .iter()
            .filter(|section| section.crates.contains(crate_dir))
            .map(|section| section.text.as_str())
            .collect();
        if text.is_empty() {
            without_section.push(crate_dir.clone());
            continue;
        }
        let modules = modules(&root.join(crate_dir));
        for module in &modules {
            let file_name = module.rsplit('/').next().unwrap_or(module);
            let unique = modules
                .iter()
                .filter(|other| other.rsplit('/').next() == Some(file_name))
                .count()
                == 1;
            let named = names(&text, module) || (unique && names(&text, file_name));
            if !named {
                unnamed.push(format!("{crate_dir}/src/{module}"));
            }
        }
    }
    assert!(
        without_section.is_empty(),
        "these crates have no `### `crates/NAME`` section in ARCHITECTURE.md: {without_section:#?}"
    );
    assert!(
        unnamed.is_empty(),
        "ARCHITECTURE.md does not name these modules in their crate's section (by their path \
         under src/, or by file name when that is unique in the crate); add each to its \
         crate's entry, with what it is for: {unnamed:#?}"
    );
}

/// The backticked spans of a section that name a repository path, without their fragment.
fn named_paths(text: &str) -> Vec<String> {
    spans(text)
        .into_iter()
        .map(|span| span.split('#').next().unwrap_or(span))
        .filter(|span| !span.is_empty() && span.chars().all(is_path_char))
        .filter(|span| {
            let file_name = span
                .trim_end_matches('/')
                .rsplit('/')
                .next()
                .unwrap_or(span);
            let is_file = FILE_EXTENSIONS.iter().any(|extension| {
                file_name
                    .strip_suffix(extension)
                    .is_some_and(|stem| !stem.is_empty())
            });
            (span.contains('/') && !span.starts_with('/') && !span.contains("//")) || is_file
        })
        .map(str::to_owned)
        .collect()
}

#[test]
fn every_path_the_architecture_page_names_exists() {
    let root = workspace_root();
    let mut everything = Vec::new();
    walk(&root, &root, &mut everything);
    let mut missing = Vec::new();
    for section in sections(&architecture()) {
        for path in named_paths(&section.text) {
            let trimmed = path.trim_end_matches('/');
            let found = if path.contains('/') {
                let mut bases: Vec<PathBuf> = vec![root.clone(), root.join("crates")];
                for crate_dir in &section.crates {
                    bases.push(root.join(crate_dir));
                    bases.push(root.join(crate_dir).join("src"));
                }
                bases.iter().any(|base| base.join(trimmed).exists())
            } else {
                let suffix = format!("/{trimmed}");
                everything.iter().any(|relative| {
                    let relative = format!("/{relative}");
                    relative.ends_with(&suffix)
                        && (section.crates.is_empty()
                            || section
                                .crates
                                .iter()
                                .any(|crate_dir| relative.starts_with(&format!("/{crate_dir}/"))))
                })
            };
            if !found {
                missing.push(format!("{path} (in {:?})", section.heading));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "ARCHITECTURE.md names paths that do not exist (renamed or removed? fix the page): \
         {missing:#?}"
    );
}

#[test]
fn the_codemap_rules_read_names_and_paths_as_the_page_states() {
    assert!(names("`raid.rs` and `redfish/raid.rs`", "raid.rs"));
    assert!(!names("only `redfish/raid.rs`", "raid.rs"));
    assert!(names("only `redfish/raid.rs`", "redfish/raid.rs"));
    assert!(!names("`raid.rsx`", "raid.rs"));
    let paths = named_paths(
        "`docs/lab.md#up` `/v1/nodes` `.rs` `tcp://HOST` `GET /v1` `lib.rs` `v1/` `a*b/c` `x`",
    );
    assert_eq!(paths, ["docs/lab.md", "lib.rs", "v1/"]);
}
