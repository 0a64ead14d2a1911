//! `memory_list`, `memory_set`, `memory_replace`: the agent's edits to its memory blocks
//! (see `crate::memory`). Each write is also recorded in the log (who, when, which session).

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::{Prepared, ToolContext, ToolError, ToolOutput, TypedTool};
use crate::memory::{self, Block};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ListArgs {}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SetArgs {
    /// The block's label (`human`, `project`, or a new one for this project).
    pub label: String,
    /// The block's whole new content (markdown), within its limit.
    pub content: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReplaceArgs {
    pub label: String,
    /// Text that occurs exactly once in the block.
    pub old: String,
    /// What replaces it.
    pub new: String,
}

pub struct MemoryList;
pub struct MemorySet;
pub struct MemoryReplace;

fn written(b: Block, verb: &str) -> ToolOutput {
    ToolOutput {
        title: format!("{verb} memory block {}", b.label),
        output: format!(
            "{verb} memory block {:?} ({}, {}/{} characters).",
            b.label,
            b.scope.as_str(),
            b.content.chars().count(),
            b.limit
        ),
        metadata: json!({"label": b.label, "path": b.path}),
        memory: Some((b.scope.as_str().into(), b.label.clone(), b.content.clone())),
        ..Default::default()
    }
}

impl TypedTool for MemoryList {
    type Args = ListArgs;
    const NAME: &'static str = "memory_list";
    const READ_ONLY: bool = true;

    fn description(&self, _: &ToolContext) -> String {
        "Lists your memory blocks (what you keep about the user and this project across \
         sessions) with their descriptions, sizes and whole contents."
            .into()
    }

    fn prepare(&self, _: ListArgs, ctx: &ToolContext) -> Result<Prepared, ToolError> {
        let root = ctx.boundary.root().to_path_buf();
        Ok(Prepared::new(Vec::new(), move |_| {
            Box::pin(async move {
                let blocks = memory::load(&root);
                let output = if blocks.is_empty() {
                    "No memory blocks yet; memory_set creates one.".to_string()
                } else {
                    blocks
                        .iter()
                        .map(|b| {
                            format!(
                                "## {} ({}{}, {}/{} characters)\n{}\n\n{}",
                                b.label,
                                b.scope.as_str(),
                                if b.read_only { ", read-only" } else { "" },
                                b.content.chars().count(),
                                b.limit,
                                b.description,
                                b.content.trim_end()
                            )
                        })
                        .collect::<Vec<_>>()
                        .join("\n\n")
                };
                Ok(ToolOutput {
                    title: format!("{} memory blocks", blocks.len()),
                    output,
                    ..Default::default()
                })
            })
        }))
    }
}

impl TypedTool for MemorySet {
    type Args = SetArgs;
    const NAME: &'static str = "memory_set";

    fn description(&self, _: &ToolContext) -> String {
        "Replaces a memory block's whole content (a new label creates a project block). Keep \
         blocks short and current: lasting facts, preferences and decisions, not a diary."
            .into()
    }

    fn prepare(&self, args: SetArgs, ctx: &ToolContext) -> Result<Prepared, ToolError> {
        let root = ctx.boundary.root().to_path_buf();
        Ok(Prepared::new(Vec::new(), move |_| {
            Box::pin(async move {
                memory::set(&root, &args.label, &args.content)
                    .map(|b| written(b, "Set"))
                    .map_err(ToolError::new)
            })
        }))
    }
}

impl TypedTool for MemoryReplace {
    type Args = ReplaceArgs;
    const NAME: &'static str = "memory_replace";

    fn description(&self, _: &ToolContext) -> String {
        "Replaces one exact piece of text in a memory block (it must occur once).".into()
    }

    fn prepare(&self, args: ReplaceArgs, ctx: &ToolContext) -> Result<Prepared, ToolError> {
        let root = ctx.boundary.root().to_path_buf();
        Ok(Prepared::new(Vec::new(), move |_| {
            Box::pin(async move {
                memory::replace(&root, &args.label, &args.old, &args.new)
                    .map(|b| written(b, "Updated"))
                    .map_err(ToolError::new)
            })
        }))
    }
}
