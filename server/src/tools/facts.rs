//! The model's memory facts (see `crate::facts`): `memory_write`, `memory_update`,
//! `memory_read`, `memory_forget`, `memory_why`, `memory_useful`, `memory_irrelevant`.
//! A local-only fact is never shown in any of their outputs: the model may write one (the
//! user asked it to keep something to themself) but not read it back.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::{Prepared, RecallSource, ToolContext, ToolError, ToolOutput, TypedTool};
use crate::facts::{self, NewFact};
use crate::status::{FactScope, FactSource, Sensitivity, Tier};
use crate::store::{Event, Fact};

#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum TierArg {
    /// Always shown (keep these few).
    Core,
    /// Shown when a prompt is about it (the default).
    Archival,
    /// Like archival, until ttlHours pass.
    Temporary,
    /// Like archival, never decays.
    Pinned,
}

#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum ScopeArg {
    Project,
    Global,
}

#[derive(Debug, Clone, Copy, Deserialize, JsonSchema)]
pub enum SensitivityArg {
    #[serde(rename = "normal")]
    Normal,
    /// Kept for the user only: never shown to you again.
    #[serde(rename = "local-only")]
    LocalOnly,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct WriteArgs {
    /// One fact, in a sentence that stands on its own.
    pub content: String,
    #[serde(default)]
    pub tier: Option<TierArg>,
    /// `project` (default) or `global` (true in every workspace).
    #[serde(default)]
    pub scope: Option<ScopeArg>,
    #[serde(default)]
    pub sensitivity: Option<SensitivityArg>,
    /// For a temporary fact: how many hours it holds (fractions allowed).
    #[serde(default)]
    pub ttl_hours: Option<f64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct UpdateArgs {
    pub id: String,
    /// The fact's whole new text.
    pub content: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ReadArgs {
    /// Words to look for, in any order.
    pub query: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct IdArgs {
    pub id: String,
}

pub struct MemoryWrite;
pub struct MemoryUpdate;
pub struct MemoryRead;
pub struct MemoryForget;
pub struct MemoryWhy;
pub struct MemoryUseful;
pub struct MemoryIrrelevant;

fn source(ctx: &ToolContext) -> Result<RecallSource, ToolError> {
    ctx.recall.clone().ok_or_else(|| {
        ToolError::new("memory facts need the session store, which this context has not")
    })
}

fn failed(e: impl std::fmt::Display) -> ToolError {
    ToolError::new(e.to_string())
}

/// Fact `id` as the model may see it: this workspace's or global, not local-only.
fn visible(src: &RecallSource, id: &str) -> Result<Fact, ToolError> {
    let store = src.store.lock().unwrap_or_else(|p| p.into_inner());
    facts::find(&store, id, &src.project, false).map_err(|e| {
        ToolError::new(format!(
            "{e} in this workspace (memory_read finds facts by their words)"
        ))
    })
}

fn output(title: String, output: String) -> ToolOutput {
    ToolOutput {
        title,
        output,
        metadata: json!({}),
        ..Default::default()
    }
}

impl TypedTool for MemoryWrite {
    type Args = WriteArgs;
    const NAME: &'static str = "memory_write";

    fn description(&self, _: &ToolContext) -> String {
        "Remembers one fact beyond this session: a decision, a preference, something learned \
         about the project. Facts come back with later prompts that are about them (core ones \
         always). Writing the same fact again confirms it."
            .into()
    }

    fn prepare(&self, args: WriteArgs, ctx: &ToolContext) -> Result<Prepared, ToolError> {
        let src = source(ctx)?;
        let fact = NewFact {
            content: args.content,
            tier: match args.tier.unwrap_or(TierArg::Archival) {
                TierArg::Core => Tier::Core,
                TierArg::Archival => Tier::Archival,
                TierArg::Temporary => Tier::Temporary,
                TierArg::Pinned => Tier::Pinned,
            },
            scope: match args.scope.unwrap_or(ScopeArg::Project) {
                ScopeArg::Project => FactScope::Project,
                ScopeArg::Global => FactScope::Global,
            },
            sensitivity: match args.sensitivity.unwrap_or(SensitivityArg::Normal) {
                SensitivityArg::Normal => Sensitivity::Normal,
                SensitivityArg::LocalOnly => Sensitivity::LocalOnly,
            },
            ttl_hours: args.ttl_hours,
            source: FactSource::Model,
            session_id: Some(ctx.session_id.clone()).filter(|s| !s.is_empty()),
            message_id: Some(ctx.message_id.clone()).filter(|s| !s.is_empty()),
            confidence: 0.8,
            message_ids: Vec::new(),
            dream_id: None,
            conflicts_with: None,
        };
        let local = fact.sensitivity == Sensitivity::LocalOnly;
        Ok(Prepared::new(Vec::new(), move |_| {
            Box::pin(async move {
                let mut store = src.store.lock().unwrap_or_else(|p| p.into_inner());
                let w = facts::write(&mut store, &src.project, fact, facts::now_ms())
                    .map_err(failed)?;
                let said = match (w.created, local) {
                    (true, true) => format!(
                        "Kept local-only fact {} for the user; it will not be shown to you again.",
                        w.id
                    ),
                    (true, false) => format!("Remembered as fact {}.", w.id),
                    (false, _) => format!("Fact {} already held this; confirmed it.", w.id),
                };
                Ok(output("remembered".into(), said))
            })
        }))
    }
}

impl TypedTool for MemoryUpdate {
    type Args = UpdateArgs;
    const NAME: &'static str = "memory_update";

    fn description(&self, _: &ToolContext) -> String {
        "Corrects a remembered fact: replaces its whole text (it keeps its id and history).".into()
    }

    fn prepare(&self, args: UpdateArgs, ctx: &ToolContext) -> Result<Prepared, ToolError> {
        let src = source(ctx)?;
        visible(&src, &args.id)?;
        let content = args.content.trim().to_string();
        if content.is_empty() || content.chars().count() > facts::MAX_CHARS {
            return Err(ToolError::new(format!(
                "a fact's text is 1 to {} characters",
                facts::MAX_CHARS
            )));
        }
        Ok(Prepared::new(Vec::new(), move |_| {
            Box::pin(async move {
                let mut store = src.store.lock().unwrap_or_else(|p| p.into_inner());
                let event = Event::FactUpdated {
                    fact_id: args.id.clone(),
                    content,
                };
                store.append(None, &event).map_err(failed)?;
                Ok(output(
                    "updated a fact".into(),
                    format!("Updated fact {}.", args.id),
                ))
            })
        }))
    }
}

impl TypedTool for MemoryRead {
    type Args = ReadArgs;
    const NAME: &'static str = "memory_read";
    const READ_ONLY: bool = true;

    fn description(&self, _: &ToolContext) -> String {
        "Looks up remembered facts by their words (any order; forms of a word match).".into()
    }

    fn prepare(&self, args: ReadArgs, ctx: &ToolContext) -> Result<Prepared, ToolError> {
        let src = source(ctx)?;
        Ok(Prepared::new(Vec::new(), move |_| {
            Box::pin(async move {
                let all = {
                    let store = src.store.lock().unwrap_or_else(|p| p.into_inner());
                    store.facts(&src.project, facts::now_ms()).map_err(failed)?
                };
                let found = facts::read(&all, &args.query, 10);
                let text = if found.is_empty() {
                    format!("No remembered fact has the words of {:?}.", args.query)
                } else {
                    found
                        .iter()
                        .map(|f| format!("- {} [{}] {}", f.id, f.tier, f.content))
                        .collect::<Vec<_>>()
                        .join("\n")
                };
                Ok(output(format!("{} facts", found.len()), text))
            })
        }))
    }
}

/// The three tools that take an id and record one event.
fn by_id(
    ctx: &ToolContext,
    id: String,
    event: impl FnOnce(String) -> Event + Send + 'static,
    said: &'static str,
) -> Result<Prepared, ToolError> {
    let src = source(ctx)?;
    visible(&src, &id)?;
    Ok(Prepared::new(Vec::new(), move |_| {
        Box::pin(async move {
            let mut store = src.store.lock().unwrap_or_else(|p| p.into_inner());
            store.append(None, &event(id.clone())).map_err(failed)?;
            Ok(output(said.into(), format!("{said}: fact {id}.")))
        })
    }))
}

impl TypedTool for MemoryForget {
    type Args = IdArgs;
    const NAME: &'static str = "memory_forget";

    fn description(&self, _: &ToolContext) -> String {
        "Forgets a remembered fact that no longer holds.".into()
    }

    fn prepare(&self, args: IdArgs, ctx: &ToolContext) -> Result<Prepared, ToolError> {
        by_id(
            ctx,
            args.id,
            |fact_id| Event::FactForgotten { fact_id },
            "Forgot",
        )
    }
}

impl TypedTool for MemoryUseful {
    type Args = IdArgs;
    const NAME: &'static str = "memory_useful";

    fn description(&self, _: &ToolContext) -> String {
        "Confirms that a remembered fact still holds and helped.".into()
    }

    fn prepare(&self, args: IdArgs, ctx: &ToolContext) -> Result<Prepared, ToolError> {
        by_id(
            ctx,
            args.id,
            |fact_id| Event::FactFeedback {
                fact_id,
                useful: true,
                query: None,
            },
            "Confirmed",
        )
    }
}

impl TypedTool for MemoryIrrelevant {
    type Args = IdArgs;
    const NAME: &'static str = "memory_irrelevant";

    fn description(&self, _: &ToolContext) -> String {
        "Says a fact that came with the prompt did not belong to it.".into()
    }

    fn prepare(&self, args: IdArgs, ctx: &ToolContext) -> Result<Prepared, ToolError> {
        // The prompt it came with, so that similar prompts rank it lower.
        let query = source(ctx).ok().and_then(|src| {
            let store = src.store.lock().unwrap_or_else(|p| p.into_inner());
            facts::prompt_that_surfaced(&store, &ctx.session_id, &args.id)
        });
        by_id(
            ctx,
            args.id,
            |fact_id| Event::FactFeedback {
                fact_id,
                useful: false,
                query,
            },
            "Marked irrelevant",
        )
    }
}

impl TypedTool for MemoryWhy {
    type Args = IdArgs;
    const NAME: &'static str = "memory_why";
    const READ_ONLY: bool = true;

    fn description(&self, _: &ToolContext) -> String {
        "Shows where a remembered fact came from: who wrote it, in which session, when, how \
         sure, and how often it was confirmed and shown."
            .into()
    }

    fn prepare(&self, args: IdArgs, ctx: &ToolContext) -> Result<Prepared, ToolError> {
        let f = visible(&source(ctx)?, &args.id)?;
        Ok(Prepared::new(Vec::new(), move |_| {
            Box::pin(async move {
                let when = |ms: i64| {
                    jiff::Timestamp::from_millisecond(ms)
                        .map(|t| t.strftime("%Y-%m-%d %H:%M UTC").to_string())
                        .unwrap_or_default()
                };
                let text = format!(
                    "{} [{}, {}]: {}\nwritten by the {} {}{}, confidence {:.2}; confirmed {} \
                     time(s){}, marked irrelevant {} time(s), shown {} time(s)",
                    f.id,
                    f.tier,
                    f.scope,
                    f.content,
                    f.source,
                    when(f.created_at),
                    f.session_id
                        .as_deref()
                        .map(|s| format!(" in session {s}"))
                        .unwrap_or_default(),
                    f.confidence,
                    f.useful,
                    f.confirmed_at
                        .map(|t| format!(", last {}", when(t)))
                        .unwrap_or_default(),
                    f.irrelevant,
                    f.surfaced_count,
                );
                Ok(output("provenance".into(), text))
            })
        }))
    }
}
