//! The journal's index: which entry files are known (by path, with the fingerprint they had
//! when indexed) and their text in an FTS5 table, identifier-aware as recall is. A cache of
//! the files, refreshed before each search (`journal::search`); `rebuild` leaves it alone.

use rusqlite::params;
use serde::Serialize;

use super::search::{fts_query, split_identifiers};
use super::{Result, Store};

/// An indexed entry, as listed.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct IndexedEntry {
    pub path: String,
    pub id: String,
    pub title: String,
    pub created: String,
    pub project: String,
    pub tags: Vec<String>,
}

/// A full-text match: the entry's path, its bm25 (lower is better) and a snippet.
#[derive(Debug, Clone, PartialEq)]
pub struct JournalTextHit {
    pub path: String,
    pub bm25: f64,
    pub snippet: String,
}

impl Store {
    /// Every indexed path with its fingerprint (modification time in ms, size).
    pub fn journal_fingerprints(&self) -> Result<std::collections::HashMap<String, (i64, i64)>> {
        let mut stmt = self
            .conn
            .prepare("SELECT path, mtime, size FROM journal_entry")?;
        let rows = stmt.query_map([], |r| Ok((r.get(0)?, (r.get(1)?, r.get(2)?))))?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// Indexes (or re-indexes) the entry at `path`.
    pub fn journal_index(
        &mut self,
        entry: &IndexedEntry,
        body: &str,
        fingerprint: (i64, i64),
    ) -> Result<()> {
        let tx = self.conn.transaction()?;
        tx.execute(
            "DELETE FROM journal_fts WHERE path = ?1",
            params![entry.path],
        )?;
        tx.execute(
            "INSERT OR REPLACE INTO journal_entry
                 (path, id, mtime, size, title, created, project, tags)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            params![
                entry.path,
                entry.id,
                fingerprint.0,
                fingerprint.1,
                entry.title,
                entry.created,
                entry.project,
                serde_json::to_string(&entry.tags).unwrap_or_default()
            ],
        )?;
        let text = format!("{} {}", entry.tags.join(" "), body);
        let words = split_identifiers(&format!("{} {text}", entry.title));
        tx.execute(
            "INSERT INTO journal_fts (title, body, words, path) VALUES (?1, ?2, ?3, ?4)",
            params![entry.title, text, words, entry.path],
        )?;
        tx.commit()?;
        Ok(())
    }

    /// Drops the entry at `path` from the index (its file is gone).
    pub fn journal_unindex(&mut self, path: &str) -> Result<()> {
        let tx = self.conn.transaction()?;
        tx.execute("DELETE FROM journal_fts WHERE path = ?1", params![path])?;
        tx.execute("DELETE FROM journal_entry WHERE path = ?1", params![path])?;
        tx.commit()?;
        Ok(())
    }

    /// Every indexed entry, newest first.
    pub fn journal_entries(&self) -> Result<Vec<IndexedEntry>> {
        let mut stmt = self.conn.prepare(
            "SELECT path, id, title, created, project, tags FROM journal_entry
             ORDER BY created DESC, path",
        )?;
        let rows = stmt.query_map([], |r| {
            Ok(IndexedEntry {
                path: r.get(0)?,
                id: r.get(1)?,
                title: r.get(2)?,
                created: r.get(3)?,
                project: r.get(4)?,
                tags: serde_json::from_str(&r.get::<_, String>(5)?).unwrap_or_default(),
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// Full-text matches for `query`, best first (titles weigh most).
    pub fn journal_text_search(&self, query: &str, limit: usize) -> Result<Vec<JournalTextHit>> {
        let Some(q) = fts_query(query) else {
            return Ok(Vec::new());
        };
        let mut stmt = self.conn.prepare(
            "SELECT path, bm25(journal_fts, 3.0, 1.0, 0.7),
                    snippet(journal_fts, 1, '«', '»', '…', 24)
             FROM journal_fts WHERE journal_fts MATCH ?1
             ORDER BY bm25(journal_fts, 3.0, 1.0, 0.7) LIMIT ?2",
        )?;
        let rows = stmt.query_map(params![q, limit as i64], |r| {
            Ok(JournalTextHit {
                path: r.get(0)?,
                bm25: r.get(1)?,
                snippet: r.get(2)?,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }
}
