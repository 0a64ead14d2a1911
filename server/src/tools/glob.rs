//! `glob`: files matching a pattern, newest first, honouring .gitignore.

use std::path::PathBuf;
use std::time::SystemTime;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::{Need, Prepared, ToolContext, ToolError, ToolOutput, TypedTool};
use crate::editor::PermissionRequest;
use crate::permission::boundary::Resolved;

pub const MAX_RESULTS: usize = 100;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Args {
    /// A glob such as `**/*.rs` or `src/**/mod.rs`. A pattern without `/` matches file names
    /// in every folder.
    pub pattern: String,
    /// The folder to search (default: the workspace root).
    #[serde(default)]
    pub path: Option<String>,
}

pub struct Glob;

/// The permission a search rooted at `display` needs.
pub fn search_need(key: &str, tool: &str, display: &str, what: &str) -> Need {
    Need {
        request: PermissionRequest {
            permission: key.into(),
            tool: tool.into(),
            title: format!("{tool} {what} in {display}"),
            patterns: vec![display.to_string()],
            always: vec!["*".into()],
            ..Default::default()
        },
    }
}

/// A walker over `root` that honours .gitignore, .ignore and git's excludes, shows hidden
/// files, never enters `.git`, and never follows symlinks.
pub fn walker(root: &std::path::Path) -> ignore::WalkBuilder {
    let mut b = ignore::WalkBuilder::new(root);
    b.hidden(false)
        .follow_links(false)
        .require_git(false)
        .filter_entry(|e| e.file_name() != ".git");
    b
}

/// Resolves a search root (default: the workspace) and the permission the search needs.
pub fn search_root(
    ctx: &ToolContext,
    path: Option<&str>,
    key: &str,
    tool: &str,
    what: &str,
) -> Result<(Resolved, String, Vec<Need>), ToolError> {
    let mut needs = Vec::new();
    let root = ctx.resolve(path.unwrap_or("."), true, &mut needs, tool)?;
    let display = ctx.display(&root);
    needs.push(search_need(key, tool, &display, what));
    Ok((root, display, needs))
}

pub fn matcher(pattern: &str) -> Result<(globset::GlobMatcher, bool), ToolError> {
    let has_slash = pattern.contains('/');
    let glob = globset::GlobBuilder::new(pattern)
        .literal_separator(has_slash)
        .build()
        .map_err(|e| ToolError::new(format!("invalid glob {pattern:?}: {e}")))?;
    Ok((glob.compile_matcher(), has_slash))
}

impl TypedTool for Glob {
    type Args = Args;
    const NAME: &'static str = "glob";
    const READ_ONLY: bool = true;

    fn description(&self, _: &ToolContext) -> String {
        format!(
            "Finds files by name pattern (e.g. `**/*.rs`), newest first, at most {MAX_RESULTS}. \
             Files ignored by .gitignore are skipped. Use it to \
             find files; use `grep` to find what is in them."
        )
    }

    fn prepare(&self, args: Args, ctx: &ToolContext) -> Result<Prepared, ToolError> {
        let (root, display, needs) =
            search_root(ctx, args.path.as_deref(), "glob", Self::NAME, &args.pattern)?;
        let (glob, by_path) = matcher(&args.pattern)?;
        Ok(Prepared::new(needs, move |ctx| {
            Box::pin(async move {
                if !root.real.is_dir() {
                    return Err(ToolError::new(format!("{display} is not a folder")));
                }
                let base = root.real.clone();
                let mut found: Vec<(SystemTime, PathBuf)> = Vec::new();
                for entry in walker(&base).build().flatten() {
                    if !entry
                        .file_type()
                        .is_some_and(|t| t.is_file() || t.is_symlink())
                    {
                        continue;
                    }
                    let rel = entry.path().strip_prefix(&base).unwrap_or(entry.path());
                    let hit = if by_path {
                        glob.is_match(rel)
                    } else {
                        glob.is_match(entry.file_name())
                    };
                    if hit {
                        let mtime = entry
                            .metadata()
                            .ok()
                            .and_then(|m| m.modified().ok())
                            .unwrap_or(SystemTime::UNIX_EPOCH);
                        found.push((mtime, entry.path().to_path_buf()));
                    }
                }
                found.sort_by(|a, b| b.0.cmp(&a.0).then_with(|| a.1.cmp(&b.1)));
                let total = found.len();
                let shown: Vec<String> = found
                    .iter()
                    .take(MAX_RESULTS)
                    .map(|(_, p)| show_path(ctx, &root.path, &base, p))
                    .collect();
                let mut output = if shown.is_empty() {
                    "No files found".to_string()
                } else {
                    shown.join("\n")
                };
                if total > MAX_RESULTS {
                    output.push_str(&format!(
                        "\n({} more not shown; narrow the pattern or the path)",
                        total - MAX_RESULTS
                    ));
                }
                Ok(ToolOutput {
                    title: format!("{} in {display}", args.pattern),
                    output,
                    metadata: json!({"count": total}),
                    ..Default::default()
                })
            })
        }))
    }
}

/// A found path as the model should see it: relative to the workspace when inside.
pub fn show_path(
    ctx: &ToolContext,
    lexical_root: &std::path::Path,
    real_root: &std::path::Path,
    p: &std::path::Path,
) -> String {
    let rel = p.strip_prefix(real_root).unwrap_or(p);
    let lexical = lexical_root.join(rel);
    match lexical.strip_prefix(ctx.boundary.root()) {
        Ok(inside) => inside.to_string_lossy().into_owned(),
        Err(_) => lexical.to_string_lossy().into_owned(),
    }
}
