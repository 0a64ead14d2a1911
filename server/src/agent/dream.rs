//! The dream: a tool-less, isolated generation that reads what is new in a session since its
//! last dream and extracts the facts worth remembering (see `facts::dream` for the prompt,
//! the reading of the answer and the decisions on duplicates and conflicts).
//!
//! Each dream is a two-phase record in the log: `DreamStarted` names the messages, the
//! model's answer is kept as `DreamExtracted` before any fact is written, and
//! `DreamCompleted` closes it. A dream cut off anywhere is resumed by the next one: before
//! the answer it asks again, after it writes the candidates it has not written yet (its own
//! facts carry its id). So each candidate is written at least once and never twice.

use serde::Serialize;

use super::distill::{first_after, numbered_transcript, settled};
use super::{Agent, AgentError, Result, session_lock};
use crate::facts::dream::{self as rules, Decision, DreamError};
use crate::facts::{self, NewFact};
use crate::provider::Provider;
use crate::status::{FactScope, FactSource, Sensitivity};
use crate::store::{Dream, DreamCandidate, DreamOutcome, Event, Fact, MessageView, new_id};

/// The fewest new messages worth a dream (a prompt and its answer).
const MIN_MESSAGES: usize = 2;
/// The most messages one dream reads.
const MAX_MESSAGES: usize = 50;
/// The most remembered facts the dreamer is shown (those nearest the conversation).
const MAX_KNOWN: usize = 60;

/// What dreaming did.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DreamReport {
    /// The dreams finished this time, resumed ones first.
    pub dreams: Vec<Dream>,
    pub resumed: usize,
    pub created: usize,
    pub conflicted: usize,
    pub duplicates: usize,
    pub rejected: usize,
}

impl DreamReport {
    fn add(&mut self, dream: Dream) {
        for o in &dream.outcomes {
            match o.kind.as_str() {
                "created" => self.created += 1,
                "conflicted" => self.conflicted += 1,
                "duplicate" => self.duplicates += 1,
                _ => self.rejected += 1,
            }
        }
        self.dreams.push(dream);
    }
}

/// Where the messages no dream has read begin: after the last message any dream covers.
fn undreamt_from(messages: &[MessageView], dreams: &[Dream]) -> usize {
    let ends: Vec<&str> = dreams.iter().map(|d| d.to_message_id.as_str()).collect();
    first_after(messages, &ends)
}

impl Agent {
    /// Dreams on session `sid` now: resumes a dream that was cut off, then reads what is new.
    pub async fn dream(&self, sid: &str) -> Result<DreamReport> {
        let lock = session_lock(&self.dreaming, sid);
        let _one_at_a_time = lock.lock().await;
        self.dream_locked(sid).await
    }

    /// In the background, after a turn (`idle` false) or after a pause (`idle` true): dreams
    /// when it is on, a model is configured, and either the session has been quiet for
    /// `dream_idle_seconds` or `dream_after_turns` prompts came since the last dream. A dream
    /// under way makes this a no-op.
    pub async fn dream_due(&self, sid: &str, idle: bool) -> Result<Option<DreamReport>> {
        if !self.config.dream || self.provider.is_none() {
            return Ok(None);
        }
        let lock = session_lock(&self.dreaming, sid);
        let Ok(_one_at_a_time) = lock.try_lock() else {
            return Ok(None);
        };
        let Some(view) = self.with_store(|s| s.session(sid))? else {
            return Ok(None);
        };
        let dreams = self.with_store(|s| s.dreams(sid))?;
        let unfinished = dreams.iter().any(|d| d.state != "completed");
        let pending = &view.messages[undreamt_from(&view.messages, &dreams)..];
        let prompts = pending.iter().filter(|m| m.role == "user").count();
        let quiet = pending.last().is_some_and(|m| {
            facts::now_ms() - m.created_at >= self.config.dream_idle_seconds as i64 * 1_000
        });
        let due = unfinished
            || pending.len() >= MIN_MESSAGES
                && (prompts >= self.config.dream_after_turns as usize || idle && quiet);
        if !due {
            return Ok(None);
        }
        self.dream_locked(sid).await.map(Some)
    }

    async fn dream_locked(&self, sid: &str) -> Result<DreamReport> {
        let provider = self.isolated_provider("a dream")?;
        let mut report = DreamReport::default();
        let unfinished: Vec<Dream> = self
            .with_store(|s| s.dreams(sid))?
            .into_iter()
            .filter(|d| d.state != "completed")
            .collect();
        for dream in unfinished {
            tracing::info!(session = %sid, dream = %dream.id, state = %dream.state, "resuming a dream");
            report.add(self.finish_dream(provider.as_ref(), sid, dream).await?);
            report.resumed += 1;
        }
        loop {
            let view = self
                .with_store(|s| s.session(sid))?
                .ok_or_else(|| AgentError::not_found(format!("no session {sid}")))?;
            let dreams = self.with_store(|s| s.dreams(sid))?;
            let pending: Vec<&MessageView> = view.messages
                [undreamt_from(&view.messages, &dreams)..]
                .iter()
                .take_while(|m| settled(m))
                .take(MAX_MESSAGES)
                .collect();
            if pending.len() < MIN_MESSAGES {
                break;
            }
            let id = new_id();
            self.append(
                sid,
                vec![Event::DreamStarted {
                    dream_id: id.clone(),
                    project: view.summary.workspace.clone(),
                    from_message_id: pending[0].message_id.clone(),
                    to_message_id: pending[pending.len() - 1].message_id.clone(),
                }],
            )?;
            let dream = self.recorded_dream(sid, &id)?;
            report.add(self.finish_dream(provider.as_ref(), sid, dream).await?);
        }
        Ok(report)
    }

    fn recorded_dream(&self, sid: &str, id: &str) -> Result<Dream> {
        self.with_store(|s| s.dreams(sid))?
            .into_iter()
            .find(|d| d.id == id)
            .ok_or_else(|| AgentError::not_found(format!("no dream {id}")))
    }

    /// Takes a recorded dream to its end: asks the model unless its answer is kept, then
    /// writes what it has not written yet. A failed call leaves it started (resumed later);
    /// an answer that cannot be read ends it with the error.
    async fn finish_dream(
        &self,
        provider: &dyn Provider,
        sid: &str,
        dream: Dream,
    ) -> Result<Dream> {
        let candidates = match &dream.candidates {
            Some(kept) => kept.clone(),
            None => match self.extract(provider, sid, &dream).await? {
                Ok(found) => {
                    self.append(
                        sid,
                        vec![Event::DreamExtracted {
                            dream_id: dream.id.clone(),
                            candidates: found.clone(),
                        }],
                    )?;
                    found
                }
                Err(error) => {
                    tracing::warn!(session = %sid, dream = %dream.id, "{error}");
                    return self.complete(sid, &dream.id, Vec::new(), Some(error.to_string()));
                }
            },
        };
        let outcomes = self.write_dreamt(sid, &dream, &candidates)?;
        self.complete(sid, &dream.id, outcomes, None)
    }

    fn complete(
        &self,
        sid: &str,
        id: &str,
        outcomes: Vec<DreamOutcome>,
        error: Option<String>,
    ) -> Result<Dream> {
        self.append(
            sid,
            vec![Event::DreamCompleted {
                dream_id: id.into(),
                outcomes,
                error,
            }],
        )?;
        self.recorded_dream(sid, id)
    }

    /// The model's candidates for the dream's messages (`Err` inside: the answer or the
    /// messages would not do, which ends the dream).
    async fn extract(
        &self,
        provider: &dyn Provider,
        sid: &str,
        dream: &Dream,
    ) -> Result<std::result::Result<Vec<DreamCandidate>, DreamError>> {
        let view = self
            .with_store(|s| s.session(sid))?
            .ok_or_else(|| AgentError::not_found(format!("no session {sid}")))?;
        let at = |id: &str| view.messages.iter().position(|m| m.message_id == id);
        let (Some(from), Some(to)) = (at(&dream.from_message_id), at(&dream.to_message_id)) else {
            return Ok(Err(DreamError::MessagesGone));
        };
        let (transcript, ids) = numbered_transcript(&view.messages[from..=to]);
        let facts = self.with_store(|s| s.facts(&dream.project, facts::now_ms()))?;
        let shown: Vec<Fact> = facts
            .into_iter()
            .filter(|f| f.sensitivity != Sensitivity::LocalOnly)
            .collect();
        let known: Vec<&Fact> = if shown.len() <= MAX_KNOWN {
            shown.iter().collect()
        } else {
            facts::read(&shown, &transcript, MAX_KNOWN)
        };
        let text = rules::prompt(&known, &transcript);
        let answer = self
            .isolated_call(provider, "a dream", rules::DREAMER, text)
            .await?;
        Ok(rules::parse(&answer, &ids))
    }

    /// Writes the candidates this dream has not written yet, each checked against the
    /// workspace's facts as they stand (so a candidate can be a duplicate of the one before).
    fn write_dreamt(
        &self,
        sid: &str,
        dream: &Dream,
        candidates: &[DreamCandidate],
    ) -> Result<Vec<DreamOutcome>> {
        let mut outcomes = Vec::new();
        for c in candidates {
            let now = facts::now_ms();
            let (known, already) = self.with_store(|s| {
                Ok::<_, crate::store::StoreError>((
                    s.facts(&dream.project, now)?,
                    s.facts_of_dream(&dream.id)?,
                ))
            })?;
            let norm = facts::normalize(&c.content);
            // Written before the dream was cut off.
            if let Some(f) = already
                .iter()
                .find(|f| facts::normalize(&f.content) == norm)
            {
                outcomes.push(outcome("created", Some(&f.id), None, None));
                continue;
            }
            outcomes.push(match rules::decide(c, &known) {
                Decision::Reject(reason) => outcome("rejected", None, None, Some(reason)),
                Decision::Duplicate(id) => outcome("duplicate", None, Some(&id), None),
                Decision::Create { conflicts_with } => {
                    let fact = NewFact {
                        content: c.content.clone(),
                        tier: c.tier,
                        scope: FactScope::Project,
                        sensitivity: Sensitivity::Normal,
                        ttl_hours: c.ttl_hours,
                        source: FactSource::Dream,
                        session_id: Some(sid.into()),
                        message_id: c.message_ids.first().cloned(),
                        confidence: c.confidence,
                        message_ids: c.message_ids.clone(),
                        dream_id: Some(dream.id.clone()),
                        conflicts_with: conflicts_with.clone(),
                    };
                    let written = {
                        let mut store = self.store.lock().unwrap_or_else(|p| p.into_inner());
                        facts::write(&mut store, &dream.project, fact, now)
                    };
                    match written {
                        Ok(w) if !w.created => outcome("duplicate", None, Some(&w.id), None),
                        Ok(w) if conflicts_with.is_some() => {
                            outcome("conflicted", Some(&w.id), conflicts_with.as_deref(), None)
                        }
                        Ok(w) => outcome("created", Some(&w.id), None, None),
                        Err(facts::FactError::Store(e)) => return Err(e.into()),
                        Err(e) => outcome("rejected", None, None, Some(e.to_string())),
                    }
                }
            });
        }
        Ok(outcomes)
    }
}

fn outcome(
    kind: &str,
    fact_id: Option<&str>,
    existing: Option<&str>,
    reason: Option<String>,
) -> DreamOutcome {
    DreamOutcome {
        kind: kind.into(),
        fact_id: fact_id.map(String::from),
        existing: existing.map(String::from),
        reason,
    }
}
