//! `grep`: regex search over files with ripgrep's own crates (no subprocess).

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::SystemTime;

use grep_regex::RegexMatcherBuilder;
use grep_searcher::sinks::UTF8;
use grep_searcher::{BinaryDetection, SearcherBuilder};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::glob::{matcher, search_root, show_path, walker};
use super::{Prepared, ToolContext, ToolError, ToolOutput, TypedTool};

pub const MAX_MATCHES: usize = 100;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Args {
    /// A regular expression (Rust regex syntax).
    pub pattern: String,
    /// The folder (or file) to search (default: the workspace root).
    #[serde(default)]
    pub path: Option<String>,
    /// Only files whose name matches this glob, e.g. `*.rs` or `*.{ts,tsx}`.
    #[serde(default)]
    pub include: Option<String>,
}

pub struct Grep;

struct Hit {
    mtime: SystemTime,
    path: PathBuf,
    line: u64,
    text: String,
}

/// Searches every file under `base` in parallel.
fn search(
    base: &std::path::Path,
    regex: &grep_regex::RegexMatcher,
    include: Option<&(globset::GlobMatcher, bool)>,
) -> Vec<Hit> {
    let hits: Mutex<Vec<Hit>> = Mutex::new(Vec::new());
    walker(base).build_parallel().run(|| {
        let hits = &hits;
        let mut searcher = SearcherBuilder::new()
            .binary_detection(BinaryDetection::quit(0))
            .line_number(true)
            .build();
        Box::new(move |entry| {
            let Ok(entry) = entry else {
                return ignore::WalkState::Continue;
            };
            if !entry.file_type().is_some_and(|t| t.is_file()) {
                return ignore::WalkState::Continue;
            }
            if let Some((glob, _)) = include
                && !glob.is_match(entry.file_name())
            {
                return ignore::WalkState::Continue;
            }
            let mtime = entry
                .metadata()
                .ok()
                .and_then(|m| m.modified().ok())
                .unwrap_or(SystemTime::UNIX_EPOCH);
            let mut local = Vec::new();
            let _ = searcher.search_path(
                regex,
                entry.path(),
                UTF8(|line, text| {
                    local.push(Hit {
                        mtime,
                        path: entry.path().to_path_buf(),
                        line,
                        text: text.trim_end().to_string(),
                    });
                    Ok(true)
                }),
            );
            if !local.is_empty() {
                hits.lock().unwrap_or_else(|p| p.into_inner()).extend(local);
            }
            ignore::WalkState::Continue
        })
    });
    hits.into_inner().unwrap_or_else(|p| p.into_inner())
}

impl TypedTool for Grep {
    type Args = Args;
    const NAME: &'static str = "grep";
    const READ_ONLY: bool = true;

    fn description(&self, _: &ToolContext) -> String {
        format!(
            "Searches file contents with a regular expression; prints `path:line: text`, files \
             changed most recently first, at most {MAX_MATCHES} matches. Files ignored by \
             .gitignore and binary files are skipped. `include` filters file names by glob. \
             Use it, not `bash` with grep or rg, to find definitions, callers and uses."
        )
    }

    fn prepare(&self, args: Args, ctx: &ToolContext) -> Result<Prepared, ToolError> {
        let (root, display, needs) =
            search_root(ctx, args.path.as_deref(), "grep", Self::NAME, &args.pattern)?;
        let regex = RegexMatcherBuilder::new()
            .line_terminator(Some(b'\n'))
            .build(&args.pattern)
            .map_err(|e| ToolError::new(format!("invalid regex {:?}: {e}", args.pattern)))?;
        let include = args.include.as_deref().map(matcher).transpose()?;
        Ok(Prepared::new(needs, move |ctx| {
            Box::pin(async move {
                let base = root.real.clone();
                let walk_base = base.clone();
                let mut hits = tokio::task::spawn_blocking(move || {
                    search(&walk_base, &regex, include.as_ref())
                })
                .await
                .map_err(|e| ToolError::new(format!("the search failed: {e}")))?;
                hits.sort_by(|a, b| {
                    b.mtime
                        .cmp(&a.mtime)
                        .then_with(|| a.path.cmp(&b.path))
                        .then(a.line.cmp(&b.line))
                });
                let total = hits.len();
                let mut output = String::new();
                for h in hits.iter().take(MAX_MATCHES) {
                    let text = super::read::cut_line(&h.text);
                    output.push_str(&format!(
                        "{}:{}: {text}\n",
                        show_path(ctx, &root.path, &base, &h.path),
                        h.line
                    ));
                }
                if total == 0 {
                    output = "No matches found".into();
                } else if total > MAX_MATCHES {
                    output.push_str(&format!(
                        "({} more matches not shown; narrow the pattern, path or include)",
                        total - MAX_MATCHES
                    ));
                }
                Ok(ToolOutput {
                    title: format!("{} in {display}", args.pattern),
                    output,
                    metadata: json!({"matches": total}),
                    ..Default::default()
                })
            })
        }))
    }
}
