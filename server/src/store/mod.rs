//! The event store: one SQLite database per user, an append-only ledger (`event`) and the
//! projections derived from it.
//!
//! There is one write path, [`Store::append`]: the event is inserted and applied to the
//! projections in the same IMMEDIATE transaction, so a reader never sees one without the other
//! and a crash loses either both or neither. Several server processes share the file (WAL,
//! `busy_timeout`).

pub mod event;
pub mod facts;
mod journal;
mod knowledge;
mod projection;
mod schema;
mod search;

use std::path::{Path, PathBuf};
use std::time::Duration;

use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use serde::Serialize;
use serde_json::Value;

pub use event::{DreamCandidate, DreamOutcome, Envelope, Event, Todo};
pub use facts::{Dream, Fact};

use crate::status::{PartKind, PartStatus};
pub use journal::{IndexedEntry, JournalTextHit};
pub use knowledge::{Curation, KnowledgeEntry};
pub use search::{Hit, Scope, identifier_words};

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("database error: {0}")]
    Sqlite(#[from] rusqlite::Error),
    #[error("cannot create the data directory {path}: {source}")]
    DataDir {
        path: PathBuf,
        source: std::io::Error,
    },
    #[error("a {0} event needs a session id")]
    MissingSession(&'static str),
    #[error("the database schema is version {found}, newer than this agent-lsp knows ({known})")]
    TooNew { found: i64, known: i64 },
}

pub type Result<T> = std::result::Result<T, StoreError>;

/// The user's database for a server, opened on first use (so starting one stays cheap) and
/// shared by its agents.
#[derive(Default)]
pub struct LazyStore(std::sync::Mutex<Option<std::sync::Arc<std::sync::Mutex<Store>>>>);

impl LazyStore {
    pub fn get(&self) -> Result<std::sync::Arc<std::sync::Mutex<Store>>> {
        let mut slot = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(s) = slot.as_ref() {
            return Ok(s.clone());
        }
        let store = std::sync::Arc::new(std::sync::Mutex::new(Store::open_default()?));
        *slot = Some(store.clone());
        Ok(store)
    }
}

pub struct Store {
    conn: Connection,
    path: PathBuf,
}

/// The context a session's requests are built in.
#[derive(Debug, Clone, PartialEq)]
pub struct Epoch {
    pub id: String,
    /// The baseline note, printed at the top of every request of the epoch.
    pub baseline: String,
    pub change_record: Value,
    /// After a compaction: what the messages before `first_kept` said, distilled.
    pub summary: Option<String>,
    pub first_kept: Option<String>,
}

/// A session as listed.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionSummary {
    pub session_id: String,
    pub workspace: String,
    pub title: String,
    pub status: String,
    pub mode: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
    /// How many messages (`messageCount`: a session view also has the `messages` list).
    #[serde(rename = "messageCount")]
    pub messages: i64,
    /// A staged revert: `{messageId, snapshot, files}`.
    pub revert: Option<Value>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PartView {
    pub part_id: String,
    pub kind: PartKind,
    pub data: Value,
    pub status: Option<PartStatus>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MessageView {
    pub message_id: String,
    pub role: String,
    pub created_at: i64,
    pub meta: Value,
    pub parts: Vec<PartView>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct InboxItem {
    pub input_id: String,
    pub text: String,
    pub context: Value,
    pub admitted_at: i64,
}

/// Everything known about one session.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionView {
    #[serde(flatten)]
    pub summary: SessionSummary,
    pub messages: Vec<MessageView>,
    pub inbox: Vec<InboxItem>,
    pub todos: Vec<Todo>,
    /// Oldest first; archived ones too.
    pub distillations: Vec<Distillation>,
}

/// A stored distillation: an observation log (generation 0) or a working context (1).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Distillation {
    pub id: String,
    pub generation: u32,
    /// Consolidated into a later one (still searchable).
    pub archived: bool,
    pub text: String,
    pub from_message_id: String,
    pub to_message_id: String,
    pub created_at: i64,
}

/// What `rebuild` did.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RebuildReport {
    pub events: u64,
    /// Events whose payload this version cannot read (written by a newer agent-lsp); skipped.
    pub unreadable: u64,
}

fn now_ms() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as i64)
        .unwrap_or(0)
}

impl Store {
    /// Opens (creating if needed) the database at `path` and migrates it.
    ///
    /// Several processes may open a fresh database at the same moment; switching it to WAL
    /// can then answer SQLITE_BUSY without consulting the busy handler, so opening is retried
    /// for a while.
    pub fn open(path: &Path) -> Result<Self> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|source| StoreError::DataDir {
                path: dir.to_path_buf(),
                source,
            })?;
        }
        let started = std::time::Instant::now();
        loop {
            match Self::try_open(path) {
                Err(StoreError::Sqlite(rusqlite::Error::SqliteFailure(e, _)))
                    if matches!(
                        e.code,
                        rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
                    ) && started.elapsed() < Duration::from_secs(10) =>
                {
                    std::thread::sleep(Duration::from_millis(10 + fastrand::u64(0..40)));
                }
                other => return other,
            }
        }
    }

    fn try_open(path: &Path) -> Result<Self> {
        let mut conn = Connection::open(path)?;
        conn.busy_timeout(Duration::from_secs(10))?;
        conn.pragma_update(None, "journal_mode", "WAL")?;
        conn.pragma_update(None, "synchronous", "NORMAL")?;
        conn.pragma_update(None, "foreign_keys", "OFF")?;
        schema::migrate(&mut conn)?;
        Ok(Self {
            conn,
            path: path.to_path_buf(),
        })
    }

    /// Opens the user's database (`$AGENT_LSP_DATA_DIR/agent-lsp.db`).
    pub fn open_default() -> Result<Self> {
        Self::open(&crate::paths::database_path())
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Appends one event and applies it to the projections, in one transaction.
    pub fn append(&mut self, session_id: Option<&str>, event: &Event) -> Result<Envelope> {
        let mut out = self.append_all(&[(session_id, event.clone())])?;
        Ok(out.pop().expect("one event in, one envelope out"))
    }

    /// Appends several events atomically (all or none), e.g. a batch of streamed deltas.
    pub fn append_all(&mut self, events: &[(Option<&str>, Event)]) -> Result<Vec<Envelope>> {
        if let Some((_, e)) = events
            .iter()
            .find(|(sid, e)| sid.is_none() && e.is_session_scoped())
        {
            return Err(StoreError::MissingSession(e.type_name()));
        }
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let mut out = Vec::with_capacity(events.len());
        {
            let mut insert = tx.prepare_cached(
                "INSERT INTO event (session_id, type, payload, created_at) VALUES (?1, ?2, ?3, ?4)",
            )?;
            for (session_id, event) in events {
                let created_at = now_ms();
                let payload = serde_json::to_string(event).expect("events always serialize");
                insert.execute(params![session_id, event.type_name(), payload, created_at])?;
                let env = Envelope {
                    seq: tx.last_insert_rowid(),
                    session_id: session_id.map(String::from),
                    created_at,
                    event: event.clone(),
                };
                projection::apply(&tx, &env)?;
                out.push(env);
            }
        }
        tx.commit()?;
        Ok(out)
    }

    /// Recomputes every projection from the ledger, in one transaction.
    pub fn rebuild(&mut self) -> Result<RebuildReport> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        for table in projection::TABLES {
            tx.execute(&format!("DELETE FROM {table}"), [])?;
        }
        let mut report = RebuildReport {
            events: 0,
            unreadable: 0,
        };
        {
            let mut stmt =
                tx.prepare("SELECT seq, session_id, payload, created_at FROM event ORDER BY seq")?;
            let mut rows = stmt.query([])?;
            while let Some(row) = rows.next()? {
                let payload: String = row.get(2)?;
                let Ok(event) = serde_json::from_str::<Event>(&payload) else {
                    tracing::warn!(seq = row.get::<_, i64>(0)?, "skipping an unreadable event");
                    report.unreadable += 1;
                    continue;
                };
                let env = Envelope {
                    seq: row.get(0)?,
                    session_id: row.get(1)?,
                    created_at: row.get(3)?,
                    event,
                };
                projection::apply(&tx, &env)?;
                report.events += 1;
            }
        }
        tx.commit()?;
        Ok(report)
    }

    /// The ledger, oldest first (optionally one session's).
    pub fn events(&self, session_id: Option<&str>) -> Result<Vec<Envelope>> {
        let mut stmt = self.conn.prepare(
            "SELECT seq, session_id, payload, created_at FROM event
             WHERE ?1 IS NULL OR session_id = ?1 ORDER BY seq",
        )?;
        let rows = stmt.query_map(params![session_id], |row| {
            Ok((
                row.get::<_, i64>(0)?,
                row.get::<_, Option<String>>(1)?,
                row.get::<_, String>(2)?,
                row.get::<_, i64>(3)?,
            ))
        })?;
        let mut out = Vec::new();
        for row in rows {
            let (seq, session_id, payload, created_at) = row?;
            if let Ok(event) = serde_json::from_str(&payload) {
                out.push(Envelope {
                    seq,
                    session_id,
                    created_at,
                    event,
                });
            }
        }
        Ok(out)
    }

    pub fn event_count(&self) -> Result<i64> {
        Ok(self
            .conn
            .query_row("SELECT count(*) FROM event", [], |r| r.get(0))?)
    }

    /// Sessions, most recently updated first.
    pub fn sessions(&self) -> Result<Vec<SessionSummary>> {
        let mut stmt = self.conn.prepare(&format!(
            "{SUMMARY_SELECT} ORDER BY s.updated_at DESC, s.id"
        ))?;
        let rows = stmt.query_map([], summary_from_row)?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// One session's summary (status, mode, revert), without its messages.
    pub fn summary(&self, session_id: &str) -> Result<Option<SessionSummary>> {
        Ok(self
            .conn
            .query_row(
                &format!("{SUMMARY_SELECT} WHERE s.id = ?1"),
                params![session_id],
                summary_from_row,
            )
            .optional()?)
    }

    /// One session with its messages, parts, inbox and todos.
    pub fn session(&self, session_id: &str) -> Result<Option<SessionView>> {
        let Some(summary) = self.summary(session_id)? else {
            return Ok(None);
        };
        let mut messages: Vec<MessageView> = Vec::new();
        {
            let mut stmt = self.conn.prepare(
                "SELECT id, role, created_at, meta FROM message WHERE session_id = ?1 ORDER BY seq",
            )?;
            let rows = stmt.query_map(params![session_id], |r| {
                Ok(MessageView {
                    message_id: r.get(0)?,
                    role: r.get(1)?,
                    created_at: r.get(2)?,
                    meta: json_column(r.get::<_, String>(3)?),
                    parts: Vec::new(),
                })
            })?;
            for m in rows {
                messages.push(m?);
            }
            let mut parts = self.conn.prepare(
                "SELECT id, kind, data, status FROM part WHERE message_id = ?1 ORDER BY seq",
            )?;
            for m in &mut messages {
                let rows = parts.query_map(params![m.message_id], |r| {
                    // A kind or status a newer agent-lsp wrote: the part is left out.
                    let kind = PartKind::parse(&r.get::<_, String>(1)?);
                    let status = r.get::<_, Option<String>>(3)?;
                    let Some(kind) = kind else { return Ok(None) };
                    Ok(Some(PartView {
                        part_id: r.get(0)?,
                        kind,
                        data: json_column(r.get::<_, String>(2)?),
                        status: status.as_deref().and_then(PartStatus::parse),
                    }))
                })?;
                let parts: Vec<Option<PartView>> = rows.collect::<rusqlite::Result<_>>()?;
                m.parts = parts.into_iter().flatten().collect();
            }
        }
        let inbox = self.inbox(session_id)?;
        let mut stmt = self.conn.prepare(
            "SELECT content, status, priority FROM todo WHERE session_id = ?1 ORDER BY position",
        )?;
        let todos = stmt
            .query_map(params![session_id], |r| {
                Ok(Todo {
                    content: r.get(0)?,
                    status: r.get(1)?,
                    priority: r.get(2)?,
                })
            })?
            .collect::<rusqlite::Result<_>>()?;
        let distillations = self.distillations(session_id)?;
        Ok(Some(SessionView {
            summary,
            messages,
            inbox,
            todos,
            distillations,
        }))
    }

    /// A session's distillations, oldest first.
    pub fn distillations(&self, session_id: &str) -> Result<Vec<Distillation>> {
        let mut stmt = self.conn.prepare(
            "SELECT id, generation, archived_by IS NOT NULL, text, from_message_id, to_message_id, created_at
             FROM distillation WHERE session_id = ?1 ORDER BY seq",
        )?;
        let rows = stmt.query_map(params![session_id], |r| {
            Ok(Distillation {
                id: r.get(0)?,
                generation: r.get(1)?,
                archived: r.get(2)?,
                text: r.get(3)?,
                from_message_id: r.get(4)?,
                to_message_id: r.get(5)?,
                created_at: r.get(6)?,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// Admitted input not yet promoted, oldest first.
    pub fn inbox(&self, session_id: &str) -> Result<Vec<InboxItem>> {
        let mut stmt = self.conn.prepare(
            "SELECT id, text, context, admitted_at FROM inbox WHERE session_id = ?1 ORDER BY admitted_seq",
        )?;
        let rows = stmt.query_map(params![session_id], |r| {
            Ok(InboxItem {
                input_id: r.get(0)?,
                text: r.get(1)?,
                context: json_column(r.get::<_, String>(2)?),
                admitted_at: r.get(3)?,
            })
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// The newest context epoch of a session: (epoch id, baseline text, change record).
    pub fn latest_epoch(&self, session_id: &str) -> Result<Option<Epoch>> {
        Ok(self
            .conn
            .query_row(
                "SELECT id, baseline, change_record, summary, first_kept FROM context_epoch
                 WHERE session_id = ?1 ORDER BY baseline_seq DESC LIMIT 1",
                params![session_id],
                |r| {
                    Ok(Epoch {
                        id: r.get(0)?,
                        baseline: r.get(1)?,
                        change_record: json_column(r.get::<_, String>(2)?),
                        summary: r.get(3)?,
                        first_kept: r.get(4)?,
                    })
                },
            )
            .optional()?)
    }

    /// Parts in one of `statuses`: (session id, part id, data), oldest first.
    pub fn parts_with_status(
        &self,
        statuses: &[PartStatus],
    ) -> Result<Vec<(String, String, Value)>> {
        let marks = vec!["?"; statuses.len()].join(", ");
        let mut stmt = self.conn.prepare(&format!(
            "SELECT session_id, id, data FROM part
             WHERE session_id IS NOT NULL AND status IN ({marks}) ORDER BY seq"
        ))?;
        let rows = stmt.query_map(rusqlite::params_from_iter(statuses), |r| {
            Ok((r.get(0)?, r.get(1)?, json_column(r.get::<_, String>(2)?)))
        })?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// Saves "always" answers for a project, or revokes them: one event each, in one batch.
    pub fn record_grants(
        &mut self,
        project: &str,
        grants: &[(String, String)],
        revoke: bool,
    ) -> Result<()> {
        let batch: Vec<(Option<&str>, Event)> = grants
            .iter()
            .map(|(permission, pattern)| {
                let (project, permission, pattern) =
                    (project.to_string(), permission.clone(), pattern.clone());
                let event = if revoke {
                    Event::PermissionRevoked {
                        project,
                        permission,
                        pattern,
                    }
                } else {
                    Event::PermissionGranted {
                        project,
                        permission,
                        pattern,
                    }
                };
                (None, event)
            })
            .collect();
        self.append_all(&batch).map(|_| ())
    }

    /// Saved "always" answers of a project: (permission, pattern).
    pub fn grants(&self, project: &str) -> Result<Vec<(String, String)>> {
        let mut stmt = self.conn.prepare(
            "SELECT permission, pattern FROM permission_grant WHERE project = ?1 ORDER BY created_at",
        )?;
        let rows = stmt.query_map(params![project], |r| Ok((r.get(0)?, r.get(1)?)))?;
        Ok(rows.collect::<rusqlite::Result<_>>()?)
    }

    /// `PRAGMA integrity_check`: "ok" when the file is sound.
    pub fn integrity_check(&self) -> Result<String> {
        let mut stmt = self.conn.prepare("PRAGMA integrity_check")?;
        let lines: Vec<String> = stmt
            .query_map([], |r| r.get(0))?
            .collect::<rusqlite::Result<_>>()?;
        Ok(lines.join("\n"))
    }

    /// Every projection row as text, in a fixed order: two stores with equal dumps have
    /// equal projections (used to prove rebuild == live).
    pub fn projection_dump(&self) -> Result<String> {
        let mut out = String::new();
        for table in projection::TABLES {
            let mut stmt = self
                .conn
                .prepare(&format!("SELECT * FROM {table} ORDER BY 1, 2"))?;
            let columns = stmt.column_count();
            let mut rows = stmt.query([])?;
            out.push_str(table);
            out.push('\n');
            while let Some(row) = rows.next()? {
                for i in 0..columns {
                    let v: rusqlite::types::Value = row.get(i)?;
                    out.push_str(&format!("{v:?}\t"));
                }
                out.push('\n');
            }
        }
        Ok(out)
    }
}

const SUMMARY_SELECT: &str =
    "SELECT s.id, s.workspace, s.title, s.status, s.mode, s.created_at, s.updated_at,
        (SELECT count(*) FROM message m WHERE m.session_id = s.id), s.revert FROM session s";

fn summary_from_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<SessionSummary> {
    Ok(SessionSummary {
        session_id: r.get(0)?,
        workspace: r.get(1)?,
        title: r.get(2)?,
        status: r.get(3)?,
        mode: r.get(4)?,
        created_at: r.get(5)?,
        updated_at: r.get(6)?,
        messages: r.get(7)?,
        revert: r.get::<_, Option<String>>(8)?.map(json_column),
    })
}

fn json_column(text: String) -> Value {
    serde_json::from_str(&text).unwrap_or(Value::String(text))
}

/// A new random id, time-ordered (UUIDv7).
pub fn new_id() -> String {
    uuid::Uuid::now_v7().to_string()
}

#[cfg(test)]
mod tests;
