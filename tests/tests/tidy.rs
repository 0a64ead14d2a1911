//! The house rules that a reviewer would otherwise check by eye: short functions in the
//! loop and the editor surface, typed errors in the core layers, no persistence error
//! dropped, and the bridge building typed protocol values.

use std::path::{Path, PathBuf};

use agent_lsp_tests::process::repo_root;
use syn::spanned::Spanned;
use syn::visit::Visit;

/// The longest a function in `server/src/agent` or `server/src/lsp` may be.
const MAX_FN_LINES: usize = 80;

fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            out.extend(rust_files(&path));
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
    out.sort();
    out
}

fn server_dir(sub: &str) -> PathBuf {
    repo_root().join("server/src").join(sub)
}

struct LongFns<'a> {
    file: &'a Path,
    found: Vec<String>,
}

impl LongFns<'_> {
    fn check(&mut self, name: &syn::Ident, span: proc_macro2::Span) {
        let lines = span.end().line - span.start().line + 1;
        if lines > MAX_FN_LINES {
            self.found.push(format!(
                "{}:{} {name} is {lines} lines",
                self.file.display(),
                span.start().line
            ));
        }
    }
}

impl<'ast> Visit<'ast> for LongFns<'_> {
    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        self.check(&f.sig.ident, f.span());
        syn::visit::visit_item_fn(self, f);
    }

    fn visit_impl_item_fn(&mut self, f: &'ast syn::ImplItemFn) {
        self.check(&f.sig.ident, f.span());
        syn::visit::visit_impl_item_fn(self, f);
    }
}

#[test]
fn no_function_in_the_loop_or_the_editor_surface_is_over_80_lines() {
    let mut found = Vec::new();
    for dir in ["agent", "lsp"] {
        for file in rust_files(&server_dir(dir)) {
            // Tests read as scripts; their length is not the core's.
            if file.file_name().is_some_and(|n| n == "tests.rs") {
                continue;
            }
            let text = std::fs::read_to_string(&file).unwrap();
            let ast = syn::parse_file(&text).unwrap();
            let mut v = LongFns {
                file: &file,
                found: Vec::new(),
            };
            v.visit_file(&ast);
            found.extend(v.found);
        }
    }
    assert!(
        found.is_empty(),
        "functions over {MAX_FN_LINES} lines:\n{}",
        found.join("\n")
    );
}

fn lines_matching(dirs: &[&str], pattern: &str) -> Vec<String> {
    let re = regex::Regex::new(pattern).unwrap();
    let mut found = Vec::new();
    for dir in dirs {
        for file in rust_files(&server_dir(dir)) {
            let text = std::fs::read_to_string(&file).unwrap();
            for (i, line) in text.lines().enumerate() {
                if re.is_match(line) {
                    found.push(format!("{}:{}: {}", file.display(), i + 1, line.trim()));
                }
            }
        }
    }
    found
}

#[test]
fn the_core_layers_have_typed_errors() {
    let found = lines_matching(
        &[
            "agent",
            "lsp",
            "store",
            "snapshot",
            "facts",
            "knowledge",
            "journal",
        ],
        r"Result<[^;{]*,\s*String>",
    );
    assert!(
        found.is_empty(),
        "Result<_, String> in a core layer:\n{}",
        found.join("\n")
    );
}

#[test]
fn no_persistence_error_is_dropped() {
    let found = lines_matching(&["."], r"let _\w* = .*\b(append|append_all)\(");
    assert!(
        found.is_empty(),
        "an append whose error is dropped:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_bridge_builds_typed_protocol_values() {
    let found = lines_matching(&["lsp"], r"json!")
        .into_iter()
        .filter(|l| l.contains("bridge.rs") || l.contains("coalescer.rs"))
        .collect::<Vec<_>>();
    assert!(
        found.is_empty(),
        "hand-built JSON in the bridge:\n{}",
        found.join("\n")
    );
}
