//! `agent-lsp knowledge`: the long-term knowledge of a workspace, for the user — list, add,
//! forget, curate with the model, and export into the repository's agents file.

use clap::{Subcommand, ValueEnum};
use serde_json::json;

use super::memory::{Place, agent_with_model, workspace_sessions};
use super::session::report;
use crate::status::KnowledgeKind;
use crate::store::{KnowledgeEntry, Store};

#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum KindArg {
    Pattern,
    Decision,
    Gotcha,
    Fact,
}

impl From<KindArg> for KnowledgeKind {
    fn from(k: KindArg) -> Self {
        match k {
            KindArg::Pattern => KnowledgeKind::Pattern,
            KindArg::Decision => KnowledgeKind::Decision,
            KindArg::Gotcha => KnowledgeKind::Gotcha,
            KindArg::Fact => KnowledgeKind::Fact,
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum KnowledgeCommand {
    /// Every entry this workspace sees (its own, and those of every project), with its
    /// provenance.
    List,
    /// Add an entry (the same text again finds the entry that holds it).
    Add {
        text: String,
        #[arg(long, value_enum, default_value = "fact")]
        kind: KindArg,
        /// For every project, not just this one.
        #[arg(long)]
        global: bool,
    },
    /// Forget entry ID.
    Forget { id: String },
    /// Write the project's entries into its agents file (`[knowledge] agents_file`, default
    /// AGENTS.md), in the managed section, after reading back what a person changed there.
    Export,
    /// Extract entries from what is new in this workspace's sessions (or one), with the
    /// model; merges the project's entries when they pass `consolidate_at`.
    Curate {
        /// Only this session (an id or a unique prefix).
        #[arg(long)]
        session: Option<String>,
    },
}

fn line(e: &KnowledgeEntry) -> String {
    let place = if e.project.is_some() {
        "project"
    } else {
        "every project"
    };
    format!(
        "{}  {:<8}  {}  ({}, {place})",
        e.id, e.kind, e.content, e.source
    )
}

pub async fn run(cmd: KnowledgeCommand, place: Place) -> anyhow::Result<i32> {
    let root = place.root()?;
    let json = place.json;
    let store = Store::open_default()?;
    if let KnowledgeCommand::Curate { session } = &cmd {
        let sessions = workspace_sessions(&store, &root, session.as_deref())?;
        let agent = agent_with_model(store, &root, "a curation")?;
        let mut reports = Vec::new();
        let mut lines = Vec::new();
        for sid in sessions {
            let r = agent.curate(&sid).await?;
            lines.push(format!(
                "{sid}: {} curation(s): {} new entr(ies), {} already known, {} refused, {} merged",
                r.curations.len(),
                r.added,
                r.known,
                r.rejected,
                r.merged
            ));
            reports.push(json!({"sessionId": sid, "report": r}));
        }
        if lines.is_empty() {
            lines.push("no session in this workspace".into());
        }
        return report(json, json!({ "sessions": reports }), lines.join("\n"));
    }
    let agent = super::session::agent_in(store, &root);
    match cmd {
        KnowledgeCommand::List => {
            let entries = agent.knowledge_list()?;
            let text = if entries.is_empty() {
                "no knowledge entries yet".to_string()
            } else {
                entries.iter().map(line).collect::<Vec<_>>().join("\n")
            };
            report(json, json!({ "entries": entries }), text)
        }
        KnowledgeCommand::Add { text, kind, global } => {
            let w = agent.knowledge_add(kind.into(), &text, global)?;
            let said = if w.created {
                format!("added {}", w.id)
            } else {
                format!("already kept as {}", w.id)
            };
            report(json, json!({"id": w.id, "created": w.created}), said)
        }
        KnowledgeCommand::Forget { id } => {
            let e = agent.knowledge_forget(&id)?;
            report(
                json,
                json!({"id": e.id, "forgotten": true}),
                format!("forgot {}: {}", e.id, e.content),
            )
        }
        KnowledgeCommand::Export => {
            let r = agent.knowledge_export()?;
            let text = format!(
                "{}: {} entr(ies){}; read back {} new, {} changed, {} deleted",
                r.file.display(),
                r.entries,
                if r.written { "" } else { ", unchanged" },
                r.imported,
                r.updated,
                r.forgotten
            );
            report(json, serde_json::to_value(&r)?, text)
        }
        KnowledgeCommand::Curate { .. } => unreachable!("curated above"),
    }
}
