//! The curator: a tool-less, isolated generation (as the dream) that reads what is new in a
//! session since its last curation and extracts long-term knowledge entries, then, when the
//! project's entries pass `[knowledge] consolidate_at`, merges the ones that belong together
//! (see `knowledge` for the prompts and the reading of the answers).
//!
//! A curation is one batch in the log — its entries and the `KnowledgeCurated` record
//! together — so one cut off before it is written has written nothing and is done again by
//! the next, and one that was written is never done twice.

use serde::Serialize;

use super::distill::{first_after, numbered_transcript, settled};
use super::knowledge::ExportReport;
use super::{Agent, AgentError, Result, session_lock};
use crate::knowledge::{self, CONSOLIDATOR, CURATOR, NewEntry};
use crate::provider::Provider;
use crate::status::KnowledgeSource;
use crate::store::{Curation, Event, KnowledgeEntry, MessageView, new_id};

/// The fewest new messages worth a curation (a prompt and its answer).
const MIN_MESSAGES: usize = 2;
/// The most messages one curation reads.
const MAX_MESSAGES: usize = 50;
/// The most kept entries the curator is shown (the newest).
const MAX_KNOWN: usize = 80;

/// What curating did.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CurationReport {
    /// The curations done this time, in order (a consolidation last).
    pub curations: Vec<Curation>,
    /// New entries; entries the curator found that were known already; entries refused.
    pub added: usize,
    pub known: usize,
    pub rejected: usize,
    /// Entries merged into others by a consolidation.
    pub merged: usize,
    /// The export that followed (`[knowledge] auto_export`), when one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exported: Option<ExportReport>,
}

/// Where the messages no curation has read begin.
fn uncurated_from(messages: &[MessageView], curations: &[Curation]) -> usize {
    let ends: Vec<&str> = curations
        .iter()
        .filter_map(|c| c.to_message_id.as_deref())
        .collect();
    first_after(messages, &ends)
}

impl Agent {
    /// Curates session `sid` now: everything new in it, then a consolidation if due.
    pub async fn curate(&self, sid: &str) -> Result<CurationReport> {
        self.knowledge_on("curation")?;
        let lock = session_lock(&self.curating, sid);
        let _one_at_a_time = lock.lock().await;
        self.curate_locked(sid).await
    }

    /// In the background, after a turn (`idle` false) or after a pause (`idle` true):
    /// curates when knowledge is on, a model is configured, and either
    /// `curate_after_turns` prompts came since the last curation or the session has been
    /// quiet for `dream_idle_seconds`. A curation under way makes this a no-op.
    pub async fn curate_due(&self, sid: &str, idle: bool) -> Result<Option<CurationReport>> {
        if !self.config.knowledge.enabled || self.provider.is_none() {
            return Ok(None);
        }
        let lock = session_lock(&self.curating, sid);
        let Ok(_one_at_a_time) = lock.try_lock() else {
            return Ok(None);
        };
        let Some(view) = self.with_store(|s| s.session(sid))? else {
            return Ok(None);
        };
        let curations = self.with_store(|s| s.curations(sid))?;
        let pending = &view.messages[uncurated_from(&view.messages, &curations)..];
        let prompts = pending.iter().filter(|m| m.role == "user").count();
        let quiet = pending.last().is_some_and(|m| {
            crate::facts::now_ms() - m.created_at >= self.config.dream_idle_seconds as i64 * 1_000
        });
        let due = pending.len() >= MIN_MESSAGES
            && (prompts >= self.config.knowledge.curate_after_turns as usize || idle && quiet);
        if !due {
            return Ok(None);
        }
        self.curate_locked(sid).await.map(Some)
    }

    async fn curate_locked(&self, sid: &str) -> Result<CurationReport> {
        let provider = self.isolated_provider("a curation")?;
        let mut report = CurationReport::default();
        let mut project = self.project();
        loop {
            let view = self
                .with_store(|s| s.session(sid))?
                .ok_or_else(|| AgentError::not_found(format!("no session {sid}")))?;
            project.clone_from(&view.summary.workspace);
            let curations = self.with_store(|s| s.curations(sid))?;
            let pending: Vec<MessageView> = view.messages
                [uncurated_from(&view.messages, &curations)..]
                .iter()
                .take_while(|m| settled(m))
                .take(MAX_MESSAGES)
                .cloned()
                .collect();
            if pending.len() < MIN_MESSAGES {
                break;
            }
            let curation = self
                .extract_knowledge(provider.as_ref(), sid, &project, &pending, &mut report)
                .await?;
            report.curations.push(curation);
        }
        if report.added > 0 {
            if let Some(c) = self
                .consolidate_if_due(provider.as_ref(), &project, &mut report)
                .await?
            {
                report.curations.push(c);
            }
            if self.config.knowledge.auto_export && project == self.project() {
                match self.knowledge_export() {
                    Ok(r) => report.exported = Some(r),
                    Err(e) => tracing::warn!(session = %sid, "export after curation: {e}"),
                }
            }
        }
        Ok(report)
    }

    /// One extraction over `pending`: asks the curator, then writes its new entries and the
    /// curation's record in one batch. A failed call writes nothing (the next curation reads
    /// the same messages); an answer that cannot be read is recorded with its error.
    async fn extract_knowledge(
        &self,
        provider: &dyn Provider,
        sid: &str,
        project: &str,
        pending: &[MessageView],
        report: &mut CurationReport,
    ) -> Result<Curation> {
        let cross = self.config.knowledge.cross_project;
        let (transcript, ids) = numbered_transcript(pending);
        let mut known = self.with_store(|s| s.knowledge(project, cross))?;
        let shown = &known[known.len().saturating_sub(MAX_KNOWN)..];
        let text = knowledge::extraction_prompt(shown, &transcript);
        let answer = self
            .isolated_call(provider, "a curation", CURATOR, text)
            .await?;
        let curation_id = new_id();
        let mut events = Vec::new();
        let mut added = Vec::new();
        let error = match knowledge::parse_entries(&answer, &ids) {
            Ok(candidates) => {
                for c in candidates {
                    if knowledge::known_as(&c.content, &known).is_some() {
                        report.known += 1;
                        continue;
                    }
                    let entry = NewEntry {
                        kind: c.kind,
                        content: c.content,
                        project: (!(c.global && cross)).then(|| project.to_string()),
                        source: KnowledgeSource::Curator,
                        session_id: Some(sid.into()),
                        message_ids: c.message_ids,
                        curation_id: Some(curation_id.clone()),
                        replaces: Vec::new(),
                    };
                    match knowledge::added(entry.clone()) {
                        Ok((id, event)) => {
                            known.push(pending_entry(&id, &entry));
                            events.push(event);
                            added.push(id);
                        }
                        Err(e) => {
                            tracing::info!(session = %sid, "a curated entry refused: {e}");
                            report.rejected += 1;
                        }
                    }
                }
                None
            }
            Err(e) => {
                tracing::warn!(session = %sid, curation = %curation_id, "{e}");
                Some(e.to_string())
            }
        };
        report.added += added.len();
        events.push(Event::KnowledgeCurated {
            curation_id: curation_id.clone(),
            project: project.into(),
            consolidation: false,
            session_id: Some(sid.into()),
            from_message_id: pending.first().map(|m| m.message_id.clone()),
            to_message_id: pending.last().map(|m| m.message_id.clone()),
            added,
            error,
        });
        self.record_curation(events, &curation_id)
    }

    /// Merges the project's own entries once they pass `consolidate_at` (entries of every
    /// project, and other projects', are never shown to it nor retired by it).
    async fn consolidate_if_due(
        &self,
        provider: &dyn Provider,
        project: &str,
        report: &mut CurationReport,
    ) -> Result<Option<Curation>> {
        let lock = session_lock(&self.curating, &format!("consolidation of {project}"));
        let _one_at_a_time = lock.lock().await;
        let own = self.with_store(|s| s.knowledge(project, false))?;
        if own.len() <= self.config.knowledge.consolidate_at as usize {
            return Ok(None);
        }
        let text = knowledge::consolidation_prompt(&own);
        let answer = self
            .isolated_call(provider, "a consolidation", CONSOLIDATOR, text)
            .await?;
        let ids: Vec<String> = own.iter().map(|e| e.id.clone()).collect();
        let curation_id = new_id();
        let mut events = Vec::new();
        let mut added = Vec::new();
        let error = match knowledge::parse_merges(&answer, &ids) {
            Ok(merges) => {
                for m in merges {
                    let sources: Vec<&KnowledgeEntry> =
                        own.iter().filter(|e| m.from.contains(&e.id)).collect();
                    let entry = NewEntry {
                        kind: m.kind,
                        content: m.content,
                        project: Some(project.into()),
                        source: KnowledgeSource::Consolidation,
                        session_id: None,
                        message_ids: sources
                            .iter()
                            .flat_map(|e| e.message_ids.iter().cloned())
                            .collect(),
                        curation_id: Some(curation_id.clone()),
                        replaces: m.from.clone(),
                    };
                    match knowledge::added(entry) {
                        Ok((id, event)) => {
                            report.merged += m.from.len();
                            events.push(event);
                            added.push(id);
                        }
                        Err(e) => tracing::info!("a merge refused: {e}"),
                    }
                }
                None
            }
            Err(e) => Some(e.to_string()),
        };
        events.push(Event::KnowledgeCurated {
            curation_id: curation_id.clone(),
            project: project.into(),
            consolidation: true,
            session_id: None,
            from_message_id: None,
            to_message_id: None,
            added,
            error,
        });
        self.record_curation(events, &curation_id).map(Some)
    }

    /// Writes a curation's batch (outside any session: entries outlive the sessions they
    /// came from) and returns its record.
    fn record_curation(&self, events: Vec<Event>, curation_id: &str) -> Result<Curation> {
        let batch: Vec<(Option<&str>, Event)> = events.into_iter().map(|e| (None, e)).collect();
        self.with_store(|s| s.append_all(&batch))?;
        self.with_store(|s| s.curation(curation_id))?
            .ok_or_else(|| AgentError::not_found(format!("no curation {curation_id}")))
    }
}

/// An entry of this batch, for the duplicate check of the next candidates.
fn pending_entry(id: &str, e: &NewEntry) -> KnowledgeEntry {
    KnowledgeEntry {
        id: id.into(),
        kind: e.kind,
        content: e.content.clone(),
        project: e.project.clone(),
        source: e.source,
        session_id: e.session_id.clone(),
        message_ids: e.message_ids.clone(),
        curation_id: e.curation_id.clone(),
        replaces: Vec::new(),
        created_at: 0,
        updated_at: 0,
    }
}
