//! The memory facts as stored (the `fact` projection) and the queries on them.

use rusqlite::params;
use serde::Serialize;

use super::{Result, Store};
use crate::status::{FactScope, FactSource, Sensitivity, Tier};

/// One fact with its provenance and its record of use.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Fact {
    pub id: String,
    pub content: String,
    pub tier: Tier,
    pub scope: FactScope,
    pub project: Option<String>,
    pub sensitivity: Sensitivity,
    pub source: FactSource,
    pub session_id: Option<String>,
    pub message_id: Option<String>,
    pub confidence: f64,
    pub expires_at: Option<i64>,
    pub created_at: i64,
    pub updated_at: i64,
    pub confirmed_at: Option<i64>,
    pub useful: i64,
    pub irrelevant: i64,
    /// Exposure, apart from confirmation: when and how often it was shown to the model.
    pub last_surfaced: Option<i64>,
    pub surfaced_count: i64,
    /// A dreamt fact's messages, and its dream.
    pub message_ids: Vec<String>,
    pub dream_id: Option<String>,
    /// Contradicted, or contradicting, another live fact, until one of them is updated or
    /// forgotten; `conflicts_with` names the fact this one contradicts.
    pub conflicted: bool,
    pub conflicts_with: Option<String>,
    /// The prompts it was marked irrelevant for (similar prompts rank it lower).
    pub irrelevant_for: Vec<String>,
}

impl Fact {
    /// A temporary fact past its time.
    pub fn expired(&self, now_ms: i64) -> bool {
        self.expires_at.is_some_and(|t| t <= now_ms)
    }
}

const SELECT: &str = "SELECT id, content, tier, scope, project, sensitivity, source, session_id,
    message_id, confidence, expires_at, created_at, updated_at, confirmed_at, useful, irrelevant,
    last_surfaced, surfaced_count, message_ids, dream_id, conflicted, conflicts_with,
    (SELECT json_group_array(query) FROM fact_irrelevant WHERE fact_id = fact.id)
    FROM fact";

fn from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<Fact> {
    Ok(Fact {
        id: r.get(0)?,
        content: r.get(1)?,
        tier: r.get(2)?,
        scope: r.get(3)?,
        project: r.get(4)?,
        sensitivity: r.get(5)?,
        source: r.get(6)?,
        session_id: r.get(7)?,
        message_id: r.get(8)?,
        confidence: r.get(9)?,
        expires_at: r.get(10)?,
        created_at: r.get(11)?,
        updated_at: r.get(12)?,
        confirmed_at: r.get(13)?,
        useful: r.get(14)?,
        irrelevant: r.get(15)?,
        last_surfaced: r.get(16)?,
        surfaced_count: r.get(17)?,
        message_ids: json_list(r.get::<_, Option<String>>(18)?),
        dream_id: r.get(19)?,
        conflicted: r.get(20)?,
        conflicts_with: r.get(21)?,
        irrelevant_for: json_list(r.get::<_, Option<String>>(22)?),
    })
}

fn json_list(text: Option<String>) -> Vec<String> {
    text.and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_default()
}

impl Store {
    /// The facts a workspace sees (its project's and the global ones), not forgotten and not
    /// expired at `now_ms`, oldest first.
    pub fn facts(&self, project: &str, now_ms: i64) -> Result<Vec<Fact>> {
        let mut stmt = self.conn.prepare(&format!(
            "{SELECT} WHERE forgotten = 0 AND (scope = 'global' OR project = ?1)
               AND (expires_at IS NULL OR expires_at > ?2) ORDER BY created_at, id"
        ))?;
        let rows = stmt.query_map(params![project, now_ms], from_row)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// One fact unless it was forgotten (a forgotten fact is out of every reach).
    pub fn fact(&self, id: &str) -> Result<Option<Fact>> {
        use rusqlite::OptionalExtension;
        Ok(self
            .conn
            .query_row(
                &format!("{SELECT} WHERE id = ?1 AND forgotten = 0"),
                params![id],
                from_row,
            )
            .optional()?)
    }

    /// The live fact holding `content` in that place (what a write of it updates).
    pub fn fact_with_text(
        &self,
        scope: FactScope,
        project: Option<&str>,
        content: &str,
    ) -> Result<Option<Fact>> {
        use rusqlite::OptionalExtension;
        Ok(self
            .conn
            .query_row(
                &format!(
                    "{SELECT} WHERE scope = ?1 AND project IS ?2 AND norm = ?3 AND forgotten = 0"
                ),
                params![scope, project, crate::facts::normalize(content)],
                from_row,
            )
            .optional()?)
    }

    /// The facts dream `dream_id` wrote.
    pub fn facts_of_dream(&self, dream_id: &str) -> Result<Vec<Fact>> {
        let mut stmt = self.conn.prepare(&format!(
            "{SELECT} WHERE dream_id = ?1 ORDER BY created_at, id"
        ))?;
        let rows = stmt.query_map(params![dream_id], from_row)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// Session `sid`'s dreams, oldest first.
    pub fn dreams(&self, sid: &str) -> Result<Vec<Dream>> {
        let mut stmt = self.conn.prepare(
            "SELECT id, session_id, project, from_message_id, to_message_id, state, candidates,
                    outcomes, error, started_at, completed_at
             FROM dream WHERE session_id = ?1 ORDER BY started_at, rowid",
        )?;
        let rows = stmt.query_map(params![sid], |r| {
            Ok(Dream {
                id: r.get(0)?,
                session_id: r.get(1)?,
                project: r.get(2)?,
                from_message_id: r.get(3)?,
                to_message_id: r.get(4)?,
                state: r.get(5)?,
                candidates: r
                    .get::<_, Option<String>>(6)?
                    .and_then(|t| serde_json::from_str(&t).ok()),
                outcomes: r
                    .get::<_, Option<String>>(7)?
                    .and_then(|t| serde_json::from_str(&t).ok())
                    .unwrap_or_default(),
                error: r.get(8)?,
                started_at: r.get(9)?,
                completed_at: r.get(10)?,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }
}

/// One dream as recorded: `started` (the model was asked), `extracted` (it answered, its
/// candidates are kept), `completed`.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Dream {
    pub id: String,
    pub session_id: String,
    pub project: String,
    pub from_message_id: String,
    pub to_message_id: String,
    pub state: String,
    pub candidates: Option<Vec<super::DreamCandidate>>,
    pub outcomes: Vec<super::DreamOutcome>,
    pub error: Option<String>,
    pub started_at: i64,
    pub completed_at: Option<i64>,
}
