//! Distillation: instead of folding a long session into one checkpoint, an *observer* turns
//! each stretch of undistilled messages into a dated observation log (generation 0), and a
//! *reflector* consolidates those logs into one working-context document (generation 1)
//! when they outgrow their share of the window. Both are isolated calls: no tools, not part
//! of the conversation, their results events in the log. Consolidated logs are archived,
//! never deleted, and recall finds every one of them.
//!
//! Requests show the distillations only once the raw messages outgrow their budget: the
//! context's cut then moves forward (a new context epoch, whose summary is the distilled
//! prefix as rendered here), and between cuts every request extends the previous one.

use futures::StreamExt;
use std::sync::Arc;

use super::{Agent, AgentError, Result, baseline};
use crate::provider::{ChatMessage, ChatRequest, Provider, ProviderEvent};
use crate::status::{PartKind, PartStatus};
use crate::store::{Distillation, Event, MessageView, new_id};

/// Tool outputs longer than this (characters) reach the observer as a stub.
pub(super) const STUB_OVER_CHARS: usize = 1_500;
/// The most one observer or reflector answer may take, in tokens.
const MAX_DISTILL_TOKENS: u32 = 4_096;

const OBSERVER: &str = "You are the observer of a coding session. You read a stretch of the \
conversation between a user and a coding assistant and write its observation log: the record \
the assistant works from once these messages are no longer shown to it.

Write one observation per line, oldest first, as
- [HH:MM] [high|medium|low] what happened
high: the user's requests and constraints, decisions, bug fixes, errors and their causes, files \
changed; medium: findings and intermediate results; low: routine steps.

Rules:
- Exact, never approximate: numbers, file paths, line numbers, identifiers, commands, versions \
and error text exactly as they appear.
- Always record every bug fix (what was wrong, where, the fix), every file created, changed or \
deleted, every error message, every command and its outcome, every decision with its reason \
(and what was tried and rejected), and what the assistant itself produced: code, answers, plans.
- Keep the user's own words where a request or preference depends on them.
- Leave out pleasantries and repetition; never add what the messages do not say.
Answer with the log only.";

const REFLECTOR: &str = "You consolidate the observation logs of a coding session into its \
working context: one document the assistant works from in place of the logs. When a previous \
working context is given, merge it with the new logs: keep what still holds, update what \
changed, drop what was superseded. Keep exactly, character for character: file paths, \
commands, error messages, numbers, names and identifiers. Answer with exactly these sections:

## Current state
(the task, what is done, in progress, blocked, and the next step)
## Key decisions
(each with its reason; what was tried and rejected, and why)
## Technical changes
(files, functions, commands, configuration — exact)
## Timeline
(dated, one line per event that matters)";

/// What a distillation pass did.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// Messages turned into observations.
    pub observed_messages: usize,
    /// Whether the logs were consolidated.
    pub reflected: bool,
    /// Messages the next request shows raw (after `distill_now`'s cut).
    pub kept_messages: usize,
    /// The session's distillations afterwards.
    pub distillations: Vec<Distillation>,
}

/// A time as the observer reads it (UTC).
fn clock(ms: i64, format: &str) -> String {
    jiff::Timestamp::from_millisecond(ms)
        .map(|t| t.strftime(format).to_string())
        .unwrap_or_default()
}

/// The text of a part the conversation shows: a text, or a note with text that is neither
/// the state block (the observer reads the state apart) nor the surfaced memory facts
/// (memory, not conversation).
fn shown_text(p: &crate::store::PartView) -> Option<&str> {
    let text = p.data["text"].as_str().filter(|t| !t.trim().is_empty())?;
    match p.kind {
        PartKind::Text => Some(text),
        PartKind::Note if p.data.get("state").is_none() && p.data.get("facts").is_none() => {
            Some(text)
        }
        _ => None,
    }
}

/// A `memory_write` of a local-only fact: its text stays out of every isolated call.
fn writes_local_only(name: &str, input: &str) -> bool {
    name == "memory_write"
        && serde_json::from_str::<serde_json::Value>(input)
            .is_ok_and(|v| v["sensitivity"] == "local-only")
}

/// A message as lines of the observer's (and the dreamer's) transcript; long tool outputs
/// become a stub that says what was lost and where it is.
pub(super) fn render(m: &MessageView, out: &mut String) {
    let at = clock(m.created_at, "%H:%M");
    for p in &m.parts {
        match p.kind {
            PartKind::Text | PartKind::Note => {
                if let Some(text) = shown_text(p) {
                    out.push_str(&format!("[{at}] [{}] {}\n", m.role, text.trim_end()));
                }
            }
            PartKind::Tool => {
                let name = p.data["name"].as_str().unwrap_or("tool");
                let mut input = p.data["input"].as_str().unwrap_or("");
                let mut output = p.data["output"].as_str().unwrap_or("");
                if writes_local_only(name, input) {
                    (input, output) = ("{\"sensitivity\":\"local-only\"}", "[not shown]");
                }
                let status = p.status.map_or("unknown", PartStatus::as_str);
                out.push_str(&format!("[{at}] [tool {name} {input}] ({status}) "));
                if output.chars().count() > STUB_OVER_CHARS {
                    let whereabouts = format!("in message {} of the session log", m.message_id);
                    out.push_str(&stub(name, output, status == "completed", &whereabouts));
                } else {
                    out.push_str(output.trim_end());
                }
                out.push('\n');
            }
            _ => {}
        }
    }
}

/// The loss-annotated stand-in for a long tool output: what it was, how big, whether it
/// failed, its first lines and the files it names, and where the whole of it is.
pub(super) fn stub(tool: &str, output: &str, succeeded: bool, whereabouts: &str) -> String {
    let paths: Vec<String> = output
        .split_whitespace()
        .map(|w| w.trim_matches(|c: char| "\"'`()[]{}<>,;:".contains(c)))
        .filter(|w| w.contains('/') && w.contains('.') && !w.contains("://") && w.len() < 200)
        .take(8)
        .map(String::from)
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    let head: String = output.lines().take(3).collect::<Vec<_>>().join(" | ");
    format!(
        "[output of {tool} not shown: {} characters, {}; first lines: {}{}; the full output is \
         {whereabouts}, and the recall tool finds it]",
        output.chars().count(),
        if succeeded { "succeeded" } else { "failed" },
        head.chars().take(200).collect::<String>(),
        if paths.is_empty() {
            String::new()
        } else {
            format!("; files named: {}", paths.join(", "))
        }
    )
}

/// Tokens a message takes in a request (text and tool input/output), by the estimate.
pub(super) fn message_tokens(m: &MessageView) -> usize {
    m.parts
        .iter()
        .map(|p| match p.kind {
            PartKind::Text | PartKind::Note => {
                crate::tokens::estimate(p.data["text"].as_str().unwrap_or(""))
            }
            PartKind::Tool => {
                crate::tokens::estimate(p.data["input"].as_str().unwrap_or(""))
                    + crate::tokens::estimate(p.data["output"].as_str().unwrap_or(""))
            }
            _ => 0,
        })
        .sum()
}

/// Whether a message shows in a request (an answer that failed before any output does not).
pub(super) fn shows(m: &MessageView) -> bool {
    m.parts.iter().any(|p| {
        p.kind == PartKind::Tool
            || matches!(p.kind, PartKind::Text | PartKind::Note)
                && p.data["text"].as_str().is_some_and(|t| !t.is_empty())
    })
}

/// The messages that show, as the transcript an isolated reader gets (a dream, a curation):
/// each under `## message N` from 1, with the ids the numbers stand for.
pub(super) fn numbered_transcript(messages: &[MessageView]) -> (String, Vec<String>) {
    let shown: Vec<&MessageView> = messages.iter().filter(|m| shows(m)).collect();
    let mut transcript = String::new();
    for (n, m) in shown.iter().enumerate() {
        transcript.push_str(&format!("## message {}\n", n + 1));
        render(m, &mut transcript);
    }
    let ids = shown.iter().map(|m| m.message_id.clone()).collect();
    (transcript, ids)
}

/// Whether a message is finished: nothing in it still streams or runs.
pub(super) fn settled(m: &MessageView) -> bool {
    !m.parts.iter().any(|p| {
        matches!(
            p.status,
            Some(PartStatus::Streaming | PartStatus::Pending | PartStatus::Running)
        )
    })
}

/// The index of the first message after the last of `ends` (the last messages that
/// distillations or dreams covered); 0 when none is among `messages`.
pub(super) fn first_after(messages: &[MessageView], ends: &[&str]) -> usize {
    ends.iter()
        .filter_map(|end| messages.iter().position(|m| m.message_id == *end))
        .max()
        .map_or(0, |i| i + 1)
}

/// The index of the first message no distillation covers.
fn undistilled_from(messages: &[MessageView], distillations: &[Distillation]) -> usize {
    let ends: Vec<&str> = distillations
        .iter()
        .map(|d| d.to_message_id.as_str())
        .collect();
    first_after(messages, &ends)
}

/// The distilled prefix of a request whose raw messages start at `first_raw`: the working
/// context, then the observations not consolidated yet that begin before the cut. Each text
/// sits in a fence of its own, so nothing in it can break the document's structure.
pub fn render_prefix(
    messages: &[MessageView],
    distillations: &[Distillation],
    first_raw: &str,
) -> String {
    let cut = messages
        .iter()
        .position(|m| m.message_id == first_raw)
        .unwrap_or(messages.len());
    let before_cut = |d: &Distillation| {
        messages
            .iter()
            .position(|m| m.message_id == d.from_message_id)
            .is_some_and(|i| i < cut)
    };
    let current: Vec<&Distillation> = distillations.iter().filter(|d| !d.archived).collect();
    let mut doc = String::from(
        "<distilled-context>\nWhat this session did before the messages that follow, distilled \
         from its full record (the recall tool finds every message and tool output verbatim).\n",
    );
    for d in current.iter().filter(|d| d.generation >= 1) {
        doc.push_str(&format!(
            "\n## Working context (as of {})\n\n{}",
            clock(d.created_at, "%Y-%m-%d %H:%M UTC"),
            crate::markdown::fenced(&d.text)
        ));
    }
    for d in current
        .iter()
        .filter(|d| d.generation == 0 && before_cut(d))
    {
        doc.push_str(&format!(
            "\n## Observations (written {})\n\n{}",
            clock(d.created_at, "%Y-%m-%d %H:%M UTC"),
            crate::markdown::fenced(&d.text)
        ));
    }
    doc.push_str("</distilled-context>");
    doc
}

/// Where the raw messages should start for them to take at most `target` tokens: the
/// earliest place after `from` from which they fit, else the newest message that shows.
/// A cut lands on a prompt, or inside the newest turn (whose prompt is then shown too);
/// never before `from`.
fn choose_cut(messages: &[MessageView], from: usize, target: usize) -> usize {
    let Some(last) = messages.iter().rposition(shows) else {
        return from;
    };
    let newest_prompt = messages.iter().rposition(|m| m.role == "user");
    let mut suffix = vec![0usize; messages.len() + 1];
    for i in (0..messages.len()).rev() {
        suffix[i] = suffix[i + 1] + message_tokens(&messages[i]);
    }
    let cost = |i: usize| match newest_prompt {
        Some(p) if i > p => suffix[i] + message_tokens(&messages[p]),
        _ => suffix[i],
    };
    let candidate = |i: &usize| {
        let m = &messages[*i];
        shows(m) && (m.role == "user" || newest_prompt.is_some_and(|p| *i > p))
    };
    (from.max(1)..=last)
        .filter(candidate)
        .find(|&i| cost(i) <= target)
        .unwrap_or(last)
        .max(from)
}

impl Agent {
    /// The lock that keeps one distillation at a time per session (a turn's and the one in
    /// the background after the last turn).
    fn distill_lock(&self, sid: &str) -> Arc<tokio::sync::Mutex<()>> {
        super::session_lock(&self.distilling, sid)
    }

    pub(super) fn isolated_provider(&self, what: &str) -> Result<Arc<dyn Provider>> {
        self.provider.clone().ok_or_else(|| {
            AgentError::NoModel(format!("no model provider is configured: {what} needs one"))
        })
    }

    /// One isolated call: `system` as the system prompt, `text` as the only message, no
    /// tools; the distillation model (default the session's).
    pub(super) async fn isolated_call(
        &self,
        provider: &dyn Provider,
        what: &str,
        system: &str,
        text: String,
    ) -> Result<String> {
        let request = ChatRequest {
            model: self
                .config
                .distill_model
                .clone()
                .unwrap_or_else(|| self.model()),
            system: vec![system.into()],
            messages: vec![ChatMessage::User { text }],
            tools: Vec::new(),
            max_tokens: self.limits().max_output_tokens.min(MAX_DISTILL_TOKENS),
        };
        let failed = |e: String| AgentError::refused(format!("{what} failed: {e}"));
        let mut stream = provider
            .stream(&request)
            .await
            .map_err(|e| failed(e.to_string()))?;
        let mut answer = String::new();
        while let Some(event) = stream.next().await {
            match event.map_err(|e| failed(e.to_string()))? {
                ProviderEvent::TextDelta(t) => {
                    answer.push_str(&t);
                    if answer.len() > super::MAX_ANSWER_BYTES {
                        return Err(failed(format!(
                            "the answer passed {} MB",
                            super::MAX_ANSWER_BYTES / (1024 * 1024)
                        )));
                    }
                }
                ProviderEvent::Finish(_) => break,
                _ => {}
            }
        }
        if answer.trim().is_empty() {
            return Err(failed("the model answered with nothing".into()));
        }
        Ok(answer.trim().to_string())
    }

    /// Observes `messages` in segments of at most `distill_max_segment` messages, each small
    /// enough for the observer's own window; one generation-0 distillation per segment.
    async fn observe(
        &self,
        provider: &dyn Provider,
        sid: &str,
        messages: &[MessageView],
    ) -> Result<usize> {
        let limits = self.limits();
        let room = (limits.usable_input() as usize)
            .saturating_sub(crate::tokens::estimate(OBSERVER) + 1_024)
            .max(1_024);
        let max_segment = self.config.distill_max_segment as usize;
        let state = self.state_for_distillation();
        let mut observed = 0;
        let mut start = 0;
        while start < messages.len() {
            let mut transcript = String::new();
            let mut end = start;
            while end < messages.len() && end - start < max_segment {
                let mut piece = String::new();
                render(&messages[end], &mut piece);
                let over =
                    crate::tokens::estimate(&transcript) + crate::tokens::estimate(&piece) > room;
                if over && end > start {
                    break;
                }
                transcript.push_str(&piece);
                end += 1;
            }
            let segment = &messages[start..end];
            let text = format!(
                "{state}<conversation from=\"{}\" to=\"{}\">\n{transcript}</conversation>\n\n\
                 Write the observation log of this stretch now.",
                clock(segment[0].created_at, "%Y-%m-%d %H:%M UTC"),
                clock(segment[segment.len() - 1].created_at, "%Y-%m-%d %H:%M UTC"),
            );
            let log = self
                .isolated_call(provider, "distillation", OBSERVER, text)
                .await?;
            self.append(
                sid,
                vec![Event::Distilled {
                    distillation_id: new_id(),
                    generation: 0,
                    text: log,
                    from_message_id: segment[0].message_id.clone(),
                    to_message_id: segment[segment.len() - 1].message_id.clone(),
                    consolidates: Vec::new(),
                }],
            )?;
            observed += segment.len();
            start = end;
        }
        self.log_distillation(format!("Distilled {observed} messages into observations."));
        Ok(observed)
    }

    /// Consolidates the current distillations into one working context when together they
    /// pass the distilled share of the window. Returns whether it did.
    async fn reflect_if_due(&self, provider: &dyn Provider, sid: &str) -> Result<bool> {
        let current: Vec<Distillation> = self
            .with_store(|s| s.distillations(sid))?
            .into_iter()
            .filter(|d| !d.archived)
            .collect();
        let tokens: usize = current
            .iter()
            .map(|d| crate::tokens::estimate(&d.text))
            .sum();
        let budget = self.config.budget.distilled * f64::from(self.limits().context_window);
        let logs = current.iter().filter(|d| d.generation == 0).count();
        if (tokens as f64) <= budget || logs == 0 {
            return Ok(false);
        }
        let mut text = self.state_for_distillation();
        for d in current.iter().filter(|d| d.generation >= 1) {
            text.push_str(&format!(
                "<previous-working-context>\n{}\n</previous-working-context>\n\n",
                d.text
            ));
        }
        for d in current.iter().filter(|d| d.generation == 0) {
            text.push_str(&format!(
                "<observations written=\"{}\">\n{}\n</observations>\n\n",
                clock(d.created_at, "%Y-%m-%d %H:%M UTC"),
                d.text
            ));
        }
        text.push_str(&format!(
            "Write the working context now, in at most {} words.",
            (budget * 0.5) as usize
        ));
        let context = self
            .isolated_call(provider, "distillation", REFLECTOR, text)
            .await?;
        let (first, last) = (&current[0], &current[current.len() - 1]);
        self.append(
            sid,
            vec![Event::Distilled {
                distillation_id: new_id(),
                generation: 1,
                text: context,
                from_message_id: first.from_message_id.clone(),
                to_message_id: last.to_message_id.clone(),
                consolidates: current.iter().map(|d| d.id.clone()).collect(),
            }],
        )?;
        tracing::info!(session = %sid, consolidated = current.len(), "reflected");
        self.log_distillation(format!(
            "Consolidated {} distillations into the working context.",
            current.len()
        ));
        Ok(true)
    }

    /// The messages not distilled yet that are finished (a turn may still be writing the
    /// newest), up to `before` when given.
    fn undistilled(&self, sid: &str, before: Option<usize>) -> Result<Vec<MessageView>> {
        let view = self
            .with_store(|s| s.session(sid))?
            .ok_or_else(|| AgentError::not_found(format!("no session {sid}")))?;
        let from = undistilled_from(&view.messages, &view.distillations);
        let to = before.unwrap_or(view.messages.len()).max(from);
        let pending = view.messages[from..to].iter().take_while(|m| settled(m));
        Ok(pending.filter(|m| shows(m)).cloned().collect())
    }

    /// After a turn, in the background: observes once enough messages are undistilled
    /// (`distill_min_messages`), then consolidates if due. A distillation already under way
    /// for the session makes this a no-op.
    pub async fn distill_due(&self, sid: &str) -> Result<Option<Report>> {
        let lock = self.distill_lock(sid);
        let Ok(_one_at_a_time) = lock.try_lock() else {
            return Ok(None);
        };
        let provider = self.isolated_provider("distillation")?;
        let pending = self.undistilled(sid, None)?;
        if pending.len() < self.config.distill_min_messages as usize {
            return Ok(None);
        }
        let observed = self.observe(provider.as_ref(), sid, &pending).await?;
        let reflected = self.reflect_if_due(provider.as_ref(), sid).await?;
        tracing::info!(session = %sid, observed, reflected, "distilled after the turn");
        Ok(Some(self.report(sid, observed, reflected, 0)?))
    }

    /// `agent/compact`, `session compact`: distils everything now, consolidates if due, and
    /// starts a context whose raw part is the latest turn.
    pub async fn distill_now(&self, sid: &str) -> Result<Report> {
        let lock = self.distill_lock(sid);
        let _one_at_a_time = lock.lock().await;
        let provider = self.isolated_provider("distillation")?;
        let pending = self.undistilled(sid, None)?;
        let observed = self.observe(provider.as_ref(), sid, &pending).await?;
        let reflected = self.reflect_if_due(provider.as_ref(), sid).await?;
        let view = self
            .with_store(|s| s.session(sid))?
            .ok_or_else(|| AgentError::not_found(format!("no session {sid}")))?;
        if view.distillations.is_empty() {
            return Err(AgentError::refused(
                "nothing to distil yet: the session has no finished message",
            ));
        }
        let cut = view.messages.iter().rposition(|m| m.role == "user");
        let kept = match cut {
            Some(i) if i > self.cut_index(sid, &view.messages)? => {
                self.start_context(sid, &view.messages[i].message_id)?;
                view.messages.len() - i
            }
            _ => 0,
        };
        self.report(sid, observed, reflected, kept)
    }

    fn report(&self, sid: &str, observed: usize, reflected: bool, kept: usize) -> Result<Report> {
        Ok(Report {
            observed_messages: observed,
            reflected,
            kept_messages: kept,
            distillations: self.with_store(|s| s.distillations(sid))?,
        })
    }

    /// Where the current context's raw messages start.
    fn cut_index(&self, sid: &str, messages: &[MessageView]) -> Result<usize> {
        let epoch = self.with_store(|s| s.latest_epoch(sid))?;
        Ok(epoch
            .and_then(|e| e.first_kept)
            .and_then(|id| messages.iter().position(|m| m.message_id == id))
            .unwrap_or(0))
    }

    /// In a turn whose raw messages outgrew their share: moves the cut forward until they
    /// take at most `target` tokens (to the newest message at the most), distilling first
    /// what the cut leaves behind, and starts a context there. `false` when the cut cannot
    /// move.
    pub(super) async fn advance_cut(&self, sid: &str, target: usize) -> Result<bool> {
        let lock = self.distill_lock(sid);
        let _one_at_a_time = lock.lock().await;
        let view = self
            .with_store(|s| s.session(sid))?
            .ok_or_else(|| AgentError::not_found(format!("no session {sid}")))?;
        let from = self.cut_index(sid, &view.messages)?;
        let cut = choose_cut(&view.messages, from, target);
        if cut <= from {
            return Ok(false);
        }
        let provider = self.isolated_provider("distillation")?;
        let pending = self.undistilled(sid, Some(cut))?;
        let observed = if pending.is_empty() {
            0
        } else {
            self.observe(provider.as_ref(), sid, &pending).await?
        };
        let reflected = self.reflect_if_due(provider.as_ref(), sid).await?;
        self.start_context(sid, &view.messages[cut].message_id)?;
        tracing::info!(session = %sid, observed, reflected, raw_from = cut, "the context's cut moved");
        Ok(true)
    }

    /// A new context epoch: the baseline printed afresh, the distilled prefix as of now, and
    /// the raw messages from `first_raw` on.
    fn start_context(&self, sid: &str, first_raw: &str) -> Result<()> {
        let view = self
            .with_store(|s| s.session(sid))?
            .ok_or_else(|| AgentError::not_found(format!("no session {sid}")))?;
        let prefix = render_prefix(&view.messages, &view.distillations, first_raw);
        let (baseline_text, record) =
            baseline::build(&self.workspace, &crate::tools::skill_list(&self.workspace))?;
        self.append(
            sid,
            vec![Event::ContextEpochStarted {
                epoch_id: new_id(),
                baseline: baseline_text,
                change_record: record,
                snapshot: None,
                summary: Some(prefix),
                first_kept: Some(first_raw.to_string()),
            }],
        )
    }
}

/// The JSON form of a report for the CLI (the protocol's `CompactResult` shape).
pub fn to_json(r: &Report) -> serde_json::Value {
    serde_json::json!({
        "observedMessages": r.observed_messages,
        "reflected": r.reflected,
        "keptMessages": r.kept_messages,
        "distillations": r.distillations,
    })
}
