//! Long-term knowledge as stored (the `knowledge`, `curation` and `knowledge_export`
//! projections) and the queries on them.

use rusqlite::{OptionalExtension, params};
use serde::Serialize;

use super::{Result, Store};
use crate::status::{KnowledgeKind, KnowledgeSource};

/// One live entry with its provenance.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct KnowledgeEntry {
    pub id: String,
    pub kind: KnowledgeKind,
    pub content: String,
    /// `None`: it holds in every project.
    pub project: Option<String>,
    pub source: KnowledgeSource,
    pub session_id: Option<String>,
    pub message_ids: Vec<String>,
    pub curation_id: Option<String>,
    /// The entries a consolidation merged into this one.
    pub replaces: Vec<String>,
    pub created_at: i64,
    pub updated_at: i64,
}

/// One curation as recorded.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Curation {
    pub id: String,
    pub project: String,
    pub consolidation: bool,
    pub session_id: Option<String>,
    pub from_message_id: Option<String>,
    pub to_message_id: Option<String>,
    pub added: Vec<String>,
    pub error: Option<String>,
    pub at: i64,
}

const SELECT: &str = "SELECT id, kind, content, project, source, session_id, message_ids,
    curation_id, replaces, created_at, updated_at FROM knowledge";

/// Live: neither forgotten nor merged into another.
const LIVE: &str = "forgotten = 0 AND replaced_by IS NULL";

fn from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<KnowledgeEntry> {
    Ok(KnowledgeEntry {
        id: r.get(0)?,
        kind: r.get(1)?,
        content: r.get(2)?,
        project: r.get(3)?,
        source: r.get(4)?,
        session_id: r.get(5)?,
        message_ids: list(r.get(6)?),
        curation_id: r.get(7)?,
        replaces: list(r.get(8)?),
        created_at: r.get(9)?,
        updated_at: r.get(10)?,
    })
}

fn list(text: String) -> Vec<String> {
    serde_json::from_str(&text).unwrap_or_default()
}

impl Store {
    /// The live entries a project sees, oldest first: its own, and with `cross_project` the
    /// ones that hold everywhere.
    pub fn knowledge(&self, project: &str, cross_project: bool) -> Result<Vec<KnowledgeEntry>> {
        let mut stmt = self.conn.prepare(&format!(
            "{SELECT} WHERE {LIVE} AND (project = ?1 OR (?2 AND project IS NULL))
             ORDER BY created_at, id"
        ))?;
        let rows = stmt.query_map(params![project, cross_project], from_row)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// One live entry.
    pub fn knowledge_entry(&self, id: &str) -> Result<Option<KnowledgeEntry>> {
        Ok(self
            .conn
            .query_row(
                &format!("{SELECT} WHERE id = ?1 AND {LIVE}"),
                params![id],
                from_row,
            )
            .optional()?)
    }

    /// The live entry holding `content` in that place (what adding it again finds).
    pub fn knowledge_with_text(
        &self,
        project: Option<&str>,
        content: &str,
    ) -> Result<Option<KnowledgeEntry>> {
        Ok(self
            .conn
            .query_row(
                &format!("{SELECT} WHERE project IS ?1 AND norm = ?2 AND {LIVE}"),
                params![project, crate::facts::normalize(content)],
                from_row,
            )
            .optional()?)
    }

    /// Session `sid`'s curations, oldest first.
    pub fn curations(&self, sid: &str) -> Result<Vec<Curation>> {
        self.curations_where("session_id = ?1", sid)
    }

    fn curations_where(&self, filter: &str, value: &str) -> Result<Vec<Curation>> {
        let mut stmt = self.conn.prepare(&format!(
            "SELECT id, project, consolidation, session_id, from_message_id, to_message_id,
                    added, error, at
             FROM curation WHERE {filter} ORDER BY at, rowid"
        ))?;
        let rows = stmt.query_map(params![value], |r| {
            Ok(Curation {
                id: r.get(0)?,
                project: r.get(1)?,
                consolidation: r.get(2)?,
                session_id: r.get(3)?,
                from_message_id: r.get(4)?,
                to_message_id: r.get(5)?,
                added: list(r.get(6)?),
                error: r.get(7)?,
                at: r.get(8)?,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// One curation (a consolidation has no session).
    pub fn curation(&self, id: &str) -> Result<Option<Curation>> {
        Ok(self.curations_where("id = ?1", id)?.pop())
    }

    /// The entry ids the last export wrote into `file` for `project`.
    pub fn knowledge_exported(&self, project: &str, file: &str) -> Result<Vec<String>> {
        let ids: Option<String> = self
            .conn
            .query_row(
                "SELECT entry_ids FROM knowledge_export WHERE project = ?1 AND file = ?2",
                params![project, file],
                |r| r.get(0),
            )
            .optional()?;
        Ok(ids.map(list).unwrap_or_default())
    }
}
