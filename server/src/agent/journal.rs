//! The journal for the user (the CLI and the editors), through the same search the model's
//! `journal_search` uses: the files re-indexed where they changed, ranked by text and, with
//! an embeddings model, by meaning. Reading the journal does not need it to be on; only the
//! model's tools do.

use super::{Agent, Result};
use crate::journal::search::{self, Found};
use crate::journal::{self, Entry};
use crate::store::IndexedEntry;

impl Agent {
    /// Searches the journal for `query`: at most `limit` entries, best first.
    pub async fn journal_search(&self, query: &str, limit: usize) -> Result<Found> {
        let found = search::search(
            &self.store,
            &journal::dir(),
            query,
            limit,
            self.embedder.as_deref(),
        )
        .await?;
        Ok(found)
    }

    /// Every entry, newest first.
    pub fn journal_list(&self) -> Result<Vec<IndexedEntry>> {
        Ok(search::refresh(&self.store, &journal::dir())?)
    }

    /// The entry with id `id` (or a unique prefix).
    pub fn journal_show(&self, id: &str) -> Result<Entry> {
        Ok(search::find(&self.store, &journal::dir(), id)?)
    }
}
