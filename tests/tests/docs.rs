//! The project's documents stay true to the repository. Every `*.md` under `docs/` names files
//! and functions as backticked references; each repo path (a file ending in one of
//! [`EXTENSIONS`], or a folder ending in `/`) must exist, and each `path/to/file.rs::name` must be
//! a `fn name` in that file. Neither the documents nor `README.md` may point outside the
//! repository: the project's reasoning lives in it. Failures name the document, the line, the
//! reference and what is missing, all of them at once.

use std::path::{Component, Path, PathBuf};

/// The endings that make a backticked token a reference to a repository file.
const EXTENSIONS: &[&str] = &[".rs", ".proto", ".toml", ".md", ".yaml", ".sh", ".py"];

/// Text that points outside the repository: the workspace's shared folder, absolute paths
/// into it, and the design file that lived there (`docs/design.md` is the repository's own,
/// and its lower-case name does not match).
const OUTSIDE: &[&str] = &["../shared", "/work/", "DESIGN.md"];

/// The repository root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate lives in the repository")
        .to_path_buf()
}

/// A document: its repo-relative name and its text.
struct Doc {
    name: String,
    text: String,
}

/// Every `*.md` under `docs/`, in name order.
fn docs() -> Vec<Doc> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        let entries =
            std::fs::read_dir(dir).unwrap_or_else(|e| panic!("cannot read {}: {e}", dir.display()));
        for entry in entries {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "md") {
                out.push(path);
            }
        }
    }
    let root = root();
    let mut paths = Vec::new();
    walk(&root.join("docs"), &mut paths);
    paths.sort();
    let docs: Vec<Doc> = paths
        .into_iter()
        .map(|path| Doc {
            name: relative(&root, &path),
            text: std::fs::read_to_string(&path)
                .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display())),
        })
        .collect();
    for expected in ["docs/design.md", "docs/architecture.md"] {
        assert!(
            docs.iter().any(|d| d.name == expected),
            "{expected} is missing"
        );
    }
    docs
}

fn relative(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .to_string_lossy()
        .replace('\\', "/")
}

/// One backticked span and the line (from 1) it is on.
struct Span<'a> {
    line: usize,
    text: &'a str,
}

/// The backticked spans of `doc` outside fenced code blocks. A line with an odd number of
/// backticks is a problem: a reference split over two lines would escape the checks.
fn spans<'a>(doc: &'a Doc, problems: &mut Vec<String>) -> Vec<Span<'a>> {
    let mut out = Vec::new();
    let mut fenced = false;
    for (i, line) in doc.text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if fenced {
            continue;
        }
        let pieces: Vec<&str> = line.split('`').collect();
        if pieces.len().is_multiple_of(2) {
            problems.push(format!(
                "{}:{}: unbalanced backticks (keep each `reference` on one line)",
                doc.name,
                i + 1
            ));
            continue;
        }
        out.extend(
            pieces
                .iter()
                .skip(1)
                .step_by(2)
                .map(|text| Span { line: i + 1, text }),
        );
    }
    out
}

/// What a backticked span refers to, if anything the test can check.
enum Reference<'a> {
    /// A file or (ending in `/`) a folder of the repository.
    Path(&'a str),
    /// `file::name`: a function `name` defined in `file`.
    Function { file: &'a str, name: &'a str },
}

fn path_like(s: &str) -> bool {
    !s.is_empty()
        && s.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-' | '/'))
}

/// A file name with something before its extension (`.hadolint.yaml` counts, `.rs` does not).
fn names_a_file(s: &str) -> bool {
    let file = s.rsplit('/').next().unwrap_or(s);
    EXTENSIONS
        .iter()
        .any(|ext| file.len() > ext.len() && file.ends_with(ext))
}

fn reference(span: &str) -> Option<Reference<'_>> {
    if let Some((file, name)) = span.split_once("::") {
        // `crate::outlier`, `rollcall_api::policy::PoolPolicy`: module paths, not references.
        return (path_like(file) && file.ends_with(".rs") && names_a_file(file))
            .then_some(Reference::Function { file, name });
    }
    let folder = span.len() > 1 && span.ends_with('/');
    (path_like(span) && (folder || names_a_file(span))).then_some(Reference::Path(span))
}

/// Why `path` is not a path inside the repository, if it is not.
fn outside(path: &str) -> Option<&'static str> {
    if path.starts_with('/') {
        Some("is absolute; write it relative to the repository root")
    } else if Path::new(path)
        .components()
        .any(|c| matches!(c, Component::ParentDir))
    {
        Some("climbs with `..`; write it relative to the repository root")
    } else {
        None
    }
}

fn identifier(name: &str) -> bool {
    name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && name.chars().next().is_some_and(|c| !c.is_ascii_digit())
}

/// Whether `source` defines `fn name` (as a whole word: `fn new` is not `fn new_stream`).
fn defines_fn(source: &str, name: &str) -> bool {
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let needle = format!("fn {name}");
    source.match_indices(&needle).any(|(at, _)| {
        let before = source[..at].chars().next_back();
        let after = source[at + needle.len()..].chars().next();
        !before.is_some_and(word) && !after.is_some_and(word)
    })
}

#[test]
fn every_path_the_docs_name_exists() {
    let root = root();
    let mut problems = Vec::new();
    let mut checked = 0;
    for doc in docs() {
        for span in spans(&doc, &mut problems) {
            let path = match reference(span.text) {
                Some(Reference::Path(path)) => path,
                Some(Reference::Function { file, .. }) => file,
                None => continue,
            };
            checked += 1;
            let at = format!("{}:{}: `{}`", doc.name, span.line, span.text);
            if let Some(why) = outside(path) {
                problems.push(format!("{at} {why}"));
            } else if path.ends_with('/') {
                if !root.join(path).is_dir() {
                    problems.push(format!("{at}: there is no folder {path} in the repository"));
                }
            } else if !root.join(path).is_file() {
                problems.push(format!("{at}: there is no file {path} in the repository"));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "the docs name what does not exist:\n{}",
        problems.join("\n")
    );
    assert!(checked > 0, "no references found: is the parser broken?");
}

#[test]
fn every_function_the_docs_name_is_defined_in_its_file() {
    let root = root();
    let mut problems = Vec::new();
    let mut checked = 0;
    for doc in docs() {
        for span in spans(&doc, &mut Vec::new()) {
            let Some(Reference::Function { file, name }) = reference(span.text) else {
                continue;
            };
            checked += 1;
            let at = format!("{}:{}: `{}`", doc.name, span.line, span.text);
            if !identifier(name) {
                problems.push(format!(
                    "{at}: write `{file}::NAME` with the function's name only (no module path, \
                     no parentheses)"
                ));
                continue;
            }
            if outside(file).is_some() {
                continue; // Reported by `every_path_the_docs_name_exists`.
            }
            match std::fs::read_to_string(root.join(file)) {
                Ok(source) if defines_fn(&source, name) => {}
                Ok(_) => problems.push(format!("{at}: {file} has no `fn {name}`")),
                Err(e) => problems.push(format!("{at}: cannot read {file}: {e}")),
            }
        }
    }
    assert!(
        problems.is_empty(),
        "the docs name functions that do not exist:\n{}",
        problems.join("\n")
    );
    assert!(
        checked > 0,
        "no function references found: is the parser broken?"
    );
}

/// The targets of the Markdown links `[text](target)` on `line`.
fn link_targets(line: &str) -> impl Iterator<Item = &str> {
    line.match_indices("](").filter_map(|(at, _)| {
        let rest = &line[at + 2..];
        rest.find(')').map(|end| rest[..end].trim())
    })
}

/// Whether a relative link `target` in the document `doc` (repo-relative) leaves the repository.
fn link_escapes(doc: &str, target: &str) -> bool {
    let target = target.split(['#', ' ']).next().unwrap_or("");
    if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
        return false;
    }
    if target.starts_with('/') {
        return true;
    }
    let mut depth: i32 = doc.matches('/').count() as i32;
    for part in target.split('/') {
        match part {
            ".." => depth -= 1,
            "" | "." => {}
            _ => depth += 1,
        }
        if depth < 0 {
            return true;
        }
    }
    false
}

#[test]
fn the_docs_and_readme_link_nothing_outside_the_repository() {
    let root = root();
    let mut files: Vec<Doc> = docs();
    files.push(Doc {
        name: "README.md".into(),
        text: std::fs::read_to_string(root.join("README.md")).expect("README.md is readable"),
    });
    let mut problems = Vec::new();
    for doc in &files {
        for (i, line) in doc.text.lines().enumerate() {
            for needle in OUTSIDE.iter().filter(|n| line.contains(**n)) {
                problems.push(format!(
                    "{}:{}: mentions `{needle}`, which is outside the repository (cite a file \
                     in it, such as docs/design.md)",
                    doc.name,
                    i + 1
                ));
            }
            for target in link_targets(line).filter(|t| link_escapes(&doc.name, t)) {
                problems.push(format!(
                    "{}:{}: links to `{target}`, outside the repository",
                    doc.name,
                    i + 1
                ));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "documents point outside the repository:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_reference_parser_tells_paths_functions_and_prose_apart() {
    assert!(matches!(
        reference("dataplane/src/proxy/forward.rs"),
        Some(Reference::Path(_))
    ));
    assert!(matches!(
        reference("controller/src/status/"),
        Some(Reference::Path(_))
    ));
    assert!(matches!(
        reference("dataplane/src/proxy/forward.rs::forward"),
        Some(Reference::Function {
            name: "forward",
            ..
        })
    ));
    for prose in [
        "crate::outlier",
        "5xx",
        "/endpoints",
        "namespace/name",
        ".rs",
        "a b.rs",
    ] {
        assert!(reference(prose).is_none(), "{prose}");
    }
    assert!(defines_fn("pub fn new_stream() {}\nfn new(x: u8)", "new"));
    assert!(!defines_fn("pub fn new_stream() {}", "new"));
    assert!(!defines_fn("fn renew() {}", "new"));
    assert!(link_escapes("docs/design.md", "../../shared/DESIGN.md"));
    assert!(!link_escapes("docs/design.md", "../README.md"));
    assert!(!link_escapes("README.md", "devcluster/README.md#what"));
    assert!(outside("../x.rs").is_some() && outside("/abs/x.rs").is_some());
}
