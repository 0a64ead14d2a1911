//! `recall`: searches everything said and done in past turns and sessions — including what
//! no longer fits in the context — and returns ranked snippets with where they came from.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::{Prepared, ToolContext, ToolError, ToolOutput, TypedTool};
use crate::store::Scope;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// Words to look for (identifiers match their words too: `user store` finds
    /// `userStore`).
    pub query: String,
    /// `session` (this one), `project` (every session in this workspace, the default) or
    /// `all`.
    #[serde(default)]
    pub scope: Option<Scope>,
    /// How many snippets (default 5, at most 20).
    #[serde(default)]
    pub limit: Option<usize>,
}

pub struct Recall;

impl TypedTool for Recall {
    type Args = Args;
    const NAME: &'static str = "recall";
    const READ_ONLY: bool = true;

    fn description(&self, _: &ToolContext) -> String {
        "Searches the record of this and earlier sessions (messages and tool results, also \
         those no longer in your context) and returns the best-matching snippets with their \
         session, time and the file paths they mention. Use it before redoing work or when \
         an earlier detail (a path, an error, a number, a decision) is needed."
            .into()
    }

    fn prepare(&self, args: Args, ctx: &ToolContext) -> Result<Prepared, ToolError> {
        if args.query.trim().is_empty() {
            return Err(ToolError::new("query is empty: give the words to look for"));
        }
        let Some(source) = ctx.recall.clone() else {
            return Err(ToolError::new(
                "recall is not available here (no session store)",
            ));
        };
        let scope = args.scope.unwrap_or(Scope::Project);
        let limit = args.limit.unwrap_or(5).clamp(1, 20);
        Ok(Prepared::new(Vec::new(), move |ctx| {
            let sid = ctx.session_id.clone();
            Box::pin(async move {
                let hits = source
                    .store
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .search(&args.query, scope, Some(&sid), Some(&source.project), limit)
                    .map_err(|e| ToolError::new(format!("recall failed: {e}")))?;
                let output = if hits.is_empty() {
                    format!("Nothing found for {:?}.", args.query)
                } else {
                    hits.iter()
                        .enumerate()
                        .map(|(i, h)| {
                            let when = utc_minute(h.created_at);
                            let session = if h.session_id == sid {
                                "this session".to_string()
                            } else {
                                format!("session {} \"{}\"", h.session_id, h.session_title)
                            };
                            let mut s = format!(
                                "{}. [{session}, {when}, {}, message {}]\n{}",
                                i + 1,
                                h.source,
                                h.message_id,
                                h.snippet.trim()
                            );
                            if !h.paths.is_empty() {
                                s.push_str(&format!("\n   files: {}", h.paths.join(", ")));
                            }
                            s
                        })
                        .collect::<Vec<_>>()
                        .join("\n\n")
                };
                Ok(ToolOutput {
                    title: format!("{} match(es) for {:?}", hits.len(), args.query),
                    output,
                    metadata: json!({"hits": hits.len()}),
                    ..Default::default()
                })
            })
        }))
    }
}

/// `2026-12-02 14:59 UTC` from milliseconds since the epoch.
fn utc_minute(ms: i64) -> String {
    jiff::Timestamp::from_millisecond(ms)
        .map(|t| t.strftime("%Y-%m-%d %H:%M UTC").to_string())
        .unwrap_or_else(|_| "an unknown time".into())
}
