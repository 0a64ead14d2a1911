//! The problems an edit introduced, as the editor's language servers see them: asked of the
//! editor before a change (what is there already) and after it (once the servers caught
//! up), and the new ones told to the model with the tool's result.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::{Need, ToolContext};
use crate::editor::{Problem, Severity};

/// How long the editor may wait for its language servers after a change.
pub const WAIT: Duration = Duration::from_millis(1500);
/// The most errors, and warnings, one result lists.
const MAX_ERRORS: usize = 20;
const MAX_WARNINGS: usize = 5;

/// What the files a call is about to change hold already (`None`: nothing to compare with).
pub async fn before(ctx: &ToolContext, needs: &[Need]) -> Option<Vec<Problem>> {
    if !ctx.editor.reports_problems() {
        return None;
    }
    let paths: Vec<PathBuf> = needs
        .iter()
        .flat_map(|n| n.request.changes.iter().map(|c| c.path.clone()))
        .collect();
    if paths.is_empty() {
        return None;
    }
    Some(
        ctx.editor
            .problems(&paths, Duration::ZERO)
            .await
            .unwrap_or_default(),
    )
}

/// The note for the model on what the change to `changed` introduced, if anything.
pub async fn after(ctx: &ToolContext, before: &[Problem], changed: &[PathBuf]) -> Option<String> {
    if changed.is_empty() {
        return None;
    }
    let now = ctx.editor.problems(changed, WAIT).await?;
    report(&introduced(before, &now), ctx.boundary.root())
}

/// The problems of `after` that `before` did not have. Lines move with an edit, so a
/// problem is the same when its file, severity, source, code and message are; each one
/// before accounts for one after.
pub fn introduced(before: &[Problem], after: &[Problem]) -> Vec<Problem> {
    let mut seen: HashMap<Key, usize> = HashMap::new();
    for p in before {
        *seen.entry(key(p)).or_default() += 1;
    }
    after
        .iter()
        .filter(|p| match seen.get_mut(&key(p)) {
            Some(n) if *n > 0 => {
                *n -= 1;
                false
            }
            _ => true,
        })
        .cloned()
        .collect()
}

type Key<'a> = (
    &'a Path,
    Severity,
    &'a str,
    Option<&'a str>,
    Option<&'a str>,
);

fn key(p: &Problem) -> Key<'_> {
    (
        &p.path,
        p.severity,
        p.message.as_str(),
        p.source.as_deref(),
        p.code.as_deref(),
    )
}

/// Errors, then warnings (each capped), as `path:line:col: severity: message [source code]`.
pub fn report(new: &[Problem], root: &Path) -> Option<String> {
    let of = |s: Severity| new.iter().filter(move |p| p.severity == s);
    let (errors, warnings) = (of(Severity::Error).count(), of(Severity::Warning).count());
    if errors + warnings == 0 {
        return None;
    }
    let mut lines = vec![format!(
        "The editor's language servers report {} after this change:",
        counted(errors, warnings)
    )];
    for (severity, cap) in [
        (Severity::Error, MAX_ERRORS),
        (Severity::Warning, MAX_WARNINGS),
    ] {
        lines.extend(of(severity).take(cap).map(|p| line(p, root)));
        let n = of(severity).count();
        if n > cap {
            lines.push(format!("({} more {}s not shown)", n - cap, severity.name()));
        }
    }
    Some(lines.join("\n"))
}

fn counted(errors: usize, warnings: usize) -> String {
    let n = |k: usize, what: &str| format!("{k} new {what}{}", if k == 1 { "" } else { "s" });
    match (errors, warnings) {
        (e, 0) => n(e, "error"),
        (0, w) => n(w, "warning"),
        (e, w) => format!("{} and {}", n(e, "error"), n(w, "warning")),
    }
}

fn line(p: &Problem, root: &Path) -> String {
    let path = p.path.strip_prefix(root).unwrap_or(&p.path).display();
    let by = match (&p.source, &p.code) {
        (Some(s), Some(c)) => format!(" [{s} {c}]"),
        (Some(s), None) => format!(" [{s}]"),
        (None, Some(c)) => format!(" [{c}]"),
        (None, None) => String::new(),
    };
    // A message may span lines (rustc's notes): one line each in the list.
    let message = p.message.lines().collect::<Vec<_>>().join(" / ");
    format!(
        "{path}:{}:{}: {}: {message}{by}",
        p.line,
        p.column,
        p.severity.name()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problem(line: u32, severity: Severity, message: &str) -> Problem {
        Problem {
            path: "/w/src/lib.rs".into(),
            line,
            column: 5,
            severity,
            message: message.into(),
            source: Some("rustc".into()),
            code: None,
        }
    }

    #[test]
    fn only_problems_the_change_brought_count_even_when_lines_moved() {
        let before = vec![problem(3, Severity::Warning, "unused variable `x`")];
        let after = vec![
            problem(5, Severity::Warning, "unused variable `x`"),
            problem(2, Severity::Error, "mismatched types"),
            problem(9, Severity::Error, "mismatched types"),
        ];
        let new = introduced(&before, &after);
        assert_eq!(new, vec![after[1].clone(), after[2].clone()]);
        let note = report(&new, Path::new("/w")).unwrap();
        assert_eq!(
            note,
            "The editor's language servers report 2 new errors after this change:\n\
             src/lib.rs:2:5: error: mismatched types [rustc]\n\
             src/lib.rs:9:5: error: mismatched types [rustc]"
        );
    }

    #[test]
    fn hints_alone_say_nothing_and_long_lists_are_capped() {
        assert_eq!(
            report(&[problem(1, Severity::Hint, "style")], Path::new("/w")),
            None
        );
        let many: Vec<Problem> = (1..=30)
            .map(|i| problem(i, Severity::Error, &format!("e{i}")))
            .chain([problem(40, Severity::Warning, "w")])
            .collect();
        let note = report(&many, Path::new("/w")).unwrap();
        assert!(
            note.starts_with(
                "The editor's language servers report 30 new errors and 1 new warning"
            )
        );
        assert!(note.contains("(10 more errors not shown)"), "{note}");
        assert!(
            note.ends_with("src/lib.rs:40:5: warning: w [rustc]"),
            "{note}"
        );
    }
}
