//! `agent-lsp memory`: the memory facts of a workspace, for the user — write, list, see what
//! a prompt would surface and why, correct, forget, confirm, export.

use std::path::PathBuf;

use clap::{Args, Subcommand, ValueEnum};
use serde_json::json;

use super::session::report;
use crate::facts::{self, NewFact};
use crate::status::{FactScope, FactSource, Sensitivity, Tier};
use crate::store::{Event, Fact, Store};

/// Where and how: the workspace and the output form.
#[derive(Debug, Args)]
pub struct Place {
    /// The workspace (default: the current directory's project).
    #[arg(long, value_name = "DIR", global = true)]
    cwd: Option<PathBuf>,
    /// Print JSON.
    #[arg(long, global = true)]
    pub json: bool,
}

impl Place {
    /// The project `--cwd` (or the current directory) belongs to.
    pub fn root(&self) -> anyhow::Result<PathBuf> {
        let cwd = match &self.cwd {
            Some(d) => d.clone(),
            None => std::env::current_dir()?,
        };
        Ok(crate::workspace::root_for_file(
            &std::fs::canonicalize(&cwd)?.join("."),
        ))
    }
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum TierArg {
    Core,
    Archival,
    Temporary,
    Pinned,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum ScopeArg {
    Project,
    Global,
}

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum SensitivityArg {
    Normal,
    LocalOnly,
}

#[derive(Debug, Subcommand)]
pub enum MemoryCommand {
    /// Write a fact (the same text again confirms the fact that holds it).
    Add {
        text: String,
        #[arg(long, value_enum, default_value = "archival")]
        tier: TierArg,
        #[arg(long, value_enum, default_value = "project")]
        scope: ScopeArg,
        /// `local-only`: shown to you, never to the model.
        #[arg(long, value_enum, default_value = "normal")]
        sensitivity: SensitivityArg,
        /// How long a temporary fact lasts (fractions allowed).
        #[arg(long)]
        ttl_hours: Option<f64>,
    },
    /// Every live fact of the workspace, with its provenance.
    List,
    /// Exactly what a prompt QUERY would get shown.
    Surface {
        query: String,
    },
    /// Why fact ID does or does not surface for QUERY.
    Why {
        id: String,
        query: String,
    },
    /// Replace a fact's text.
    Update {
        id: String,
        text: String,
    },
    Forget {
        id: String,
    },
    /// Confirm a fact.
    Useful {
        id: String,
    },
    /// Say a fact did not belong (to prompts like QUERY, which then rank it lower).
    Irrelevant {
        id: String,
        /// The prompt it did not belong to.
        #[arg(long)]
        query: Option<String>,
    },
    /// Every live fact as JSON, for backup and inspection.
    Export,
    /// Extract facts from what is new in this workspace's sessions (or one), with the model;
    /// resumes a dream that was cut off.
    Dream {
        /// Only this session (an id or a unique prefix).
        #[arg(long)]
        session: Option<String>,
    },
}

pub async fn run(cmd: MemoryCommand, place: Place) -> anyhow::Result<i32> {
    let root = place.root()?;
    let project = root.display().to_string();
    let mut store = Store::open_default()?;
    let now = facts::now_ms();
    let json = place.json;
    match cmd {
        MemoryCommand::Dream { session } => {
            return dream(store, &root, session.as_deref(), json).await;
        }
        MemoryCommand::Surface { query } => return surface(store, &root, &query, json).await,
        _ => {}
    }
    match cmd {
        MemoryCommand::Add {
            text,
            tier,
            scope,
            sensitivity,
            ttl_hours,
        } => {
            let fact = NewFact {
                content: text,
                tier: tier.into(),
                scope: scope.into(),
                sensitivity: sensitivity.into(),
                ttl_hours,
                source: FactSource::User,
                session_id: None,
                message_id: None,
                confidence: 1.0,
                message_ids: Vec::new(),
                dream_id: None,
                conflicts_with: None,
            };
            let w = facts::write(&mut store, &project, fact, now)?;
            let verb = if w.created {
                "wrote"
            } else {
                "confirmed the existing"
            };
            report(
                json,
                serde_json::to_value(&w)?,
                format!("{verb} fact {}", w.id),
            )
        }
        MemoryCommand::List => {
            let all = store.facts(&project, now)?;
            let text = all.iter().map(line).collect::<Vec<_>>().join("\n");
            report(
                json,
                json!({ "facts": all }),
                if text.is_empty() {
                    "no facts yet".into()
                } else {
                    text
                },
            )
        }
        MemoryCommand::Export => {
            let all = store.facts(&project, now)?;
            report(
                true,
                json!({"project": project, "facts": all}),
                String::new(),
            )
        }
        MemoryCommand::Surface { .. } => unreachable!("surfaced above"),
        MemoryCommand::Why { id, query } => {
            let fact = facts::find(&store, &id, &project, true)?;
            let why = facts::why(&store.facts(&project, now)?, &fact, &query, now);
            let text = format!(
                "{id}: {}; rank {:?}; score {:?} (gate {}), coverage {:?} (gate {}); \
                 irrelevant marks leave {:.2} of the score, age {:.2} of the rank",
                why.verdict,
                why.rank,
                why.score,
                facts::surface::GATE,
                why.coverage,
                facts::surface::COVERAGE,
                why.irrelevance,
                why.decay
            );
            report(json, serde_json::to_value(&why)?, text)
        }
        MemoryCommand::Update { id, text } => {
            facts::find(&store, &id, &project, true)?;
            facts::update(&mut store, &id, &text)?;
            report(
                json,
                json!({"id": id, "updated": true}),
                format!("updated fact {id}"),
            )
        }
        MemoryCommand::Forget { id } => {
            facts::find(&store, &id, &project, true)?;
            store.append(
                None,
                &Event::FactForgotten {
                    fact_id: id.clone(),
                },
            )?;
            report(
                json,
                json!({"id": id, "forgotten": true}),
                format!("forgot fact {id}"),
            )
        }
        MemoryCommand::Dream { .. } => unreachable!("dreamt above"),
        MemoryCommand::Useful { id } => feedback(&mut store, &id, &project, true, None, json),
        MemoryCommand::Irrelevant { id, query } => {
            feedback(&mut store, &id, &project, false, query, json)
        }
    }
}

fn feedback(
    store: &mut Store,
    id: &str,
    project: &str,
    useful: bool,
    query: Option<String>,
    json: bool,
) -> anyhow::Result<i32> {
    facts::find(store, id, project, true)?;
    store.append(
        None,
        &Event::FactFeedback {
            fact_id: id.into(),
            useful,
            query,
        },
    )?;
    let word = if useful { "useful" } else { "irrelevant" };
    report(
        json,
        json!({"id": id, word: true}),
        format!("marked fact {id} {word}"),
    )
}

fn line(f: &Fact) -> String {
    format!(
        "{} [{}{}{}] {} (from {}{})",
        f.id,
        f.tier,
        if f.scope == FactScope::Global {
            ", global"
        } else {
            ""
        },
        if f.sensitivity == Sensitivity::LocalOnly {
            ", local-only"
        } else {
            ""
        },
        f.content,
        f.source,
        f.session_id
            .as_deref()
            .map(|s| format!(", session {s}"))
            .unwrap_or_default()
    )
}

impl From<TierArg> for Tier {
    fn from(t: TierArg) -> Self {
        match t {
            TierArg::Core => Tier::Core,
            TierArg::Archival => Tier::Archival,
            TierArg::Temporary => Tier::Temporary,
            TierArg::Pinned => Tier::Pinned,
        }
    }
}

impl From<ScopeArg> for FactScope {
    fn from(s: ScopeArg) -> Self {
        match s {
            ScopeArg::Project => FactScope::Project,
            ScopeArg::Global => FactScope::Global,
        }
    }
}

impl From<SensitivityArg> for Sensitivity {
    fn from(s: SensitivityArg) -> Self {
        match s {
            SensitivityArg::Normal => Sensitivity::Normal,
            SensitivityArg::LocalOnly => Sensitivity::LocalOnly,
        }
    }
}

/// The sessions of the workspace at `root`, oldest first, or the one `session` names (an
/// id or a unique prefix).
pub(super) fn workspace_sessions(
    store: &Store,
    root: &std::path::Path,
    session: Option<&str>,
) -> anyhow::Result<Vec<String>> {
    let project = root.display().to_string();
    Ok(match session {
        Some(prefix) => vec![super::session::resolve_id(store, prefix)?],
        None => store
            .sessions()?
            .into_iter()
            .filter(|s| s.workspace == project)
            .map(|s| s.session_id)
            .collect(),
    })
}

/// The workspace's agent with the configured model (`what` needs it).
pub(super) fn agent_with_model(
    store: Store,
    root: &std::path::Path,
    what: &str,
) -> anyhow::Result<crate::agent::Agent> {
    let mut agent = super::session::agent_in(store, root);
    match crate::provider::from_config(agent.config()) {
        Ok(p) => agent.set_provider(std::sync::Arc::from(p)),
        Err(e) => anyhow::bail!("{what} needs the model: {e}"),
    }
    Ok(agent)
}

/// `memory dream`: each session of the workspace (or the one named) dreamt on in turn.
async fn dream(
    store: Store,
    root: &std::path::Path,
    session: Option<&str>,
    json: bool,
) -> anyhow::Result<i32> {
    let sessions = workspace_sessions(&store, root, session)?;
    let agent = agent_with_model(store, root, "a dream")?;
    let mut reports = Vec::new();
    let mut lines = Vec::new();
    for sid in sessions {
        let r = agent.dream(&sid).await?;
        lines.push(format!(
            "{sid}: {} dream(s){}: {} new fact(s), {} in conflict, {} already known, {} rejected",
            r.dreams.len(),
            if r.resumed > 0 {
                format!(" ({} resumed)", r.resumed)
            } else {
                String::new()
            },
            r.created,
            r.conflicted,
            r.duplicates,
            r.rejected
        ));
        reports.push(json!({"sessionId": sid, "report": r}));
    }
    if lines.is_empty() {
        lines.push("no session in this workspace".into());
    }
    report(json, json!({"sessions": reports}), lines.join("\n"))
}

/// `memory surface`: exactly what a prompt QUERY would be shown, through the agent's own
/// path (the rerank included, when an embeddings model is configured).
async fn surface(
    store: Store,
    root: &std::path::Path,
    query: &str,
    json: bool,
) -> anyhow::Result<i32> {
    let agent = super::session::agent_in(store, root);
    let (shown, rerank) = agent.surface(query).await?;
    let mut text = shown
        .facts
        .iter()
        .map(|f| format!("{} [{}] {:.2} {}", f.id, f.tier, f.score, f.text))
        .collect::<Vec<_>>()
        .join("\n");
    if text.is_empty() {
        text = "nothing surfaces".into();
    }
    if let facts::rerank::Rerank::Abstained { reason: why }
    | facts::rerank::Rerank::Failed { error: why } = &rerank
    {
        text.push_str(&format!("\n(lexical order: {why})"));
    }
    let mut value = serde_json::to_value(&shown)?;
    value["rerank"] = serde_json::to_value(&rerank)?;
    report(json, value, text)
}
