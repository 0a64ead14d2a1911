//! Schema migrations, keyed on SQLite's `user_version`: migration N brings version N-1 to N.

use rusqlite::{Connection, TransactionBehavior};

use super::{Result, StoreError};

const MIGRATIONS: &[&str] = &[
    // 1: the ledger and the projections of DESIGN §2.
    "CREATE TABLE event (
         seq        INTEGER PRIMARY KEY AUTOINCREMENT,
         session_id TEXT,
         type       TEXT NOT NULL,
         payload    TEXT NOT NULL,
         created_at INTEGER NOT NULL
     );
     CREATE INDEX event_session ON event (session_id, seq);
     CREATE TABLE session (
         id         TEXT PRIMARY KEY,
         workspace  TEXT NOT NULL,
         title      TEXT NOT NULL,
         status     TEXT NOT NULL,
         mode       TEXT,
         created_at INTEGER NOT NULL,
         updated_at INTEGER NOT NULL
     );
     CREATE TABLE message (
         id         TEXT PRIMARY KEY,
         session_id TEXT NOT NULL,
         role       TEXT NOT NULL,
         seq        INTEGER NOT NULL,
         meta       TEXT NOT NULL,
         created_at INTEGER NOT NULL
     );
     CREATE INDEX message_session ON message (session_id, seq);
     CREATE TABLE part (
         id         TEXT PRIMARY KEY,
         message_id TEXT NOT NULL,
         session_id TEXT,
         seq        INTEGER NOT NULL,
         kind       TEXT NOT NULL,
         data       TEXT NOT NULL,
         status     TEXT,
         updated_at INTEGER NOT NULL
     );
     CREATE INDEX part_message ON part (message_id, seq);
     CREATE TABLE inbox (
         id           TEXT PRIMARY KEY,
         session_id   TEXT,
         text         TEXT NOT NULL,
         context      TEXT NOT NULL,
         admitted_seq INTEGER NOT NULL,
         admitted_at  INTEGER NOT NULL
     );
     CREATE TABLE permission_grant (
         project    TEXT NOT NULL,
         permission TEXT NOT NULL,
         pattern    TEXT NOT NULL,
         created_at INTEGER NOT NULL,
         PRIMARY KEY (project, permission, pattern)
     );
     CREATE TABLE context_epoch (
         id            TEXT PRIMARY KEY,
         session_id    TEXT,
         baseline      TEXT NOT NULL,
         change_record TEXT NOT NULL,
         snapshot      TEXT,
         baseline_seq  INTEGER NOT NULL,
         created_at    INTEGER NOT NULL
     );
     CREATE TABLE todo (
         session_id TEXT,
         position   INTEGER NOT NULL,
         content    TEXT NOT NULL,
         status     TEXT NOT NULL,
         priority   TEXT NOT NULL,
         PRIMARY KEY (session_id, position)
     );",
    // 2: a staged revert per session (message id, saved snapshot, files), as JSON.
    "ALTER TABLE session ADD COLUMN revert TEXT;",
    // 3: recall, the full-text index of message texts and tool results (search.rs); `words`
    // holds the words of identifiers. Filled for existing parts right after (see migrate).
    "CREATE VIRTUAL TABLE recall USING fts5(
         body, words,
         session_id UNINDEXED, message_id UNINDEXED, part_id UNINDEXED, source UNINDEXED,
         paths UNINDEXED, created_at UNINDEXED,
         tokenize = 'porter unicode61'
     );",
    // 4: compaction: an epoch's summary of the messages before `first_kept`.
    "ALTER TABLE context_epoch ADD COLUMN summary TEXT;
     ALTER TABLE context_epoch ADD COLUMN first_kept TEXT;",
    // 5: distillations: observation logs (generation 0) and working contexts (1); a
    // consolidated one is archived by the one that consolidated it, never deleted. `to_seq`
    // is the seq of the last message it covers (a revert drops what covered its messages).
    "CREATE TABLE distillation (
         id              TEXT PRIMARY KEY,
         session_id      TEXT,
         generation      INTEGER NOT NULL,
         text            TEXT NOT NULL,
         from_message_id TEXT NOT NULL,
         to_message_id   TEXT NOT NULL,
         to_seq          INTEGER NOT NULL,
         archived_by     TEXT,
         seq             INTEGER NOT NULL,
         created_at      INTEGER NOT NULL
     );
     CREATE INDEX distillation_session ON distillation (session_id, seq);",
    // 6: memory facts with their provenance; `norm` is the text as compared for dedup.
    "CREATE TABLE fact (
         id             TEXT PRIMARY KEY,
         scope          TEXT NOT NULL,
         project        TEXT,
         tier           TEXT NOT NULL,
         sensitivity    TEXT NOT NULL,
         content        TEXT NOT NULL,
         norm           TEXT NOT NULL,
         source         TEXT NOT NULL,
         session_id     TEXT,
         message_id     TEXT,
         confidence     REAL NOT NULL,
         expires_at     INTEGER,
         forgotten      INTEGER NOT NULL DEFAULT 0,
         created_at     INTEGER NOT NULL,
         updated_at     INTEGER NOT NULL,
         confirmed_at   INTEGER,
         useful         INTEGER NOT NULL DEFAULT 0,
         irrelevant     INTEGER NOT NULL DEFAULT 0,
         last_surfaced  INTEGER,
         surfaced_count INTEGER NOT NULL DEFAULT 0
     );
     CREATE INDEX fact_place ON fact (scope, project, norm);",
    // 7: dreams (a two-phase record per stretch of a session), dreamt facts' provenance,
    // conflicts, and the prompts a fact was marked irrelevant for.
    "ALTER TABLE fact ADD COLUMN message_ids TEXT NOT NULL DEFAULT '[]';
     ALTER TABLE fact ADD COLUMN dream_id TEXT;
     ALTER TABLE fact ADD COLUMN conflicts_with TEXT;
     ALTER TABLE fact ADD COLUMN conflicted INTEGER NOT NULL DEFAULT 0;
     CREATE TABLE fact_irrelevant (
         fact_id  TEXT NOT NULL,
         query    TEXT NOT NULL,
         at       INTEGER NOT NULL
     );
     CREATE INDEX fact_irrelevant_fact ON fact_irrelevant (fact_id);
     CREATE TABLE dream (
         id              TEXT PRIMARY KEY,
         session_id      TEXT NOT NULL,
         project         TEXT NOT NULL,
         from_message_id TEXT NOT NULL,
         to_message_id   TEXT NOT NULL,
         state           TEXT NOT NULL,
         candidates      TEXT,
         outcomes        TEXT,
         error           TEXT,
         started_at      INTEGER NOT NULL,
         completed_at    INTEGER
     );
     CREATE INDEX dream_session ON dream (session_id, started_at);",
    // 8: the journal's index: a cache of the entry files (not a projection: the files are
    // the truth), fingerprinted by modification time and size; `words` as in recall.
    "CREATE TABLE journal_entry (
         path     TEXT PRIMARY KEY,
         id       TEXT NOT NULL,
         mtime    INTEGER NOT NULL,
         size     INTEGER NOT NULL,
         title    TEXT NOT NULL,
         created  TEXT NOT NULL,
         project  TEXT NOT NULL,
         tags     TEXT NOT NULL
     );
     CREATE INDEX journal_entry_id ON journal_entry (id);
     CREATE VIRTUAL TABLE journal_fts USING fts5(
         title, body, words, path UNINDEXED,
         tokenize = 'porter unicode61'
     );",
    // 9: long-term knowledge (a projection of the `knowledge_*` events): the entries, the
    // curations (extractions and consolidations), and what each agents file last got.
    "CREATE TABLE knowledge (
         id           TEXT PRIMARY KEY,
         kind         TEXT NOT NULL,
         content      TEXT NOT NULL,
         norm         TEXT NOT NULL,
         project      TEXT,
         source       TEXT NOT NULL,
         session_id   TEXT,
         message_ids  TEXT NOT NULL DEFAULT '[]',
         curation_id  TEXT,
         replaces     TEXT NOT NULL DEFAULT '[]',
         replaced_by  TEXT,
         forgotten    INTEGER NOT NULL DEFAULT 0,
         created_at   INTEGER NOT NULL,
         updated_at   INTEGER NOT NULL
     );
     CREATE INDEX knowledge_place ON knowledge (project, norm);
     CREATE TABLE curation (
         id              TEXT PRIMARY KEY,
         project         TEXT NOT NULL,
         consolidation   INTEGER NOT NULL,
         session_id      TEXT,
         from_message_id TEXT,
         to_message_id   TEXT,
         added           TEXT NOT NULL,
         error           TEXT,
         at              INTEGER NOT NULL
     );
     CREATE INDEX curation_session ON curation (session_id, at);
     CREATE TABLE knowledge_export (
         project   TEXT NOT NULL,
         file      TEXT NOT NULL,
         entry_ids TEXT NOT NULL,
         at        INTEGER NOT NULL,
         PRIMARY KEY (project, file)
     );",
];

/// The migration that created the recall index.
const RECALL_MIGRATION: i64 = 3;

pub fn migrate(conn: &mut Connection) -> Result<()> {
    let known = MIGRATIONS.len() as i64;
    // The check and the upgrade happen under one write lock, so two processes starting at once
    // cannot both run a migration.
    let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
    let found: i64 = tx.query_row("PRAGMA user_version", [], |r| r.get(0))?;
    if found > known {
        return Err(StoreError::TooNew { found, known });
    }
    for (i, sql) in MIGRATIONS.iter().enumerate().skip(found as usize) {
        tx.execute_batch(sql)?;
        tx.pragma_update(None, "user_version", (i + 1) as i64)?;
    }
    if found > 0 && found < RECALL_MIGRATION {
        // Parts written before the index existed.
        let ids: Vec<String> = tx
            .prepare("SELECT id FROM part")?
            .query_map([], |r| r.get(0))?
            .collect::<rusqlite::Result<_>>()?;
        for id in ids {
            super::search::reindex_part(&tx, &id)?;
        }
    }
    tx.commit()?;
    Ok(())
}
