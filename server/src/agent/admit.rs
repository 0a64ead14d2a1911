//! Input into a session: admission into the inbox (persisted before the editor hears back),
//! the baseline before the first model call, and promotion of inbox input to a user message.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::{Agent, AgentError, Result, baseline};
use crate::editor::Update;
use crate::status::PartKind;
use crate::store::{Event, new_id};

/// How long the very first baseline may wait for an unreadable instruction file.
const BASELINE_WAIT: Duration = Duration::from_secs(3);

impl Agent {
    /// Admits `text` into the session's inbox (a new session when `session` is `None`);
    /// `context` (what the editor showed: a selection, the open file) goes with it as a
    /// note beside the text, so the text stays the user's own words (undo gives it back).
    /// Returns (session id, input id) once it is persisted.
    pub async fn prompt(
        &self,
        session: Option<&str>,
        text: &str,
        context: Option<String>,
    ) -> Result<(String, String)> {
        let _no_revert_under_way = self.revert_guard.lock().await;
        let sid = match session {
            Some(id) => id.to_string(),
            None => self.create_session(text)?,
        };
        if self.with_store(|s| s.summary(&sid))?.is_none() {
            return Err(AgentError::not_found(format!("no session {sid}")));
        }
        // A new prompt makes a staged revert final.
        self.commit_revert(&sid)?;
        let input_id = new_id();
        let event = Event::InputAdmitted {
            input_id: input_id.clone(),
            text: text.into(),
            context: context.map_or(Value::Null, |note| json!({ "note": note })),
        };
        self.append(&sid, vec![event])?;
        Ok((sid, input_id))
    }

    /// A new, empty session; its title is the first line of `first_prompt`.
    pub fn create_session(&self, first_prompt: &str) -> Result<String> {
        let id = new_id();
        let title = first_prompt
            .lines()
            .next()
            .unwrap_or("")
            .chars()
            .take(60)
            .collect();
        let event = Event::SessionCreated {
            workspace: self.project(),
            title,
        };
        self.append(&id, vec![event])?;
        Ok(id)
    }

    /// Builds and stores the baseline before the session's first model call. An instruction
    /// file that cannot be read makes the first build wait (the input stays pending).
    pub(super) async fn ensure_baseline(
        &self,
        sid: &str,
        cancel: &CancellationToken,
    ) -> Result<()> {
        if self.with_store(|s| s.latest_epoch(sid))?.is_some() {
            return Ok(());
        }
        let started = Instant::now();
        crate::memory::seed(&self.workspace);
        loop {
            let skills = crate::tools::skill_list(&self.workspace);
            match baseline::build(&self.workspace, &skills) {
                Ok((text, record)) => {
                    let event = Event::ContextEpochStarted {
                        epoch_id: new_id(),
                        baseline: text,
                        change_record: record,
                        snapshot: None,
                        summary: None,
                        first_kept: None,
                    };
                    return self.append(sid, vec![event]);
                }
                Err(e) if started.elapsed() < BASELINE_WAIT && !cancel.is_cancelled() => {
                    tracing::warn!("baseline not ready, input stays pending: {e}");
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                Err(e) => {
                    return Err(AgentError::Baseline(format!(
                        "{e}; the input stays pending and runs once the file can be read"
                    )));
                }
            }
        }
    }

    /// Turns inbox input into a user message, with the state block, and a supplemental note
    /// when the date or the instructions changed since the baseline (or the last note).
    pub(super) async fn promote(&self, sid: &str, input_id: &str) -> Result<()> {
        let state = self.turn_state_note(sid).await?;
        let message_id = new_id();
        let input = self
            .with_store(|s| s.inbox(sid))?
            .into_iter()
            .find(|i| i.input_id == input_id);
        let context = input
            .as_ref()
            .and_then(|i| i.context["note"].as_str().map(String::from));
        let facts = self
            .surface_facts(input.as_ref().map_or("", |i| i.text.as_str()))
            .await?;
        let mut events = vec![Event::InputPromoted {
            input_id: input_id.into(),
            message_id: message_id.clone(),
            part_id: new_id(),
        }];
        let note = |data: Value| Event::PartAdded {
            part_id: new_id(),
            message_id: message_id.clone(),
            kind: PartKind::Note,
            data,
            status: None,
        };
        if let Some(text) = context {
            events.push(note(json!({ "text": text })));
        }
        let record = self.latest_record(sid)?;
        if let (Some(text), new_record) = baseline::changes(&self.workspace, &record) {
            events.push(note(json!({"text": text, "record": new_record})));
        }
        events.push(note(state));
        if let Some(data) = self.knowledge_note(sid)? {
            events.push(note(data));
        }
        if let Some((text, ids)) = facts {
            events.push(note(json!({"text": text, "facts": ids})));
            self.with_store(|s| s.append(None, &Event::FactsSurfaced { fact_ids: ids }))?;
        }
        self.append(sid, events)?;
        self.publish_user_message(sid, message_id)
    }

    /// The memory facts `prompt` gets (core ones, and those it is about), as a note's text,
    /// with their ids; `None` when none surface.
    async fn surface_facts(&self, prompt: &str) -> Result<Option<(String, Vec<String>)>> {
        let (shown, _) = self.surface(prompt).await?;
        if shown.facts.is_empty() {
            return Ok(None);
        }
        let lines: Vec<String> = shown
            .facts
            .iter()
            .map(|f| format!("- [{}] {}", f.id, crate::markdown::one_line(&f.text)))
            .collect();
        let text = format!(
            "<memory-facts>\nWhat you remember that bears on this prompt (memory_useful, \
             memory_irrelevant, memory_update and memory_forget take the ids):\n{}\n</memory-facts>",
            lines.join("\n")
        );
        Ok(Some((
            text,
            shown.facts.into_iter().map(|f| f.id).collect(),
        )))
    }

    /// What a prompt gets of the workspace's memory facts, reranked when an embeddings model
    /// is configured (`agent-lsp memory surface` shows the same).
    pub async fn surface(
        &self,
        prompt: &str,
    ) -> Result<(crate::facts::Surfaced, crate::facts::rerank::Rerank)> {
        let now = crate::facts::now_ms();
        let all = self.with_store(|s| s.facts(&self.project(), now))?;
        Ok(crate::facts::surface_reranked(&all, prompt, now, self.embedder.as_deref()).await)
    }

    /// Shows the promoted message's text in the editor.
    fn publish_user_message(&self, sid: &str, message_id: String) -> Result<()> {
        let Some(view) = self.with_store(|s| s.session(sid))? else {
            return Ok(());
        };
        if let Some(m) = view.messages.iter().find(|m| m.message_id == message_id) {
            let text = m
                .parts
                .iter()
                .filter(|p| p.kind == PartKind::Text)
                .filter_map(|p| p.data["text"].as_str())
                .collect();
            self.editor.publish(Update::UserMessage {
                session_id: sid.into(),
                message_id,
                text,
            });
        }
        Ok(())
    }

    /// The newest change record: the last note's, else the epoch's.
    fn latest_record(&self, sid: &str) -> Result<Value> {
        let view = self
            .with_store(|s| s.session(sid))?
            .ok_or_else(|| AgentError::not_found(format!("no session {sid}")))?;
        let from_note = view
            .messages
            .iter()
            .flat_map(|m| &m.parts)
            .filter(|p| p.kind == PartKind::Note)
            .filter_map(|p| p.data.get("record").cloned())
            .next_back();
        match from_note {
            Some(r) => Ok(r),
            None => Ok(self
                .with_store(|s| s.latest_epoch(sid))?
                .map(|e| e.change_record)
                .unwrap_or(Value::Null)),
        }
    }
}
