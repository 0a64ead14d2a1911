//! `lsp`: asks the editor's own language servers about the code (definitions, references,
//! hover, outlines, workspace symbols). Offered only when the editor answers such queries.

use std::path::Path;

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::glob::search_need;
use super::read::read_need;
use super::{Prepared, ToolContext, ToolError, ToolOutput, TypedTool};
use crate::editor::{CodeAnswer, CodeQuery, Place, Symbol};

/// The most places or symbols one answer lists.
pub const MAX_ITEMS: usize = 100;

#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
pub enum Operation {
    #[serde(rename = "goToDefinition")]
    GoToDefinition,
    #[serde(rename = "findReferences")]
    FindReferences,
    #[serde(rename = "goToImplementation")]
    GoToImplementation,
    #[serde(rename = "hover")]
    Hover,
    #[serde(rename = "documentSymbol")]
    DocumentSymbol,
    #[serde(rename = "workspaceSymbol")]
    WorkspaceSymbol,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Args {
    pub operation: Operation,
    /// The file (not needed for workspaceSymbol).
    #[serde(default)]
    pub file_path: Option<String>,
    /// 1-based line, as `read` numbers them (for the operations at a place).
    #[serde(default)]
    pub line: Option<u32>,
    /// 1-based column in characters (for the operations at a place).
    #[serde(default)]
    pub character: Option<u32>,
    /// What to search for (workspaceSymbol).
    #[serde(default)]
    pub query: Option<String>,
}

pub struct Lsp;

impl TypedTool for Lsp {
    type Args = Args;
    const NAME: &'static str = "lsp";
    const READ_ONLY: bool = true;

    fn offered(&self, ctx: &ToolContext) -> bool {
        ctx.editor.answers_code_queries()
    }

    fn description(&self, _ctx: &ToolContext) -> String {
        "Asks the editor's language servers, which have the project loaded. Operations: \
goToDefinition, findReferences, goToImplementation, hover (each needs filePath, line and \
character, 1-based as `read` shows them: put the position on the symbol's name), \
documentSymbol (filePath: the file's outline) and workspaceSymbol (query: symbols by name \
across the project). Answers are path:line:column lines, hover text, or an outline. Prefer \
this to grep for where a symbol is defined or used: it knows the language."
            .into()
    }

    fn prepare(&self, args: Args, ctx: &ToolContext) -> Result<Prepared, ToolError> {
        let mut needs = Vec::new();
        let query = if let Operation::WorkspaceSymbol = args.operation {
            let q = args
                .query
                .filter(|q| !q.trim().is_empty())
                .ok_or_else(|| ToolError::new("workspaceSymbol needs a query"))?;
            needs.push(search_need(
                "grep",
                Self::NAME,
                ".",
                &format!("symbols {q:?}"),
            ));
            CodeQuery::WorkspaceSymbols(q)
        } else {
            let file = args
                .file_path
                .ok_or_else(|| ToolError::new("this operation needs filePath"))?;
            let r = ctx.resolve(&file, true, &mut needs, Self::NAME)?;
            needs.push(read_need(Self::NAME, &ctx.display(&r)));
            let place = |what: &str| -> Result<Place, ToolError> {
                match (args.line, args.character) {
                    (Some(line), Some(column)) if line >= 1 && column >= 1 => Ok(Place {
                        path: r.path.clone(),
                        line,
                        column,
                    }),
                    _ => Err(ToolError::new(format!(
                        "{what} needs line and character, both 1-based"
                    ))),
                }
            };
            match args.operation {
                Operation::GoToDefinition => CodeQuery::Definition(place("goToDefinition")?),
                Operation::FindReferences => CodeQuery::References(place("findReferences")?),
                Operation::GoToImplementation => {
                    CodeQuery::Implementation(place("goToImplementation")?)
                }
                Operation::Hover => CodeQuery::Hover(place("hover")?),
                _ => CodeQuery::DocumentSymbols(r.path.clone()),
            }
        };
        Ok(Prepared::new(needs, move |ctx| {
            Box::pin(async move {
                let answer = ctx
                    .editor
                    .code_query(&query)
                    .await
                    .map_err(|e| ToolError::new(e.0))?;
                let root = ctx.boundary.root().to_path_buf();
                let line_of = |path: &Path, line: u32| {
                    let text = ctx
                        .editor
                        .buffer_text(path)
                        .or_else(|| std::fs::read_to_string(path).ok())?;
                    let l = text.lines().nth(line.checked_sub(1)? as usize)?.trim();
                    Some(l.chars().take(160).collect::<String>())
                };
                let output = render(&answer, &root, &line_of);
                Ok(ToolOutput {
                    title: title(&query, &root),
                    output,
                    metadata: json!({}),
                    ..Default::default()
                })
            })
        }))
    }
}

fn title(query: &CodeQuery, root: &Path) -> String {
    let at = |p: &Place| format!("{}:{}:{}", shown(&p.path, root), p.line, p.column);
    match query {
        CodeQuery::Definition(p) => format!("definition at {}", at(p)),
        CodeQuery::References(p) => format!("references at {}", at(p)),
        CodeQuery::Implementation(p) => format!("implementations at {}", at(p)),
        CodeQuery::Hover(p) => format!("hover at {}", at(p)),
        CodeQuery::DocumentSymbols(path) => format!("symbols of {}", shown(path, root)),
        CodeQuery::WorkspaceSymbols(q) => format!("symbols matching {q:?}"),
    }
}

/// A path as the model writes it: relative to the workspace when inside.
fn shown(path: &Path, root: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .to_string_lossy()
        .into_owned()
}

/// The answer as the model reads it; `line_of` gives a place's line of code.
pub fn render(
    answer: &CodeAnswer,
    root: &Path,
    line_of: &dyn Fn(&Path, u32) -> Option<String>,
) -> String {
    let more = |n: usize| {
        if n > MAX_ITEMS {
            format!("\n({} more not shown)", n - MAX_ITEMS)
        } else {
            String::new()
        }
    };
    match answer {
        CodeAnswer::Places(places) if places.is_empty() => "No results.".into(),
        CodeAnswer::Places(places) => {
            let lines: Vec<String> = places
                .iter()
                .take(MAX_ITEMS)
                .map(|p| {
                    let path = shown(&p.path, root);
                    match line_of(&p.path, p.line) {
                        Some(text) => format!("{path}:{}:{}: {text}", p.line, p.column),
                        None => format!("{path}:{}:{}", p.line, p.column),
                    }
                })
                .collect();
            lines.join("\n") + &more(places.len())
        }
        CodeAnswer::Text(text) if text.trim().is_empty() => "No information here.".into(),
        CodeAnswer::Text(text) => text.trim().to_string(),
        CodeAnswer::Symbols(symbols) if symbols.is_empty() => "No symbols.".into(),
        CodeAnswer::Symbols(symbols) => {
            let lines: Vec<String> = symbols
                .iter()
                .take(MAX_ITEMS)
                .map(|s| symbol_line(s, root))
                .collect();
            lines.join("\n") + &more(symbols.len())
        }
    }
}

fn symbol_line(s: &Symbol, root: &Path) -> String {
    format!(
        "{}{} {} {}:{}:{}",
        "  ".repeat(s.depth),
        s.kind,
        s.name,
        shown(&s.place.path, root),
        s.place.line,
        s.place.column
    )
}
