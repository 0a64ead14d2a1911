//! Projections: tables derived from the ledger.
//!
//! [`apply`] is the only code that writes them. It reads nothing but the projection state and
//! the event (its time is the event's own `created_at`, never the clock), so replaying the
//! ledger in `seq` order rebuilds exactly what live appends produced. Events that refer to
//! rows that no longer exist change nothing.

use rusqlite::{Transaction, params};

use super::event::{Envelope, Event};
use super::search;
use crate::status::{PartKind, PartStatus};

/// Projection tables, in the order they are cleared on rebuild.
pub const TABLES: &[&str] = &[
    "knowledge_export",
    "curation",
    "knowledge",
    "dream",
    "fact_irrelevant",
    "fact",
    "recall",
    "distillation",
    "part",
    "message",
    "inbox",
    "todo",
    "context_epoch",
    "permission_grant",
    "session",
];

pub fn apply(tx: &Transaction<'_>, env: &Envelope) -> rusqlite::Result<()> {
    let at = env.created_at;
    let sid = env.session_id.as_deref();
    if env.event.is_session_scoped() && sid.is_none() {
        return Ok(());
    }
    let touch = |tx: &Transaction<'_>| {
        tx.execute(
            "UPDATE session SET updated_at = ?2 WHERE id = ?1",
            params![sid, at],
        )
    };
    match &env.event {
        Event::SessionCreated { workspace, title } => {
            tx.execute(
                "INSERT OR IGNORE INTO session (id, workspace, title, status, mode, created_at, updated_at)
                 VALUES (?1, ?2, ?3, 'idle', NULL, ?4, ?4)",
                params![sid, workspace, title, at],
            )?;
        }
        // One column of the session row, and its update time.
        Event::SessionRenamed { title } => set_session_column(tx, "title", sid, title, at)?,
        Event::SessionStatus { status } => {
            set_session_column(tx, "status", sid, status.as_str(), at)?
        }
        Event::SessionModeSet { mode } => set_session_column(tx, "mode", sid, mode, at)?,
        Event::SessionDeleted => {
            for table in [
                "recall",
                "distillation",
                "part",
                "message",
                "inbox",
                "todo",
                "context_epoch",
            ] {
                tx.execute(
                    &format!("DELETE FROM {table} WHERE session_id = ?1"),
                    params![sid],
                )?;
            }
            tx.execute("DELETE FROM session WHERE id = ?1", params![sid])?;
        }
        Event::InputAdmitted {
            input_id,
            text,
            context,
        } => {
            tx.execute(
                "INSERT OR IGNORE INTO inbox (id, session_id, text, context, admitted_seq, admitted_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![input_id, sid, text, context.to_string(), env.seq, at],
            )?;
            touch(tx)?;
        }
        Event::InputPromoted {
            input_id,
            message_id,
            part_id,
        } => {
            let text: Option<String> = tx
                .query_row(
                    "SELECT text FROM inbox WHERE id = ?1 AND session_id IS ?2",
                    params![input_id, sid],
                    |r| r.get(0),
                )
                .ok();
            let Some(text) = text else { return Ok(()) };
            tx.execute("DELETE FROM inbox WHERE id = ?1", params![input_id])?;
            let added = tx.execute(
                "INSERT OR IGNORE INTO message (id, session_id, role, seq, meta, created_at)
                 VALUES (?1, ?2, 'user', ?3, 'null', ?4)",
                params![message_id, sid, env.seq, at],
            )?;
            if added == 1 {
                add_part(
                    tx,
                    part_id,
                    message_id,
                    sid,
                    PartKind::Text,
                    &serde_json::json!({ "text": text }).to_string(),
                    None,
                    env,
                )?;
                search::reindex_part(tx, part_id)?;
            }
            touch(tx)?;
        }
        Event::MessageStarted {
            message_id,
            role,
            meta,
        } => {
            tx.execute(
                "INSERT OR IGNORE INTO message (id, session_id, role, seq, meta, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
                params![message_id, sid, role, env.seq, meta.to_string(), at],
            )?;
            touch(tx)?;
        }
        Event::PartAdded {
            part_id,
            message_id,
            kind,
            data,
            status,
        } => {
            let exists: bool = tx.query_row(
                "SELECT EXISTS(SELECT 1 FROM message WHERE id = ?1 AND session_id IS ?2)",
                params![message_id, sid],
                |r| r.get(0),
            )?;
            if exists {
                add_part(
                    tx,
                    part_id,
                    message_id,
                    sid,
                    *kind,
                    &data.to_string(),
                    *status,
                    env,
                )?;
                search::reindex_part(tx, part_id)?;
                touch(tx)?;
            }
        }
        Event::TextAppended { part_id, text } => {
            // Appends to data.text with SQLite's JSON functions, so a long streamed answer
            // never round-trips through Rust per batch.
            tx.execute(
                "UPDATE part SET data = json_set(data, '$.text', coalesce(json_extract(data, '$.text'), '') || ?2),
                                 updated_at = ?3
                 WHERE id = ?1 AND session_id IS ?4",
                params![part_id, text, at, sid],
            )?;
        }
        Event::PartUpdated {
            part_id,
            data,
            status,
        } => {
            if let Some(data) = data {
                tx.execute(
                    "UPDATE part SET data = ?2, updated_at = ?3 WHERE id = ?1 AND session_id IS ?4",
                    params![part_id, data.to_string(), at, sid],
                )?;
            }
            if let Some(status) = status {
                tx.execute(
                    "UPDATE part SET status = ?2, updated_at = ?3 WHERE id = ?1 AND session_id IS ?4",
                    params![part_id, status, at, sid],
                )?;
            }
            // (Streamed text batches are indexed once the part gets its final status.)
            search::reindex_part(tx, part_id)?;
        }
        Event::MessagesDeleted { from_message_id } => {
            let from: Option<i64> = tx
                .query_row(
                    "SELECT seq FROM message WHERE id = ?1 AND session_id IS ?2",
                    params![from_message_id, sid],
                    |r| r.get(0),
                )
                .ok();
            if let Some(from) = from {
                drop_distillations_from(tx, sid, from)?;
                tx.execute(
                    "DELETE FROM recall WHERE message_id IN
                       (SELECT id FROM message WHERE session_id IS ?1 AND seq >= ?2)",
                    params![sid, from],
                )?;
                tx.execute(
                    "DELETE FROM part WHERE message_id IN
                       (SELECT id FROM message WHERE session_id IS ?1 AND seq >= ?2)",
                    params![sid, from],
                )?;
                tx.execute(
                    "DELETE FROM message WHERE session_id IS ?1 AND seq >= ?2",
                    params![sid, from],
                )?;
                touch(tx)?;
            }
        }
        Event::PermissionGranted {
            project,
            permission,
            pattern,
        } => {
            tx.execute(
                "INSERT OR REPLACE INTO permission_grant (project, permission, pattern, created_at)
                 VALUES (?1, ?2, ?3, ?4)",
                params![project, permission, pattern, at],
            )?;
        }
        Event::PermissionRevoked {
            project,
            permission,
            pattern,
        } => {
            tx.execute(
                "DELETE FROM permission_grant WHERE project = ?1 AND permission = ?2 AND pattern = ?3",
                params![project, permission, pattern],
            )?;
        }
        Event::ContextEpochStarted {
            epoch_id,
            baseline,
            change_record,
            snapshot,
            summary,
            first_kept,
        } => {
            tx.execute(
                "INSERT OR IGNORE INTO context_epoch (id, session_id, baseline, change_record, snapshot, baseline_seq, created_at, summary, first_kept)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                params![epoch_id, sid, baseline, change_record.to_string(), snapshot, env.seq, at, summary, first_kept],
            )?;
        }
        Event::RevertStaged {
            message_id,
            snapshot,
            files,
        } => {
            let revert =
                serde_json::json!({"messageId": message_id, "snapshot": snapshot, "files": files});
            tx.execute(
                "UPDATE session SET revert = ?2, updated_at = ?3 WHERE id = ?1",
                params![sid, revert.to_string(), at],
            )?;
        }
        Event::RevertCleared => {
            tx.execute(
                "UPDATE session SET revert = NULL, updated_at = ?2 WHERE id = ?1",
                params![sid, at],
            )?;
        }
        Event::Distilled {
            distillation_id,
            generation,
            text,
            from_message_id,
            to_message_id,
            consolidates,
        } => {
            // A distillation of messages a revert removed meanwhile changes nothing.
            let to_seq: Option<i64> = tx
                .query_row(
                    "SELECT seq FROM message WHERE id = ?1 AND session_id IS ?2",
                    params![to_message_id, sid],
                    |r| r.get(0),
                )
                .ok();
            let Some(to_seq) = to_seq else { return Ok(()) };
            let added = tx.execute(
                "INSERT OR IGNORE INTO distillation (id, session_id, generation, text, from_message_id, to_message_id, to_seq, archived_by, seq, created_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, NULL, ?8, ?9)",
                params![distillation_id, sid, generation, text, from_message_id, to_message_id, to_seq, env.seq, at],
            )?;
            if added == 1 {
                for id in consolidates {
                    tx.execute(
                        "UPDATE distillation SET archived_by = ?2 WHERE id = ?1 AND session_id IS ?3",
                        params![id, distillation_id, sid],
                    )?;
                }
                search::index_distillation(tx, distillation_id)?;
            }
        }
        Event::FactWritten {
            fact_id,
            content,
            tier,
            scope,
            project,
            sensitivity,
            expires_at,
            source,
            session_id,
            message_id,
            confidence,
            message_ids,
            dream_id,
            conflicts_with,
        } => {
            let norm = crate::facts::normalize(content);
            let existing: Option<String> = tx
                .query_row(
                    "SELECT id FROM fact WHERE scope = ?1 AND project IS ?2 AND norm = ?3 AND forgotten = 0",
                    params![scope, project, norm],
                    |r| r.get(0),
                )
                .ok();
            match existing {
                // The same fact again: it is confirmed, and takes the newer tier and expiry.
                Some(id) => {
                    tx.execute(
                        "UPDATE fact SET tier = ?2, expires_at = ?3, confidence = max(confidence, ?4),
                                         updated_at = ?5, confirmed_at = ?5 WHERE id = ?1",
                        params![id, tier, expires_at, confidence, at],
                    )?;
                }
                None => {
                    // A contradiction counts only with a live fact this one can see: its
                    // own place's, or a global one.
                    let conflicts_with: Option<String> = match conflicts_with {
                        Some(other) => tx
                            .query_row(
                                "SELECT id FROM fact WHERE id = ?1 AND forgotten = 0
                                   AND (scope = 'global' OR (scope = ?2 AND project IS ?3))",
                                params![other, scope, project],
                                |r| r.get(0),
                            )
                            .ok(),
                        None => None,
                    };
                    let ids = serde_json::to_string(message_ids).unwrap_or_else(|_| "[]".into());
                    tx.execute(
                        "INSERT OR IGNORE INTO fact (id, scope, project, tier, sensitivity, content, norm, source,
                             session_id, message_id, confidence, expires_at, created_at, updated_at,
                             message_ids, dream_id, conflicts_with)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?13, ?14, ?15, ?16)",
                        params![fact_id, scope, project, tier, sensitivity, content, norm, source,
                                session_id, message_id, confidence, expires_at, at,
                                ids, dream_id, conflicts_with],
                    )?;
                    if let Some(other) = conflicts_with {
                        settle_conflict(tx, fact_id)?;
                        settle_conflict(tx, &other)?;
                    }
                }
            }
        }
        Event::FactUpdated { fact_id, content } => {
            tx.execute(
                "UPDATE fact SET content = ?2, norm = ?3, updated_at = ?4, confirmed_at = ?4 WHERE id = ?1",
                params![fact_id, content, crate::facts::normalize(content), at],
            )?;
            resolve_conflicts(tx, fact_id)?;
        }
        Event::FactForgotten { fact_id } => {
            tx.execute(
                "UPDATE fact SET forgotten = 1, updated_at = ?2 WHERE id = ?1",
                params![fact_id, at],
            )?;
            resolve_conflicts(tx, fact_id)?;
        }
        Event::DreamStarted {
            dream_id,
            project,
            from_message_id,
            to_message_id,
        } => {
            tx.execute(
                "INSERT OR IGNORE INTO dream (id, session_id, project, from_message_id, to_message_id, state, started_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, 'started', ?6)",
                params![dream_id, sid.unwrap_or_default(), project, from_message_id, to_message_id, at],
            )?;
        }
        Event::DreamExtracted {
            dream_id,
            candidates,
        } => {
            let json = serde_json::to_string(candidates).unwrap_or_else(|_| "[]".into());
            tx.execute(
                "UPDATE dream SET state = 'extracted', candidates = ?2 WHERE id = ?1 AND state = 'started'",
                params![dream_id, json],
            )?;
        }
        Event::DreamCompleted {
            dream_id,
            outcomes,
            error,
        } => {
            let json = serde_json::to_string(outcomes).unwrap_or_else(|_| "[]".into());
            tx.execute(
                "UPDATE dream SET state = 'completed', outcomes = ?2, error = ?3, completed_at = ?4 WHERE id = ?1",
                params![dream_id, json, error, at],
            )?;
        }
        Event::FactsSurfaced { fact_ids } => {
            for id in fact_ids {
                tx.execute(
                    "UPDATE fact SET last_surfaced = ?2, surfaced_count = surfaced_count + 1 WHERE id = ?1",
                    params![id, at],
                )?;
            }
        }
        Event::FactFeedback {
            fact_id,
            useful,
            query,
        } => {
            if let (false, Some(q)) = (useful, query) {
                tx.execute(
                    "INSERT INTO fact_irrelevant (fact_id, query, at) VALUES (?1, ?2, ?3)",
                    params![fact_id, q, at],
                )?;
            }
            let sql = if *useful {
                "UPDATE fact SET useful = useful + 1, confirmed_at = ?2 WHERE id = ?1"
            } else {
                "UPDATE fact SET irrelevant = irrelevant + 1 WHERE id = ?1 AND ?2 = ?2"
            };
            tx.execute(sql, params![fact_id, at])?;
        }
        Event::KnowledgeAdded {
            entry_id,
            kind,
            content,
            project,
            source,
            session_id,
            message_ids,
            curation_id,
            replaces,
        } => {
            let norm = crate::facts::normalize(content);
            let merged = serde_json::to_string(replaces).unwrap_or_else(|_| "[]".into());
            let known: Option<String> = tx
                .query_row(
                    "SELECT id FROM knowledge WHERE project IS ?1 AND norm = ?2 AND forgotten = 0
                       AND replaced_by IS NULL
                       AND id NOT IN (SELECT value FROM json_each(?3))",
                    params![project, norm, merged],
                    |r| r.get(0),
                )
                .ok();
            // (A merge may say what one of the entries it replaces says.)
            if known.is_none() {
                let ids = serde_json::to_string(message_ids).unwrap_or_else(|_| "[]".into());
                let added = tx.execute(
                    "INSERT OR IGNORE INTO knowledge (id, kind, content, norm, project, source, session_id,
                         message_ids, curation_id, replaces, created_at, updated_at)
                     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?11)",
                    params![entry_id, kind, content, norm, project, source, session_id, ids,
                            curation_id, merged, at],
                )?;
                // Only entries of the same place merge (a consolidation in one project can
                // never retire another's, or a global one).
                if added == 1 {
                    for id in replaces {
                        tx.execute(
                            "UPDATE knowledge SET replaced_by = ?2, updated_at = ?3
                             WHERE id = ?1 AND project IS ?4 AND replaced_by IS NULL",
                            params![id, entry_id, at, project],
                        )?;
                    }
                }
            }
        }
        Event::KnowledgeUpdated {
            entry_id,
            content,
            kind,
        } => {
            tx.execute(
                "UPDATE knowledge SET content = ?2, norm = ?3, kind = ?4, updated_at = ?5 WHERE id = ?1",
                params![entry_id, content, crate::facts::normalize(content), kind, at],
            )?;
        }
        Event::KnowledgeForgotten { entry_id } => {
            tx.execute(
                "UPDATE knowledge SET forgotten = 1, updated_at = ?2 WHERE id = ?1",
                params![entry_id, at],
            )?;
        }
        Event::KnowledgeCurated {
            curation_id,
            project,
            consolidation,
            session_id,
            from_message_id,
            to_message_id,
            added,
            error,
        } => {
            let added = serde_json::to_string(added).unwrap_or_else(|_| "[]".into());
            tx.execute(
                "INSERT OR IGNORE INTO curation (id, project, consolidation, session_id, from_message_id,
                     to_message_id, added, error, at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                params![curation_id, project, consolidation, session_id, from_message_id,
                        to_message_id, added, error, at],
            )?;
        }
        Event::KnowledgeExported {
            project,
            file,
            entry_ids,
        } => {
            let ids = serde_json::to_string(entry_ids).unwrap_or_else(|_| "[]".into());
            tx.execute(
                "INSERT OR REPLACE INTO knowledge_export (project, file, entry_ids, at)
                 VALUES (?1, ?2, ?3, ?4)",
                params![project, file, ids, at],
            )?;
        }
        // Memory lives in its files; the event is the record of who wrote what.
        Event::MemoryWritten { .. } => {}
        Event::TodosReplaced { todos } => {
            tx.execute("DELETE FROM todo WHERE session_id IS ?1", params![sid])?;
            for (i, t) in todos.iter().enumerate() {
                tx.execute(
                    "INSERT INTO todo (session_id, position, content, status, priority)
                     VALUES (?1, ?2, ?3, ?4, ?5)",
                    params![sid, i as i64, t.content, t.status, t.priority],
                )?;
            }
        }
    }
    Ok(())
}

/// Recomputes whether fact `id` is conflicted: it contradicts a live fact, or a live fact of
/// its own place contradicts it (another project's claim never flags it).
fn settle_conflict(tx: &Transaction<'_>, id: &str) -> rusqlite::Result<()> {
    tx.execute(
        "UPDATE fact SET conflicted = (forgotten = 0 AND (
             (conflicts_with IS NOT NULL
              AND EXISTS (SELECT 1 FROM fact o WHERE o.id = fact.conflicts_with AND o.forgotten = 0))
             OR EXISTS (SELECT 1 FROM fact o WHERE o.conflicts_with = fact.id AND o.forgotten = 0
                          AND o.scope = fact.scope AND o.project IS fact.project)))
         WHERE id = ?1",
        params![id],
    )?;
    Ok(())
}

/// Fact `id` was updated or forgotten: the conflicts it was part of are resolved.
fn resolve_conflicts(tx: &Transaction<'_>, id: &str) -> rusqlite::Result<()> {
    let partner: Option<String> = tx
        .query_row(
            "SELECT conflicts_with FROM fact WHERE id = ?1",
            params![id],
            |r| r.get(0),
        )
        .ok()
        .flatten();
    let claimants: Vec<String> = tx
        .prepare("SELECT id FROM fact WHERE conflicts_with = ?1")?
        .query_map(params![id], |r| r.get(0))?
        .collect::<rusqlite::Result<_>>()?;
    tx.execute(
        "UPDATE fact SET conflicts_with = NULL WHERE id = ?1 OR conflicts_with = ?1",
        params![id],
    )?;
    for other in std::iter::once(id.to_string())
        .chain(partner)
        .chain(claimants)
    {
        settle_conflict(tx, &other)?;
    }
    Ok(())
}

/// A revert from the message at `from_seq` on: the distillations that cover any removed
/// message go (with their recall entries), and what they had archived is current again.
fn drop_distillations_from(
    tx: &Transaction<'_>,
    sid: Option<&str>,
    from_seq: i64,
) -> rusqlite::Result<()> {
    let gone = "SELECT id FROM distillation WHERE session_id IS ?1 AND to_seq >= ?2";
    tx.execute(
        &format!("UPDATE distillation SET archived_by = NULL WHERE archived_by IN ({gone})"),
        params![sid, from_seq],
    )?;
    tx.execute(
        &format!("DELETE FROM recall WHERE part_id IN ({gone})"),
        params![sid, from_seq],
    )?;
    tx.execute(
        "DELETE FROM distillation WHERE session_id IS ?1 AND to_seq >= ?2",
        params![sid, from_seq],
    )?;
    Ok(())
}

/// `column` is one of the session table's own names, never input.
fn set_session_column(
    tx: &Transaction<'_>,
    column: &'static str,
    sid: Option<&str>,
    value: &str,
    at: i64,
) -> rusqlite::Result<()> {
    tx.execute(
        &format!("UPDATE session SET {column} = ?2, updated_at = ?3 WHERE id = ?1"),
        params![sid, value, at],
    )?;
    Ok(())
}

#[allow(clippy::too_many_arguments)]
fn add_part(
    tx: &Transaction<'_>,
    part_id: &str,
    message_id: &str,
    session_id: Option<&str>,
    kind: PartKind,
    data: &str,
    status: Option<PartStatus>,
    env: &Envelope,
) -> rusqlite::Result<()> {
    tx.execute(
        "INSERT OR IGNORE INTO part (id, message_id, session_id, seq, kind, data, status, updated_at)
         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
        params![
            part_id,
            message_id,
            session_id,
            env.seq,
            kind,
            data,
            status,
            env.created_at
        ],
    )?;
    Ok(())
}
