//! `agent-lsp journal`: the journal's entries for the user — list, search, show.

use clap::Subcommand;
use serde_json::json;

use super::memory::Place;
use super::session::report;
use crate::store::Store;

#[derive(Debug, Subcommand)]
pub enum JournalCommand {
    /// Every entry, newest first.
    List,
    /// The entries that match QUERY, best first (by text, and by meaning with an embeddings
    /// model).
    Search {
        query: String,
        /// How many (default 10).
        #[arg(long, default_value_t = 10)]
        limit: usize,
    },
    /// One entry whole (an id or a unique prefix).
    Show { id: String },
}

pub async fn run(cmd: JournalCommand, place: Place) -> anyhow::Result<i32> {
    let root = place.root()?;
    let agent = super::session::agent_in(Store::open_default()?, &root);
    let json = place.json;
    match cmd {
        JournalCommand::List => {
            let entries = agent.journal_list()?;
            let text = entries
                .iter()
                .map(|e| format!("{}  {}  {}", e.id, e.created, e.title))
                .collect::<Vec<_>>()
                .join("\n");
            let text = if text.is_empty() {
                format!("no journal entries in {}", crate::journal::dir().display())
            } else {
                text
            };
            report(json, json!({ "entries": entries }), text)
        }
        JournalCommand::Search { query, limit } => {
            let found = agent.journal_search(&query, limit).await?;
            let text = found
                .hits
                .iter()
                .map(|h| format!("{}  {:.2}  {}  {}", h.id, h.score, h.title, h.snippet))
                .collect::<Vec<_>>()
                .join("\n");
            let text = if text.is_empty() {
                format!("nothing matches {query:?}")
            } else {
                text
            };
            report(json, serde_json::to_value(&found)?, text)
        }
        JournalCommand::Show { id } => {
            let e = agent.journal_show(&id)?;
            let text = format!(
                "# {}\n{} · {} · tags: {}\n{}\n\n{}",
                e.meta.title,
                e.meta.created,
                e.meta.project,
                e.meta.tags.join(", "),
                e.path.display(),
                e.body
            );
            report(json, serde_json::to_value(&e)?, text)
        }
    }
}
