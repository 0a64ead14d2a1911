//! `context_checkpoint`, `context_discover`, `context_load`: the model's side of the session
//! state file (see `crate::state`). They write only that file, so they ask no permission.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::{Prepared, ToolContext, ToolError, ToolOutput, TypedTool};
use crate::state::{self, Checkpoint, Target};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckpointArgs {
    /// What the work is on now (at most 1,000 characters).
    pub focus: String,
    /// Where the work stands: exploring, implementing, testing, blocked, done...
    #[serde(default)]
    pub phase: Option<String>,
    /// The task in hand.
    #[serde(default)]
    pub task: Option<String>,
    /// What stands in the way.
    #[serde(default)]
    pub blockers: Option<String>,
    /// The next step.
    #[serde(default)]
    pub next: Option<String>,
    /// What the next session must know to go on (at most 2,000 characters).
    #[serde(default)]
    pub handoff: Option<String>,
}

#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum DiscoverTarget {
    Log,
    Decisions,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct DiscoverArgs {
    /// One finding or decision (at most 2,000 characters). For a decision that was tried
    /// and failed, start with `[REJECTED]` and give the reason.
    pub content: String,
    pub target: DiscoverTarget,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct LoadArgs {
    /// A folder inside the workspace (a task folder of notes, specs or plans).
    pub path: String,
}

pub struct ContextCheckpoint;
pub struct ContextDiscover;
pub struct ContextLoad;

fn failed(e: state::StateError) -> ToolError {
    ToolError::new(e.to_string())
}

fn state_path(ctx: &ToolContext) -> std::path::PathBuf {
    state::path(ctx.boundary.root(), &ctx.state_file)
}

impl TypedTool for ContextCheckpoint {
    type Args = CheckpointArgs;
    const NAME: &'static str = "context_checkpoint";

    fn description(&self, _: &ToolContext) -> String {
        "Records where the work stands in the session state file (STATE.md): focus, phase, \
         task, blockers, next step, handoff. It replaces the Current section whole. Call it \
         after changing files and before you finish, so the next session can pick up."
            .into()
    }

    fn prepare(&self, args: CheckpointArgs, ctx: &ToolContext) -> Result<Prepared, ToolError> {
        let (root, path) = (ctx.boundary.root().to_path_buf(), state_path(ctx));
        let c = Checkpoint {
            focus: args.focus,
            phase: args.phase,
            task: args.task,
            blockers: args.blockers,
            next: args.next,
            handoff: args.handoff,
        };
        Ok(Prepared::new(Vec::new(), move |_| {
            Box::pin(async move {
                let s = state::checkpoint(&root, &path, &c).map_err(failed)?;
                Ok(ToolOutput {
                    title: "checkpoint".into(),
                    output: format!(
                        "Checkpoint written to {}:\n{}",
                        path.display(),
                        s.current_lines().join("\n")
                    ),
                    metadata: json!({"path": path, "checkpoint": true}),
                    ..Default::default()
                })
            })
        }))
    }
}

impl TypedTool for ContextDiscover {
    type Args = DiscoverArgs;
    const NAME: &'static str = "context_discover";

    fn description(&self, _: &ToolContext) -> String {
        "Appends one dated entry to the session state file: to `decisions` (what was decided \
         and why; `[REJECTED]` first for what was tried and failed, with the reason) or to \
         the `log` (a finding worth keeping). Entries are never rewritten."
            .into()
    }

    fn prepare(&self, args: DiscoverArgs, ctx: &ToolContext) -> Result<Prepared, ToolError> {
        let (root, path) = (ctx.boundary.root().to_path_buf(), state_path(ctx));
        let target = match args.target {
            DiscoverTarget::Log => Target::Log,
            DiscoverTarget::Decisions => Target::Decisions,
        };
        Ok(Prepared::new(Vec::new(), move |_| {
            Box::pin(async move {
                let s = state::discover(&root, &path, target, &args.content).map_err(failed)?;
                let (name, n) = match target {
                    Target::Log => ("log", s.log.len()),
                    Target::Decisions => ("decisions", s.decisions.len()),
                };
                Ok(ToolOutput {
                    title: format!("added to the {name}"),
                    output: format!("Added to the {name} of {} ({n} entries).", path.display()),
                    metadata: json!({"path": path, "target": name}),
                    ..Default::default()
                })
            })
        }))
    }
}

/// The first lines of a file, at most `n`.
fn head(path: &std::path::Path, n: usize) -> String {
    use std::io::BufRead;
    let Ok(file) = std::fs::File::open(path) else {
        return "(unreadable)".into();
    };
    std::io::BufReader::new(file)
        .lines()
        .take(n)
        .map_while(Result::ok)
        .collect::<Vec<_>>()
        .join("\n")
}

impl TypedTool for ContextLoad {
    type Args = LoadArgs;
    const NAME: &'static str = "context_load";

    fn description(&self, _: &ToolContext) -> String {
        "Lists the markdown files of a task folder inside the workspace — name, size, last \
         change and first 10 lines of each — to see what a folder of notes or plans holds \
         before reading any of it."
            .into()
    }

    fn prepare(&self, args: LoadArgs, ctx: &ToolContext) -> Result<Prepared, ToolError> {
        let r = ctx
            .boundary
            .resolve(&args.path)
            .map_err(|e| ToolError::new(e.to_string()))?;
        if !r.inside {
            return Err(ToolError::new(format!(
                "{} is outside the workspace: context_load reads task folders inside it only",
                args.path
            )));
        }
        let shown = ctx.boundary.display(&r);
        Ok(Prepared::new(Vec::new(), move |_| {
            Box::pin(async move {
                let entries = std::fs::read_dir(&r.real)
                    .map_err(|e| ToolError::new(format!("cannot list {shown}: {e}")))?;
                let mut files: Vec<(String, std::fs::Metadata, std::path::PathBuf)> = entries
                    .flatten()
                    .filter_map(|e| {
                        let meta = e.metadata().ok().filter(|m| m.is_file())?;
                        let name = e.file_name().into_string().ok()?;
                        name.to_lowercase()
                            .ends_with(".md")
                            .then(|| (name, meta, e.path()))
                    })
                    .collect();
                files.sort_by(|a, b| a.0.cmp(&b.0));
                let mut output = String::new();
                for (name, meta, path) in &files {
                    let changed = meta
                        .modified()
                        .ok()
                        .and_then(|t| jiff::Timestamp::try_from(t).ok())
                        .map(|t| t.strftime("%Y-%m-%d %H:%M UTC").to_string())
                        .unwrap_or_default();
                    output.push_str(&format!(
                        "## {name} ({} bytes, changed {changed})\n{}\n\n",
                        meta.len(),
                        head(path, 10)
                    ));
                }
                if files.is_empty() {
                    output = format!("{shown} holds no markdown files.");
                }
                Ok(ToolOutput {
                    title: format!("{} markdown files in {shown}", files.len()),
                    output,
                    metadata: json!({"files": files.iter().map(|f| &f.0).collect::<Vec<_>>()}),
                    ..Default::default()
                })
            })
        }))
    }
}
