//! `agent-lsp memory`: the memory facts of a workspace, for the user — write, list, see what
//! a prompt would surface and why, correct, forget, confirm, export.

use std::path::PathBuf;

use anyhow::{Context, bail};
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
    json: bool,
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
    /// Say a fact did not belong.
    Irrelevant {
        id: String,
    },
    /// Every live fact as JSON, for backup and inspection.
    Export,
}

pub fn run(cmd: MemoryCommand, place: Place) -> anyhow::Result<i32> {
    let cwd = match place.cwd {
        Some(d) => d,
        None => std::env::current_dir()?,
    };
    let root = crate::workspace::root_for_file(&std::fs::canonicalize(&cwd)?.join("."));
    let project = root.display().to_string();
    let mut store = Store::open_default()?;
    let now = facts::now_ms();
    let json = place.json;
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
        MemoryCommand::Surface { query } => {
            let shown = facts::surface(&store.facts(&project, now)?, &query);
            let text = shown
                .facts
                .iter()
                .map(|f| format!("{} [{}] {:.2} {}", f.id, f.tier, f.score, f.text))
                .collect::<Vec<_>>()
                .join("\n");
            report(
                json,
                serde_json::to_value(&shown)?,
                if text.is_empty() {
                    "nothing surfaces".into()
                } else {
                    text
                },
            )
        }
        MemoryCommand::Why { id, query } => {
            let fact = owned(&store, &id, &project)?;
            let all = store.facts(&project, now)?;
            let shown = facts::surface(&all, &query);
            let rank = shown.facts.iter().position(|f| f.id == id).map(|r| r + 1);
            let visible: Vec<&Fact> = all
                .iter()
                .filter(|f| f.sensitivity != Sensitivity::LocalOnly)
                .collect();
            let index = facts::surface::Index::new(
                visible.iter().map(|f| (f.id.clone(), f.content.clone())),
            );
            let e = index.explain(&query, &id);
            let verdict = match (&fact, &e) {
                (f, _) if f.sensitivity == Sensitivity::LocalOnly => {
                    "local-only: never shown to the model"
                }
                (f, _) if f.tier == Tier::Core => "core: always shown",
                (_, Some(e)) if e.passed => "passed the gate",
                _ => "held back by the gate",
            };
            let value = json!({
                "id": id, "tier": fact.tier, "verdict": verdict, "rank": rank,
                "score": e.as_ref().map(|e| e.score), "coverage": e.as_ref().map(|e| e.coverage),
                "gate": {"score": facts::surface::GATE, "coverage": facts::surface::COVERAGE},
                "matches": e.as_ref().map(|e| e.matches.iter().map(|(s, w, idf)| json!({"term": s, "weight": w, "idf": idf})).collect::<Vec<_>>()),
            });
            let text = format!("{id}: {verdict}; rank {rank:?}; {}", value["matches"]);
            report(json, value, text)
        }
        MemoryCommand::Update { id, text } => {
            owned(&store, &id, &project)?;
            let n = text.trim().chars().count();
            if n == 0 || n > facts::MAX_CHARS {
                bail!("a fact's text is 1 to {} characters", facts::MAX_CHARS);
            }
            store.append(
                None,
                &Event::FactUpdated {
                    fact_id: id.clone(),
                    content: text.trim().into(),
                },
            )?;
            report(
                json,
                json!({"id": id, "updated": true}),
                format!("updated fact {id}"),
            )
        }
        MemoryCommand::Forget { id } => {
            owned(&store, &id, &project)?;
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
        MemoryCommand::Useful { id } => feedback(&mut store, &id, &project, true, json),
        MemoryCommand::Irrelevant { id } => feedback(&mut store, &id, &project, false, json),
    }
}

fn feedback(
    store: &mut Store,
    id: &str,
    project: &str,
    useful: bool,
    json: bool,
) -> anyhow::Result<i32> {
    owned(store, id, project)?;
    store.append(
        None,
        &Event::FactFeedback {
            fact_id: id.into(),
            useful,
        },
    )?;
    let word = if useful { "useful" } else { "irrelevant" };
    report(
        json,
        json!({"id": id, word: true}),
        format!("marked fact {id} {word}"),
    )
}

/// Fact `id`, if it is live and this workspace's (or global): another project's facts are
/// out of reach from here.
fn owned(store: &Store, id: &str, project: &str) -> anyhow::Result<Fact> {
    let fact = store.fact(id)?.with_context(|| format!("no fact {id}"))?;
    if fact.scope == FactScope::Project && fact.project.as_deref() != Some(project) {
        bail!("fact {id} belongs to another project");
    }
    Ok(fact)
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
