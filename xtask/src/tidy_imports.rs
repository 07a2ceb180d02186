//! Tidy check: within a crate, files do not import each other in loops, except a parent module
//! and its own child (the child using the parent's shared helpers while the parent uses the
//! child). A loop through three files means one name sits in the wrong file: the lower layer
//! reaches up for something that belongs beside it (issue 43).
//!
//! The module graph is built from the text, not from rustc, so it is an approximation:
//! - a module per `.rs` file under `src/` (`a/b.rs` and `a/b/mod.rs` are `a::b`; `lib.rs`, or
//!   `main.rs` in a crate without `lib.rs`, is the root); test files (`tests.rs`, `*_tests.rs`,
//!   anything under a `tests/` directory) and `#[cfg(test)] mod … { … }` blocks are left out,
//!   and so are comments (intra-doc links are not imports);
//! - an edge A → B for every path in A that starts with `crate::`, `super::` or `self::`, or
//!   with the name of one of A's child modules, and resolves to an item of B: the longest prefix
//!   of the path that is a file module, then followed through `pub use` re-exports (named or
//!   glob) to the module that defines the name (a definition is a `fn`/`struct`/`enum`/`trait`/
//!   `type`/`const`/`static`/`macro_rules!` of that name at the start of a line);
//! - `mod` declarations only give the tree; declaring a child is not using it.
//!
//! A loop is a strongly connected component of the graph holding an edge between two modules
//! that are not parent and child. [`LOOP_EDGES`] lists the edges that close today's loops; they
//! are left out of the graph. The list may only shrink: a test fails when a listed edge is gone
//! or no longer closes a loop. To open one, `FERRIC_CRATE=<crate> cargo test -p xtask
//! print_import_loops -- --ignored --nocapture` prints its loops with every edge in them.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use crate::tidy::workspace_root;

/// Edges (crate, from module, to module) that close an import loop today, to be opened by
/// moving the misplaced name; `mod` paths as in `use` (`""` is the crate root). The list may
/// only shrink.
const LOOP_EDGES: &[(&str, &str, &str)] = &[];

/// One crate's modules and the edges between them, each edge with the names it uses.
struct Graph {
    crate_name: String,
    modules: Vec<String>,
    files: Vec<String>,
    edges: BTreeMap<(usize, usize), BTreeSet<String>>,
}

/// Every crate of the workspace (`crates/*` and `xtask`) as a module graph.
fn graphs() -> Vec<Graph> {
    let root = workspace_root();
    let mut dirs: Vec<(String, std::path::PathBuf)> = std::fs::read_dir(root.join("crates"))
        .map(|entries| {
            entries
                .flatten()
                .map(|entry| {
                    let name = entry.file_name().to_string_lossy().into_owned();
                    (name, entry.path().join("src"))
                })
                .collect()
        })
        .unwrap_or_default();
    dirs.push(("xtask".to_owned(), root.join("xtask/src")));
    dirs.sort();
    let graphs: Vec<Graph> = dirs
        .into_iter()
        .filter(|(_, src)| src.is_dir())
        .map(|(name, src)| graph_of(&root, &name, &src))
        .collect();
    assert!(graphs.len() > 10, "only {} crates found", graphs.len());
    graphs
}

/// Whether a file under `src/` is test code, left out of the graph (and of the codemap rule).
pub(crate) fn is_test_file(relative: &str) -> bool {
    let name = relative.rsplit('/').next().unwrap_or(relative);
    relative.split('/').any(|part| part == "tests")
        || name == "tests.rs"
        || name.ends_with("_tests.rs")
}

/// The module path of a file relative to `src/` (`a/mod.rs` → `a`, `lib.rs` → ``).
fn module_path(relative: &str) -> String {
    let stem = relative.strip_suffix(".rs").unwrap_or(relative);
    let stem = stem.strip_suffix("/mod").unwrap_or(stem);
    match stem {
        "lib" | "main" => String::new(),
        _ => stem.replace('/', "::"),
    }
}

fn graph_of(root: &Path, crate_name: &str, src: &Path) -> Graph {
    let mut found = Vec::new();
    collect(src, src, &mut found);
    let has_lib = src.join("lib.rs").is_file();
    // With a lib.rs, main.rs and bin/ are crates of their own over the library.
    found.retain(|relative| {
        !is_test_file(relative)
            && !(has_lib && (relative == "main.rs" || relative.starts_with("bin/")))
    });
    found.sort();
    let modules: Vec<String> = found.iter().map(|relative| module_path(relative)).collect();
    let texts: Vec<String> = found
        .iter()
        .map(|relative| strip(&std::fs::read_to_string(src.join(relative)).unwrap_or_default()))
        .collect();
    let files = found
        .iter()
        .map(|relative| {
            src.join(relative)
                .strip_prefix(root)
                .map(|path| path.to_string_lossy().into_owned())
                .unwrap_or_else(|_| relative.clone())
        })
        .collect();
    let index: BTreeMap<&str, usize> = modules
        .iter()
        .enumerate()
        .map(|(at, module)| (module.as_str(), at))
        .collect();
    let exports: Vec<Exports> = texts.iter().map(|text| exports_of(text)).collect();
    let resolver = Resolver {
        index: &index,
        texts: &texts,
        exports: &exports,
        modules: &modules,
    };
    let mut edges: BTreeMap<(usize, usize), BTreeSet<String>> = BTreeMap::new();
    for (from, text) in texts.iter().enumerate() {
        let here: Vec<&str> = split(&modules[from]);
        let children: BTreeSet<&str> = modules
            .iter()
            .filter_map(|module| {
                let segments = split(module);
                (segments.len() == here.len() + 1 && segments.starts_with(&here))
                    .then(|| *segments.last().unwrap_or(&""))
            })
            .collect();
        for path in paths_in(text, &children) {
            let Some(absolute) = absolute(&here, &path) else {
                continue;
            };
            if let Some((to, name)) = resolver.resolve(&absolute, 0)
                && to != from
            {
                edges.entry((from, to)).or_default().insert(name);
            }
        }
    }
    Graph {
        crate_name: crate_name.to_owned(),
        modules,
        files,
        edges,
    }
}

fn collect(src: &Path, dir: &Path, found: &mut Vec<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            collect(src, &path, found);
        } else if path.extension().is_some_and(|ext| ext == "rs")
            && let Ok(relative) = path.strip_prefix(src)
        {
            found.push(relative.to_string_lossy().into_owned());
        }
    }
}

fn split(module: &str) -> Vec<&str> {
    if module.is_empty() {
        Vec::new()
    } else {
        module.split("::").collect()
    }
}

/// The text without comments and without `#[cfg(test)] mod name { … }` blocks.
fn strip(text: &str) -> String {
    let mut out = String::new();
    let mut lines = text.lines().peekable();
    while let Some(line) = lines.next() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("#[cfg(test)]") {
            // Skip the attribute and, when it guards an inline module, the whole block.
            while lines
                .peek()
                .is_some_and(|next| next.trim_start().starts_with("#["))
            {
                lines.next();
            }
            if let Some(next) = lines.peek()
                && is_inline_mod(next)
            {
                let mut depth = 0i64;
                for line in lines.by_ref() {
                    depth += line.matches('{').count() as i64 - line.matches('}').count() as i64;
                    if depth <= 0 && line.contains('}') {
                        break;
                    }
                }
            }
            continue;
        }
        if trimmed.starts_with("//") {
            continue;
        }
        let code = match line.find(" //") {
            Some(at) if !line[..at].contains('"') => &line[..at],
            _ => line,
        };
        out.push_str(code);
        out.push('\n');
    }
    out
}

fn is_inline_mod(line: &str) -> bool {
    let trimmed = line.trim();
    // `pub`, `pub(crate)`, `pub(super)`, `pub(in …)` before `mod`.
    let rest = match trimmed.strip_prefix("pub") {
        Some(after) if after.starts_with('(') => {
            after.split_once(") ").map_or(trimmed, |(_, rest)| rest)
        }
        Some(after) => after.trim_start(),
        None => trimmed,
    };
    rest.starts_with("mod ") && rest.ends_with('{')
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Every path in the code that starts with `crate`, `super`, `self` or a child module's name,
/// with `use` trees expanded (`a::{b, c::d}` → `a::b`, `a::c::d`). A path's last segment may
/// be `*` (a glob).
fn paths_in(text: &str, children: &BTreeSet<&str>) -> Vec<Vec<String>> {
    let chars: Vec<char> = text.chars().collect();
    let mut paths = Vec::new();
    let mut at = 0;
    while at < chars.len() {
        if !is_ident(chars[at]) || (at > 0 && (is_ident(chars[at - 1]) || chars[at - 1] == ':')) {
            at += 1;
            continue;
        }
        let start = at;
        while at < chars.len() && is_ident(chars[at]) {
            at += 1;
        }
        let word: String = chars[start..at].iter().collect();
        let anchored =
            matches!(word.as_str(), "crate" | "super" | "self") || children.contains(word.as_str());
        if !anchored || !chars[at..].starts_with(&[':', ':']) {
            continue;
        }
        let mut prefix = vec![word];
        let mut trees = Vec::new();
        parse_tree(&chars, &mut at, &mut prefix, &mut trees);
        paths.extend(trees);
    }
    paths
}

/// Parses `::seg::seg…` (then a `{…}` group or `*`) after `prefix`, pushing every full path.
fn parse_tree(
    chars: &[char],
    at: &mut usize,
    prefix: &mut Vec<String>,
    out: &mut Vec<Vec<String>>,
) {
    let depth = prefix.len();
    loop {
        skip_space(chars, at);
        if !chars[*at..].starts_with(&[':', ':']) {
            break;
        }
        *at += 2;
        skip_space(chars, at);
        match chars.get(*at) {
            Some('{') => {
                *at += 1;
                loop {
                    skip_space(chars, at);
                    match chars.get(*at) {
                        None => break,
                        Some('}') => {
                            *at += 1;
                            break;
                        }
                        Some(',') => *at += 1,
                        Some(_) => {
                            let mut inner = prefix.clone();
                            if !parse_segment(chars, at, &mut inner) {
                                *at += 1;
                                continue;
                            }
                            let before = out.len();
                            parse_tree(chars, at, &mut inner, out);
                            if out.len() == before {
                                out.push(inner);
                            }
                        }
                    }
                }
                prefix.truncate(depth);
                return;
            }
            Some('*') => {
                *at += 1;
                prefix.push("*".to_owned());
                break;
            }
            _ => {
                if !parse_segment(chars, at, prefix) {
                    break;
                }
            }
        }
    }
    out.push(prefix.clone());
    prefix.truncate(depth);
}

fn parse_segment(chars: &[char], at: &mut usize, path: &mut Vec<String>) -> bool {
    if chars.get(*at) == Some(&'*') {
        *at += 1;
        path.push("*".to_owned());
        return true;
    }
    let start = *at;
    while *at < chars.len() && is_ident(chars[*at]) {
        *at += 1;
    }
    if *at == start {
        return false;
    }
    path.push(chars[start..*at].iter().collect());
    true
}

fn skip_space(chars: &[char], at: &mut usize) {
    while chars.get(*at).is_some_and(|c| c.is_whitespace()) {
        *at += 1;
    }
}

/// A path made absolute (segments from the crate root), or `None` when it leaves the crate.
fn absolute(here: &[&str], path: &[String]) -> Option<Vec<String>> {
    let mut base: Vec<String> = here.iter().map(|s| (*s).to_owned()).collect();
    let mut rest = path;
    match rest.first().map(String::as_str) {
        Some("crate") => {
            base.clear();
            rest = &rest[1..];
        }
        Some("self") => rest = &rest[1..],
        Some("super") => {
            while rest.first().map(String::as_str) == Some("super") {
                base.pop()?;
                rest = &rest[1..];
            }
        }
        _ => {}
    }
    base.extend(rest.iter().filter(|segment| *segment != "self").cloned());
    Some(base)
}

/// What a module re-exports: named (`pub use a::B` → B from `a`) and globs (`pub use a::*`).
#[derive(Default)]
struct Exports {
    named: BTreeMap<String, Vec<String>>,
    globs: Vec<Vec<String>>,
}

fn exports_of(text: &str) -> Exports {
    let mut exports = Exports::default();
    for statement in text.split(';') {
        let trimmed = statement.trim_start();
        let Some(tree) = trimmed
            .strip_prefix("pub use ")
            .or_else(|| trimmed.strip_prefix("pub(crate) use "))
        else {
            continue;
        };
        let text = format!("__root::{}", tree.trim());
        let children = BTreeSet::from(["__root"]);
        for path in paths_in(&text, &children) {
            let path: Vec<String> = path.into_iter().skip(1).collect();
            match path.last().map(String::as_str) {
                Some("*") => exports.globs.push(path[..path.len() - 1].to_vec()),
                Some(name) => {
                    let name = name.to_owned();
                    exports.named.insert(name, path);
                }
                None => {}
            }
        }
    }
    exports
}

/// Whether a module's text defines `name` at the start of a line.
fn defines(text: &str, name: &str) -> bool {
    text.lines().any(|line| {
        let mut words = line
            .trim_start()
            .split(|c: char| !is_ident(c) && c != '!')
            .filter(|word| !word.is_empty());
        while let Some(word) = words.next() {
            match word {
                "fn" | "struct" | "enum" | "trait" | "type" | "static" | "macro_rules!"
                | "union" | "mod" => return words.next() == Some(name),
                "const" => {
                    let next = words.next();
                    return next == Some(name)
                        || (next == Some("fn") && words.next() == Some(name));
                }
                "pub" | "crate" | "super" | "in" | "async" | "unsafe" | "extern" => {}
                _ => return false,
            }
        }
        false
    })
}

struct Resolver<'a> {
    index: &'a BTreeMap<&'a str, usize>,
    texts: &'a [String],
    exports: &'a [Exports],
    modules: &'a [String],
}

impl Resolver<'_> {
    /// The module that defines what an absolute path names, with the name used.
    fn resolve(&self, path: &[String], depth: usize) -> Option<(usize, String)> {
        let mut found = None;
        for length in (0..=path.len()).rev() {
            let module = path[..length].join("::");
            if let Some(at) = self.index.get(module.as_str()) {
                found = Some((*at, length));
                break;
            }
        }
        let (module, length) = found?;
        let Some(name) = path.get(length).filter(|name| *name != "*") else {
            return Some((module, "*".to_owned()));
        };
        if depth > 8 || defines(&self.texts[module], name) {
            return Some((module, name.clone()));
        }
        let here: Vec<&str> = split(&self.modules[module]);
        if let Some(target) = self.exports[module].named.get(name) {
            let rest = &path[length + 1..];
            let mut target = target.clone();
            target.extend(rest.iter().cloned());
            if let Some(absolute) = absolute(&here, &with_anchor(&here, &target, self))
                && let Some(resolved) = self.resolve(&absolute, depth + 1)
            {
                return Some(resolved);
            }
        }
        for glob in &self.exports[module].globs {
            let mut target = glob.clone();
            target.extend(path[length..].iter().cloned());
            if let Some(absolute) = absolute(&here, &with_anchor(&here, &target, self))
                && let Some((to, name)) = self.resolve(&absolute, depth + 1)
                && defines(&self.texts[to], &name)
            {
                return Some((to, name));
            }
        }
        Some((module, name.clone()))
    }
}

/// A re-export's path as written (`child::X`, `crate::a::X`, `super::X`), made relative to
/// `here` when it starts with a child's name.
fn with_anchor(here: &[&str], path: &[String], resolver: &Resolver<'_>) -> Vec<String> {
    match path.first().map(String::as_str) {
        Some("crate" | "super" | "self") => path.to_vec(),
        Some(first) => {
            let mut child: Vec<&str> = here.to_vec();
            child.push(first);
            if resolver.index.contains_key(child.join("::").as_str()) {
                let mut out = vec!["self".to_owned()];
                out.extend(path.iter().cloned());
                out
            } else {
                // An outside crate (`pub use ferric_model::…`): nothing of ours.
                vec!["super".to_owned(); here.len() + 1]
            }
        }
        None => path.to_vec(),
    }
}

/// Whether `a` and `b` are a module and its direct child, either way round.
fn parent_and_child(a: &str, b: &str) -> bool {
    let is_child = |parent: &str, child: &str| {
        let (p, c) = (split(parent), split(child));
        c.len() == p.len() + 1 && c.starts_with(&p)
    };
    is_child(a, b) || is_child(b, a)
}

/// Strongly connected components (Tarjan), as lists of module indices.
fn components(count: usize, edges: &BTreeSet<(usize, usize)>) -> Vec<Vec<usize>> {
    struct State<'a> {
        next: usize,
        index: Vec<Option<usize>>,
        low: Vec<usize>,
        stack: Vec<usize>,
        on_stack: Vec<bool>,
        out: Vec<Vec<usize>>,
        edges: &'a BTreeSet<(usize, usize)>,
    }
    fn visit(state: &mut State<'_>, v: usize) {
        state.index[v] = Some(state.next);
        state.low[v] = state.next;
        state.next += 1;
        state.stack.push(v);
        state.on_stack[v] = true;
        let targets: Vec<usize> = state
            .edges
            .range((v, 0)..(v + 1, 0))
            .map(|(_, to)| *to)
            .collect();
        for w in targets {
            match state.index[w] {
                None => {
                    visit(state, w);
                    state.low[v] = state.low[v].min(state.low[w]);
                }
                Some(index) if state.on_stack[w] => state.low[v] = state.low[v].min(index),
                Some(_) => {}
            }
        }
        if Some(state.low[v]) == state.index[v] {
            let mut component = Vec::new();
            while let Some(w) = state.stack.pop() {
                state.on_stack[w] = false;
                component.push(w);
                if w == v {
                    break;
                }
            }
            component.sort();
            state.out.push(component);
        }
    }
    let mut state = State {
        next: 0,
        index: vec![None; count],
        low: vec![0; count],
        stack: Vec::new(),
        on_stack: vec![false; count],
        out: Vec::new(),
        edges,
    };
    for v in 0..count {
        if state.index[v].is_none() {
            visit(&mut state, v);
        }
    }
    state.out
}

impl Graph {
    fn edge_set(&self, skip: &BTreeSet<(usize, usize)>) -> BTreeSet<(usize, usize)> {
        self.edges
            .keys()
            .filter(|edge| !skip.contains(edge))
            .copied()
            .collect()
    }

    /// The edges inside a loop: within one component, between modules not parent and child.
    fn loop_edges(&self, skip: &BTreeSet<(usize, usize)>) -> Vec<(usize, usize)> {
        let edges = self.edge_set(skip);
        let mut component_of = vec![0; self.modules.len()];
        for (number, component) in components(self.modules.len(), &edges).iter().enumerate() {
            for module in component {
                component_of[*module] = number;
            }
        }
        edges
            .into_iter()
            .filter(|(from, to)| {
                component_of[*from] == component_of[*to]
                    && !parent_and_child(&self.modules[*from], &self.modules[*to])
            })
            .collect()
    }

    /// The files in loops (components with a loop edge), for the message.
    fn files_in_loops(&self, skip: &BTreeSet<(usize, usize)>) -> BTreeSet<usize> {
        let edges = self.edge_set(skip);
        let loops: BTreeSet<(usize, usize)> = self.loop_edges(skip).into_iter().collect();
        components(self.modules.len(), &edges)
            .into_iter()
            .filter(|component| {
                loops
                    .iter()
                    .any(|(from, _)| component.binary_search(from).is_ok())
            })
            .flatten()
            .collect()
    }

    fn index_of(&self, module: &str) -> Option<usize> {
        self.modules.iter().position(|m| m == module)
    }

    fn describe(&self, (from, to): (usize, usize)) -> String {
        let names: Vec<&str> = self.edges[&(from, to)].iter().map(String::as_str).collect();
        format!(
            "(\"{}\", \"{}\", \"{}\"), // {} -> {}: {}",
            self.crate_name,
            self.modules[from],
            self.modules[to],
            self.files[from],
            self.files[to],
            names.join(", ")
        )
    }

    /// A small set of edges whose removal opens every loop: repeatedly the loop edge that uses
    /// the fewest names (the likeliest misplaced one).
    fn closing_edges(&self, skip: &BTreeSet<(usize, usize)>) -> Vec<(usize, usize)> {
        let mut removed = skip.clone();
        let mut chosen = Vec::new();
        loop {
            let loops = self.loop_edges(&removed);
            // The edge whose removal leaves the fewest loop edges, then the one using the
            // fewest names.
            let Some(edge) = loops
                .iter()
                .min_by_key(|edge| {
                    let mut without = removed.clone();
                    without.insert(**edge);
                    (
                        self.loop_edges(&without).len(),
                        self.edges[edge].len(),
                        **edge,
                    )
                })
                .copied()
            else {
                return chosen;
            };
            removed.insert(edge);
            chosen.push(edge);
        }
    }
}

/// The allowed edges of one crate, as indices; unknown modules are reported.
fn allowed(graph: &Graph, stale: &mut Vec<String>) -> BTreeSet<(usize, usize)> {
    let mut set = BTreeSet::new();
    for (name, from, to) in LOOP_EDGES {
        if *name != graph.crate_name {
            continue;
        }
        match (graph.index_of(from), graph.index_of(to)) {
            (Some(from), Some(to)) if graph.edges.contains_key(&(from, to)) => {
                set.insert((from, to));
            }
            _ => stale.push(format!("{name}: {from} -> {to} (no such edge any more)")),
        }
    }
    set
}

#[test]
fn no_import_loop_longer_than_a_parent_and_its_child() {
    let mut failures = Vec::new();
    let mut stale = Vec::new();
    for graph in graphs() {
        let skip = allowed(&graph, &mut stale);
        // A listed edge must still close a loop (lie in one, between non-relatives).
        let full = graph.loop_edges(&BTreeSet::new());
        for edge in &skip {
            if !full.contains(edge) {
                stale.push(format!(
                    "{}: {} -> {} (closes no loop any more)",
                    graph.crate_name, graph.modules[edge.0], graph.modules[edge.1]
                ));
            }
        }
        if graph.loop_edges(&skip).is_empty() {
            continue;
        }
        let files: Vec<&str> = graph
            .files_in_loops(&skip)
            .into_iter()
            .map(|at| graph.files[at].as_str())
            .collect();
        let closing: Vec<String> = graph
            .closing_edges(&skip)
            .into_iter()
            .map(|edge| graph.describe(edge))
            .collect();
        failures.push(format!(
            "{}: {} files import each other in a loop: {files:?}\n  edges that would open it \
             (move the name to the module that uses it, or to a lower one):\n  {}",
            graph.crate_name,
            files.len(),
            closing.join("\n  ")
        ));
    }
    assert!(
        stale.is_empty(),
        "remove these from LOOP_EDGES in xtask/src/tidy_imports.rs: {stale:#?}"
    );
    assert!(
        failures.is_empty(),
        "import loops through more than a parent module and its child:\n{}",
        failures.join("\n")
    );
}

#[test]
fn the_import_parser_reads_use_trees_and_re_exports() {
    let children = BTreeSet::from(["child"]);
    let text = "use crate::{a::{B, c::D}, e};\nfn f() { super::g(); child::h(); x::y(); }";
    let paths: Vec<String> = paths_in(text, &children)
        .into_iter()
        .map(|path| path.join("::"))
        .collect();
    assert_eq!(
        paths,
        [
            "crate::a::B",
            "crate::a::c::D",
            "crate::e",
            "super::g",
            "child::h"
        ]
    );
    let exports = exports_of("pub use child::{X, Y};\npub use other::*;\n");
    assert_eq!(exports.named["X"], ["child", "X"]);
    assert_eq!(exports.globs, [vec!["other".to_owned()]]);
    assert!(defines("pub(crate) async fn run() {}", "run"));
    assert!(defines("pub const fn limit() {}", "limit"));
    assert!(!defines("let run = 1;", "run"));
    let stripped = strip(
        "use a;\n// use crate::x;\n#[cfg(test)]\nmod tests {\n    use super::*;\n}\nuse b;\n",
    );
    assert_eq!(stripped, "use a;\nuse b;\n");
    let stripped = strip("#[cfg(test)]\npub(super) mod tests {\n    use super::*;\n}\nuse b;\n");
    assert_eq!(stripped, "use b;\n");
}

/// Prints one crate's loops with every edge inside them, for opening them by hand:
/// `FERRIC_CRATE=ferric-drivers cargo test -p xtask print_import_loops -- --ignored --nocapture`.
#[test]
#[ignore = "a tool: prints a crate's import loops"]
fn print_import_loops() {
    let wanted = std::env::var("FERRIC_CRATE").unwrap_or_default();
    for graph in graphs()
        .into_iter()
        .filter(|graph| graph.crate_name == wanted)
    {
        let edges = graph.edge_set(&BTreeSet::new());
        for component in components(graph.modules.len(), &edges) {
            if component.len() < 2 {
                continue;
            }
            println!("component of {} modules:", component.len());
            for edge in edges.iter().filter(|(from, to)| {
                component.binary_search(from).is_ok() && component.binary_search(to).is_ok()
            }) {
                println!("  {}", graph.describe(*edge));
            }
        }
    }
}
