//! `todowrite` / `todoread`: the session's task list, recorded in the event log by the loop.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::json;

use super::{Prepared, ToolContext, ToolError, ToolOutput, TypedTool};
use crate::store::Todo;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    Pending,
    InProgress,
    Completed,
    Cancelled,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Priority {
    High,
    Medium,
    Low,
}

#[derive(Debug, Clone, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Item {
    /// What to do, briefly.
    pub content: String,
    pub status: Status,
    #[serde(default = "medium")]
    pub priority: Priority,
}

fn medium() -> Priority {
    Priority::Medium
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct WriteArgs {
    /// The whole new list (it replaces the old one).
    pub todos: Vec<Item>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadArgs {}

pub struct TodoWrite;
pub struct TodoRead;

fn name<T: Serialize>(v: T) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(String::from))
        .unwrap_or_default()
}

fn render(todos: &[Todo]) -> String {
    if todos.is_empty() {
        return "The todo list is empty.".into();
    }
    todos
        .iter()
        .map(|t| format!("[{}] ({}) {}", t.status, t.priority, t.content))
        .collect::<Vec<_>>()
        .join("\n")
}

impl TypedTool for TodoWrite {
    type Args = WriteArgs;
    const NAME: &'static str = "todowrite";

    fn description(&self, _: &ToolContext) -> String {
        "Replaces the session's todo list. Use it to plan multi-step work and keep it current: \
         one item in_progress at a time, mark items completed as soon as they are done. Skip it for \
         a task of one or two steps."
            .into()
    }

    fn prepare(&self, args: WriteArgs, _: &ToolContext) -> Result<Prepared, ToolError> {
        let todos: Vec<Todo> = args
            .todos
            .into_iter()
            .map(|i| Todo {
                content: i.content,
                status: name(i.status),
                priority: name(i.priority),
            })
            .collect();
        Ok(Prepared::new(Vec::new(), move |ctx| {
            Box::pin(async move {
                *ctx.todos.lock().unwrap_or_else(|p| p.into_inner()) = todos.clone();
                let open = todos
                    .iter()
                    .filter(|t| t.status != "completed" && t.status != "cancelled")
                    .count();
                Ok(ToolOutput {
                    title: format!("{open} open todos"),
                    output: render(&todos),
                    metadata: json!({"open": open}),
                    todos: Some(todos),
                    ..Default::default()
                })
            })
        }))
    }
}

impl TypedTool for TodoRead {
    type Args = ReadArgs;
    const NAME: &'static str = "todoread";
    const READ_ONLY: bool = true;

    fn description(&self, _: &ToolContext) -> String {
        "Shows the session's todo list.".into()
    }

    fn prepare(&self, _: ReadArgs, _: &ToolContext) -> Result<Prepared, ToolError> {
        Ok(Prepared::new(Vec::new(), |ctx| {
            Box::pin(async move {
                let todos = ctx.todos.lock().unwrap_or_else(|p| p.into_inner()).clone();
                Ok(ToolOutput {
                    title: format!("{} todos", todos.len()),
                    output: render(&todos),
                    ..Default::default()
                })
            })
        }))
    }
}
