//! The steps of one turn: each step snapshots the tree, asks the model (moving the
//! context's cut or squeezing what does not fit), runs the tools the answer calls and records what changed.

use std::path::{Path, PathBuf};

use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::answer::{Answer, Interrupt, PendingCall};
use super::tool_call::CallEnd;
use super::{Agent, Result, TurnEnd, TurnOutcome, context};
use crate::status::PartKind;
use crate::store::{Event, new_id};
use crate::tools::ToolContext;

/// The most tool calls one answer runs; one more is answered with an error that says so,
/// and the rest are dropped.
pub(super) const MAX_CALLS: usize = 64;
/// How far the current turn's tool outputs are squeezed, as fractions of the usable window:
/// first to fit our estimate, then tighter after each overflow the provider reports.
const SQUEEZE: [f64; 3] = [1.0, 0.7, 0.4];

/// What a step's tool calls did.
#[derive(Default)]
struct Ran {
    written: Vec<PathBuf>,
    /// A tool ran that may change files it does not report (a command).
    unreported: bool,
    /// How the calls ended the turn, if they did.
    end: Option<TurnOutcome>,
}

impl Agent {
    fn tool_context(&self, sid: &str, cancel: &CancellationToken) -> Result<ToolContext> {
        let todos = self
            .with_store(|s| s.session(sid))?
            .map(|v| v.todos)
            .unwrap_or_default();
        let mut ctx = ToolContext::new(&self.workspace, &self.config, self.editor.clone());
        ctx.cancel = cancel.clone();
        ctx.output_bytes = crate::tools::truncate::limit_for(self.limits().usable_input());
        ctx.session_id = sid.to_string();
        ctx.policy.grants = self.with_store(|s| s.grants(&self.project()))?;
        ctx.recall = Some(crate::tools::RecallSource {
            store: self.store.clone(),
            project: self.project(),
        });
        if self.config.journal {
            let provider = self
                .config
                .provider
                .and_then(|p| serde_json::to_value(p).ok())
                .and_then(|v| v.as_str().map(String::from))
                .unwrap_or_default();
            ctx.journal = Some(crate::tools::JournalSource {
                dir: crate::journal::dir(),
                store: self.store.clone(),
                embedder: self.embedder.clone(),
                meta: crate::journal::Meta {
                    project: self.project(),
                    model: self.model(),
                    provider,
                    ..Default::default()
                },
            });
        }
        *ctx.todos.lock().unwrap_or_else(|p| p.into_inner()) = todos;
        Ok(ctx)
    }

    pub(super) async fn run_steps(&self, sid: &str, cancel: &CancellationToken) -> TurnOutcome {
        self.probe_window().await;
        // The rules a turn starts with hold for its steps; mode changes apply from the next.
        let mut ctx = match self.tool_context(sid, cancel) {
            Ok(c) => c,
            Err(e) => return self.fail(sid, e.to_string()),
        };
        let max_steps = self.config.max_steps.max(1);
        let mut recent: Vec<(String, String)> = Vec::new();
        for step in 1..=max_steps {
            if cancel.is_cancelled() {
                return TurnOutcome::cancelled();
            }
            let last = step == max_steps;
            match self.step(sid, step, last, &mut ctx, &mut recent).await {
                Ok(Some(outcome)) => return outcome,
                Ok(None) => {}
                Err(e) => return self.fail(sid, e.to_string()),
            }
        }
        TurnOutcome::ended(TurnEnd::MaxSteps)
    }

    /// One step; `Some` when it ends the turn.
    async fn step(
        &self,
        sid: &str,
        step: u32,
        last: bool,
        ctx: &mut ToolContext,
        recent: &mut Vec<(String, String)>,
    ) -> Result<Option<TurnOutcome>> {
        // A mode switch applies from the next step; the step in flight keeps its rules.
        if let Some(mode) = self.with_store(|s| s.summary(sid))?.and_then(|s| s.mode) {
            ctx.policy.mode = crate::permission::Mode::parse(&mode);
        }
        let message_id = new_id();
        // The whole tree once a turn; between steps only what may have moved since the
        // last step's snapshot (which scanned everything after a command): the buffers
        // the editor holds. The tools' own writes were tracked by that snapshot.
        let start_snapshot = self.track((step > 1).then(Vec::new)).await;
        self.append(
            sid,
            step_started(&message_id, step, &self.model(), &start_snapshot),
        )?;
        let mut answer = match self.answer_step(sid, &message_id, ctx, last).await {
            Ok(a) => a,
            Err(outcome) => return Ok(Some(outcome)),
        };
        self.refuse_extra_calls(sid, &message_id, &mut answer)?;
        if answer.refused {
            return self.refused(sid, &message_id, &answer).map(Some);
        }
        let had_calls = !answer.calls.is_empty();
        if answer.cut_off {
            self.refuse_cut_calls(sid, &message_id, &mut answer)?;
        }
        if answer.cut_off && !had_calls {
            return Ok(Some(TurnOutcome {
                end: TurnEnd::MaxTokens,
                error: Some(format!(
                    "the answer reached the output limit ({} tokens) and is cut off; ask the \
                     model to go on, or raise max_output_tokens",
                    self.limits().max_output_tokens
                )),
            }));
        }
        if answer.calls.is_empty() && had_calls {
            // Every call was cut off: the model reads why and tries again.
            return Ok(last.then(|| TurnOutcome::ended(TurnEnd::MaxSteps)));
        }
        if answer.calls.is_empty() {
            let end = if last {
                TurnEnd::MaxSteps
            } else {
                TurnEnd::EndTurn
            };
            return Ok(Some(TurnOutcome::ended(end)));
        }
        let ran = self
            .run_calls(sid, &message_id, &answer.calls, ctx, recent)
            .await;
        // Whatever the step changed is recorded, even when it ends the turn.
        self.record_patch(sid, &message_id, start_snapshot.as_deref(), &ran)
            .await?;
        self.note_state_change(sid, &message_id).await?;
        if let Some(outcome) = ran.end {
            return Ok(Some(outcome));
        }
        if ctx.cancel.is_cancelled() {
            return Ok(Some(TurnOutcome::cancelled()));
        }
        Ok(last.then(|| TurnOutcome::ended(TurnEnd::MaxSteps)))
    }

    /// Past [`MAX_CALLS`], one more call is answered with why and the rest dropped.
    fn refuse_extra_calls(&self, sid: &str, message_id: &str, answer: &mut Answer) -> Result<()> {
        let asked = answer.calls.len();
        if asked <= MAX_CALLS {
            return Ok(());
        }
        answer.calls.truncate(MAX_CALLS + 1);
        let Some(extra) = answer.calls.pop() else {
            return Ok(());
        };
        tracing::warn!(session = %sid, asked, "an answer asked for too many tool calls");
        let why = format!(
            "not run: the answer asked for {asked} tool calls and at most {MAX_CALLS} run per \
             answer (the first {MAX_CALLS} ran; the others were dropped). Ask again for what is \
             still needed."
        );
        self.record_unrun(sid, message_id, &extra, &why)
    }

    /// The provider stopped the answer as a refusal: the turn ends there, and calls it
    /// carried are recorded as not run (a refused answer is no ground to act on).
    fn refused(&self, sid: &str, message_id: &str, answer: &Answer) -> Result<TurnOutcome> {
        for call in &answer.calls {
            let why = "not run: the provider stopped this answer as a refusal";
            self.record_unrun(sid, message_id, call, why)?;
        }
        tracing::info!(session = %sid, "the provider stopped the answer as a refusal");
        Ok(TurnOutcome {
            end: TurnEnd::Refusal,
            error: Some(
                "the model's provider stopped the answer as a refusal (its safety filter); \
                 rephrase the request or try another model"
                    .into(),
            ),
        })
    }

    /// In an answer cut off at the output limit, a call whose arguments do not parse was cut
    /// inside them: it never runs, and the model reads why (its history shows the call with
    /// `{}`, which every server accepts).
    fn refuse_cut_calls(&self, sid: &str, message_id: &str, answer: &mut Answer) -> Result<()> {
        let limit = self.limits().max_output_tokens;
        let (whole, cut): (Vec<_>, Vec<_>) = std::mem::take(&mut answer.calls)
            .into_iter()
            .partition(|c| crate::provider::arguments_object(&c.arguments).is_some());
        answer.calls = whole;
        for call in &cut {
            tracing::warn!(session = %sid, tool = %call.name, "a tool call was cut off at the output limit");
            let why = format!(
                "not run: the answer reached the output limit ({limit} tokens) inside this \
                 call's arguments, so they were cut off. Call it again with less in one call \
                 (for a big file: write a part, then add the rest with edit)."
            );
            self.record_unrun(sid, message_id, call, &why)?;
        }
        Ok(())
    }

    /// Runs the calls in the model's order — a run of read-only calls at once — and stops
    /// early on cancel, when the user stops the turn, or when a record cannot be written.
    async fn run_calls(
        &self,
        sid: &str,
        message_id: &str,
        calls: &[PendingCall],
        ctx: &mut ToolContext,
        recent: &mut Vec<(String, String)>,
    ) -> Ran {
        let registry = self.registry();
        let list_version = registry.version();
        let mut ran = Ran::default();
        let mut i = 0;
        while i < calls.len() {
            if ctx.cancel.is_cancelled() {
                // Calls not started yet are recorded as interrupted, never run.
                let why = "interrupted: the turn was cancelled";
                if let Some(e) = calls[i..]
                    .iter()
                    .map(|c| self.record_unrun(sid, message_id, c, why))
                    .find_map(|r| r.err())
                {
                    ran.end = Some(self.fail(sid, e.to_string()));
                }
                break;
            }
            let together = calls[i..]
                .iter()
                .take_while(|c| registry.runs_concurrently(&c.name))
                .count();
            if together >= 2 {
                let batch = &calls[i..i + together];
                i += together;
                match self
                    .run_together(sid, message_id, batch, list_version, ctx, recent)
                    .await
                {
                    Ok(false) => continue,
                    Ok(true) => ran.end = Some(stopped_by_user()),
                    Err(e) => ran.end = Some(self.fail(sid, e.to_string())),
                }
                break;
            }
            let call = &calls[i];
            i += 1;
            ctx.call_id = call.id.clone();
            ctx.message_id = message_id.to_string();
            ran.unreported |= registry.changes_unreported_files(&call.name);
            let end = self
                .run_tool(sid, message_id, call, list_version, ctx, recent)
                .await;
            match end {
                Ok(CallEnd::Ran { files }) => ran.written.extend(files),
                Ok(CallEnd::Refused) => {}
                Ok(CallEnd::Stopped { files }) => {
                    ran.written.extend(files);
                    ran.end = Some(stopped_by_user());
                    break;
                }
                Err(e) => {
                    ran.end = Some(self.fail(sid, e.to_string()));
                    break;
                }
            }
        }
        ran
    }

    /// Read-only calls of one answer, at once: admitted (the doom-loop check) one by one,
    /// run concurrently, each with its own context, and recorded in the model's order.
    /// Whether the user stopped the turn in one of them.
    async fn run_together(
        &self,
        sid: &str,
        message_id: &str,
        calls: &[PendingCall],
        list_version: u64,
        ctx: &mut ToolContext,
        recent: &mut Vec<(String, String)>,
    ) -> Result<bool> {
        let mut admitted = Vec::new();
        for call in calls {
            if let Some(part_id) = self.admit_call(sid, message_id, call, ctx, recent).await? {
                admitted.push((call, part_id));
            }
        }
        let runs = admitted.iter().map(|(call, part_id)| {
            let mut own = ctx.clone();
            own.call_id = call.id.clone();
            own.message_id = message_id.to_string();
            async move {
                self.execute_call(sid, part_id, call, list_version, &own)
                    .await
            }
        });
        let results = futures::future::join_all(runs).await;
        let mut stopped = false;
        for ((call, part_id), result) in admitted.into_iter().zip(results) {
            let result = result?;
            stopped |= result.status == crate::tools::CallStatus::Stopped;
            self.record_result(sid, part_id, call, &result, ctx)?;
        }
        Ok(stopped)
    }

    /// After a step: a snapshot (only the files the tools wrote when no command ran, the
    /// whole tree otherwise) and a patch part listing what changed, if anything did.
    async fn record_patch(
        &self,
        sid: &str,
        message_id: &str,
        from: Option<&str>,
        ran: &Ran,
    ) -> Result<()> {
        let Some(from) = from else { return Ok(()) };
        if ran.written.is_empty() && !ran.unreported {
            return Ok(());
        }
        let paths = (!ran.unreported).then(|| {
            ran.written
                .iter()
                .filter_map(|p| p.strip_prefix(&self.workspace).ok().map(Path::to_path_buf))
                .collect::<Vec<_>>()
        });
        let (Some(to), Some(snapshots)) = (self.track(paths).await, self.snapshots()) else {
            return Ok(());
        };
        if to == from {
            return Ok(());
        }
        let (from_owned, to_owned) = (from.to_string(), to.clone());
        let changes = tokio::task::spawn_blocking(move || {
            let s = snapshots.lock().unwrap_or_else(|p| p.into_inner());
            s.changed(&from_owned, Some(&to_owned))
        })
        .await
        .map_err(|e| super::AgentError::Internal(format!("snapshot work failed: {e}")))??;
        if changes.is_empty() {
            return Ok(());
        }
        // Every snapshot path for the revert; the changes a person reads without meta entries.
        let files: Vec<&str> = changes.iter().map(|c| c.path.as_str()).collect();
        let shown: Vec<&crate::snapshot::FileChange> = changes
            .iter()
            .filter(|c| !crate::snapshot::meta::is_meta(c.path.as_bytes()))
            .collect();
        let event = Event::PartAdded {
            part_id: new_id(),
            message_id: message_id.into(),
            kind: PartKind::Patch,
            data: json!({"from": from, "to": to, "files": files, "changes": shown}),
            status: None,
        };
        self.append(sid, vec![event])
    }

    /// One step's answer. When the raw messages outgrow their share (or the request its
    /// budget), the context's cut moves forward first (what it leaves behind is distilled);
    /// what still does not fit is squeezed (older tool outputs as stubs). A provider's
    /// context-overflow error moves the cut or squeezes harder and asks again, up to
    /// [`SQUEEZE`]'s last level; one that names a smaller window starts over within it.
    async fn answer_step(
        &self,
        sid: &str,
        message_id: &str,
        ctx: &ToolContext,
        last: bool,
    ) -> std::result::Result<Answer, TurnOutcome> {
        let mut cut_tried = false;
        let mut shrunk = Shrunk::default();
        // The index into SQUEEZE of the fraction in force, if any.
        let mut squeeze: Option<usize> = None;
        // After an overflow: its message and how many outputs the request had as stubs.
        let mut overflowed: Option<(String, usize)> = None;
        self.refresh_tools(sid).await;
        loop {
            let step = context::build_request(self, sid, ctx, last, squeeze.map(|i| SQUEEZE[i]))
                .map_err(|e| self.fail(sid, e.to_string()))?;
            shrunk.stubbed = shrunk.stubbed.max(step.stubbed);
            if step.needs_cut && !cut_tried {
                cut_tried = true;
                if self.try_cut(sid, step.raw_target).await {
                    shrunk.cut = true;
                    continue;
                }
            }
            if step.over_budget && squeeze.is_none() {
                squeeze = Some(0);
                continue;
            }
            if step.fixed > step.budget as usize {
                // The system prompt and the tools alone are over: asking cannot help.
                let error = "context too long: the request cannot fit the model's window";
                let message = overflow_message(error, &step, &shrunk);
                return Err(self.answer_failed(sid, message_id, message));
            }
            if let Some((error, before)) = &overflowed
                && step.stubbed == *before
            {
                // Squeezing found nothing more to stub: the same request would fail again.
                let message = overflow_message(error, &step, &shrunk);
                return Err(self.answer_failed(sid, message_id, message));
            }
            let (error, window) = match self
                .stream_answer(sid, message_id, &step, &ctx.cancel)
                .await
            {
                Ok(answer) => return Ok(answer),
                Err(Interrupt::Outcome(outcome)) => return Err(outcome),
                Err(Interrupt::Overflow { message, window }) => (message, window),
            };
            if let Some(window) = window
                && self.learn_window(window)
            {
                // The server named its real window: build the request for it from scratch.
                tracing::info!(session = %sid, window, "the server's window is smaller than assumed");
                (cut_tried, squeeze, overflowed) = (false, None, None);
                continue;
            }
            if squeeze.is_some_and(|i| i + 1 >= SQUEEZE.len()) {
                let message = overflow_message(&error, &step, &shrunk);
                return Err(self.answer_failed(sid, message_id, message));
            }
            if !cut_tried {
                cut_tried = true;
                if self.try_cut(sid, step.raw_target / 2).await {
                    shrunk.cut = true;
                    continue;
                }
            }
            // Our estimate said it fits, so squeeze below it.
            squeeze = Some(squeeze.map_or(1, |i| i + 1));
            tracing::info!(session = %sid, "{error}; squeezing the tool outputs");
            overflowed = Some((error, step.stubbed));
        }
    }

    /// Moves the context's cut; whether it moved. A distillation that fails leaves the cut
    /// where it was (the request is squeezed instead).
    async fn try_cut(&self, sid: &str, target: usize) -> bool {
        match self.advance_cut(sid, target).await {
            Ok(moved) => moved,
            Err(e) => {
                tracing::warn!(session = %sid, "the context's cut cannot move: {e}");
                false
            }
        }
    }
}

/// How a turn ends when the user rejected a call and stopped it.
fn stopped_by_user() -> TurnOutcome {
    TurnOutcome {
        end: TurnEnd::Cancelled,
        error: Some("the user rejected a tool call and stopped the turn".into()),
    }
}

/// A step's first records: the assistant message and the snapshot it starts from.
fn step_started(message_id: &str, step: u32, model: &str, snapshot: &Option<String>) -> Vec<Event> {
    vec![
        Event::MessageStarted {
            message_id: message_id.into(),
            role: "assistant".into(),
            meta: json!({"step": step, "model": model}),
        },
        Event::PartAdded {
            part_id: new_id(),
            message_id: message_id.into(),
            kind: PartKind::StepStart,
            data: json!({ "snapshot": snapshot }),
            status: None,
        },
    ]
}

/// What a step did to make its request fit, for the message when nothing did.
#[derive(Default)]
struct Shrunk {
    /// The context's cut moved (the older part was distilled).
    cut: bool,
    /// The most tool outputs shown as stubs.
    stubbed: usize,
}

/// The error that ends a turn which does not fit however it is cut: says what was tried,
/// and when the system prompt and the tools alone fill the window, that no cut can help.
fn overflow_message(error: &str, step: &context::StepRequest, shrunk: &Shrunk) -> String {
    let error = error.trim_end_matches('.');
    let tools = step.request.tools.len();
    if step.fixed * 10 >= step.budget as usize * 9 {
        return format!(
            "{error}. The system prompt and the {tools} tool definitions alone take about {} \
             tokens of the {} the model's window leaves for input, so no conversation fits. \
             Give the model a bigger window (the server's context size, e.g. llama-server -c \
             or Ollama's num_ctx, then context_window to match) or offer fewer tools \
             ([tools] NAME = false).",
            step.fixed, step.budget
        );
    }
    let tried = match (shrunk.cut || step.distilled, shrunk.stubbed) {
        (true, 0) => "even with its older part distilled".to_string(),
        (true, n) => format!("even with its older part distilled and {n} tool outputs as stubs"),
        (false, 0) => "and there was nothing older to distill or shorten".to_string(),
        (false, n) => format!("even with {n} tool outputs as stubs"),
    };
    format!(
        "{error}. The conversation does not fit the model's context window ({} tokens for \
         input by our count) {tried}; start a new session, or set context_window to what the \
         model really takes.",
        step.budget
    )
}
