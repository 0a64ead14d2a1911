//! The agent loop (DESIGN §3): admit input, promote it when the session is idle and the
//! baseline is ready, then step — stream the model's answer, run the tools it asks for,
//! record everything — until the model stops calling tools or the step limit is reached.
//!
//! Everything is written to the event store as it happens, so a crash loses nothing:
//! admitted input survives and runs after a restart, and tool calls left unfinished are
//! marked failed, never re-run.

pub mod baseline;
pub mod compaction;
mod context;
pub mod prompts;
pub mod revert;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde::Serialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::config::{Action, Config};
use crate::editor::{EditorPort, PermissionReply, PermissionRequest, Update};
use crate::provider::{Provider, ProviderError, ProviderEvent, retry};
use crate::store::{Event, Store, new_id};
use crate::tools::{CallStatus, Registry, ToolContext};

/// How a turn ended, as the CLI reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TurnEnd {
    EndTurn,
    MaxSteps,
    Cancelled,
    Error,
}

#[derive(Debug, Clone, PartialEq)]
pub struct TurnOutcome {
    pub end: TurnEnd,
    pub error: Option<String>,
}

/// Deltas are written in batches: at most this often, or when this much text waits.
const FLUSH_EVERY: Duration = Duration::from_millis(50);
const FLUSH_BYTES: usize = 8 * 1024;
/// The most an answer may hold (text, reasoning and tool arguments together).
const MAX_ANSWER_BYTES: usize = 4 * 1024 * 1024;
/// The most tool calls one answer runs; one more is answered with an error that says so,
/// and the rest are dropped.
const MAX_CALLS: usize = 64;
/// How far the current turn's tool outputs are squeezed, as fractions of the usable window:
/// first to fit our estimate, then tighter after each overflow the provider reports.
const SQUEEZE: [f64; 3] = [1.0, 0.7, 0.4];
/// How long the very first baseline may wait for an unreadable instruction file.
const BASELINE_WAIT: Duration = Duration::from_secs(3);

/// The agent of one workspace.
pub struct Agent {
    pub store: Arc<Mutex<Store>>,
    pub config: Config,
    pub workspace: PathBuf,
    /// `None` for commands that never call a model (revert, undo).
    pub provider: Option<Arc<dyn Provider>>,
    pub registry: Registry,
    pub editor: Arc<dyn EditorPort>,
    /// The hidden snapshot repository, opened on first use (`None` when snapshots are off or
    /// it cannot be opened).
    snapshots: std::sync::OnceLock<Option<revert::SharedSnapshots>>,
    /// Held by a revert, redo or undo from start to end, and by a prompt while it is
    /// admitted: a prompt sent while a redo is still restoring files would otherwise commit
    /// the revert the redo is about to clear (and delete the messages it brings back).
    revert_guard: tokio::sync::Mutex<()>,
}

type StoreResult<T> = Result<T, String>;

impl Agent {
    pub fn new(
        store: Arc<Mutex<Store>>,
        config: Config,
        workspace: &Path,
        provider: Option<Arc<dyn Provider>>,
        editor: Arc<dyn EditorPort>,
    ) -> Self {
        Self {
            store,
            config,
            workspace: workspace.to_path_buf(),
            provider,
            registry: Registry::standard(),
            editor,
            snapshots: std::sync::OnceLock::new(),
            revert_guard: tokio::sync::Mutex::new(()),
        }
    }

    /// The snapshot repository, if snapshots are on (opened lazily: git is not loaded
    /// until the first step needs it).
    pub fn snapshots(&self) -> Option<revert::SharedSnapshots> {
        self.snapshots
            .get_or_init(|| revert::open_snapshots(&self.config, &self.workspace))
            .clone()
    }

    /// Tracks the work tree off the async threads: all of it (`None`), or only `paths` and
    /// the editor's open buffers.
    async fn track(&self, paths: Option<Vec<PathBuf>>) -> Option<String> {
        let snapshots = self.snapshots()?;
        let buffers = self.editor.open_buffers();
        let paths =
            paths.map(|mut p| {
                p.extend(buffers.iter().filter_map(|(b, _)| {
                    b.strip_prefix(&self.workspace).ok().map(Path::to_path_buf)
                }));
                p.sort();
                p.dedup();
                p
            });
        let result = tokio::task::spawn_blocking(move || {
            let mut s = snapshots.lock().unwrap_or_else(|p| p.into_inner());
            s.set_overlay(buffers);
            let id = match paths {
                Some(p) => s.track_paths(&p),
                None => s.track(),
            }?;
            // A big first snapshot leaves many loose objects: one pack instead.
            s.pack_if_many(revert::PACK_THRESHOLD)?;
            Ok::<_, crate::snapshot::SnapshotError>(id)
        })
        .await;
        match result {
            Ok(Ok(id)) => Some(id),
            Ok(Err(e)) => {
                tracing::warn!("snapshot failed: {e}");
                None
            }
            Err(_) => None,
        }
    }

    fn project(&self) -> String {
        self.workspace.display().to_string()
    }

    fn append(&self, sid: &str, events: Vec<Event>) -> StoreResult<()> {
        let batch: Vec<(Option<&str>, Event)> =
            events.into_iter().map(|e| (Some(sid), e)).collect();
        self.store
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .append_all(&batch)
            .map(|_| ())
            .map_err(|e| e.to_string())
    }

    fn with_store<T>(
        &self,
        f: impl FnOnce(&mut Store) -> crate::store::Result<T>,
    ) -> StoreResult<T> {
        f(&mut self.store.lock().unwrap_or_else(|p| p.into_inner())).map_err(|e| e.to_string())
    }

    /// Marks tool calls left pending or running by a process that died as failed (never
    /// re-runs them) and sessions left busy as idle. Returns how many parts were marked.
    pub fn recover(&self) -> StoreResult<usize> {
        // Answers cut off mid-stream are closed as interrupted; their text stays.
        for (sid, part_id, _) in self.with_store(|s| s.parts_with_status(&["streaming"]))? {
            self.append(
                &sid,
                vec![Event::PartUpdated {
                    part_id,
                    data: None,
                    status: Some("interrupted".into()),
                }],
            )?;
        }
        let stale = self.with_store(|s| s.parts_with_status(&["pending", "running"]))?;
        for (sid, part_id, mut data) in stale.iter().cloned() {
            data["output"] = json!("interrupted: the server stopped before this call finished");
            self.append(
                &sid,
                vec![Event::PartUpdated {
                    part_id,
                    data: Some(data),
                    status: Some("error".into()),
                }],
            )?;
        }
        let busy: Vec<String> = self
            .with_store(|s| s.sessions())?
            .into_iter()
            .filter(|s| s.status != "idle")
            .map(|s| s.session_id)
            .collect();
        for sid in busy {
            self.append(
                &sid,
                vec![Event::SessionStatus {
                    status: "idle".into(),
                }],
            )?;
        }
        Ok(stale.len())
    }

    /// Admits user input (persisted before this returns). Creates the session when `session`
    /// is `None`. Returns (session id, input id).
    /// Admits `text` into the session's inbox (a new session when `session` is `None`);
    /// `context` (what the editor showed: a selection, the open file) goes with it as a
    /// note beside the text, so the text stays the user's own words (undo gives it back).
    pub async fn prompt(
        &self,
        session: Option<&str>,
        text: &str,
        context: Option<String>,
    ) -> StoreResult<(String, String)> {
        let _no_revert_under_way = self.revert_guard.lock().await;
        let sid = match session {
            Some(id) => id.to_string(),
            None => {
                let id = new_id();
                let title: String = text.lines().next().unwrap_or("").chars().take(60).collect();
                self.append(
                    &id,
                    vec![Event::SessionCreated {
                        workspace: self.project(),
                        title,
                    }],
                )?;
                id
            }
        };
        if self.with_store(|s| s.summary(&sid))?.is_none() {
            return Err(format!("no session {sid}"));
        }
        // A new prompt makes a staged revert final.
        self.commit_revert(&sid)?;
        let input_id = new_id();
        self.append(
            &sid,
            vec![Event::InputAdmitted {
                input_id: input_id.clone(),
                text: text.into(),
                context: context.map_or(Value::Null, |note| json!({ "note": note })),
            }],
        )?;
        Ok((sid, input_id))
    }

    /// Runs everything waiting in the session's inbox, oldest first.
    pub async fn drive(&self, sid: &str, cancel: &CancellationToken) -> TurnOutcome {
        self.gc_if_due();
        let mut last = TurnOutcome {
            end: TurnEnd::EndTurn,
            error: None,
        };
        loop {
            if cancel.is_cancelled() {
                return TurnOutcome {
                    end: TurnEnd::Cancelled,
                    error: None,
                };
            }
            let next = match self.with_store(|s| s.inbox(sid)) {
                Ok(inbox) => inbox.into_iter().next(),
                Err(e) => return self.fail(sid, e),
            };
            let Some(input) = next else { return last };
            if let Err(e) = self.ensure_baseline(sid, cancel).await {
                return self.fail(sid, e);
            }
            if let Err(e) = self.promote(sid, &input.input_id) {
                return self.fail(sid, e);
            }
            let _ = self.append(
                sid,
                vec![Event::SessionStatus {
                    status: "busy".into(),
                }],
            );
            self.editor.publish(Update::Status {
                session_id: sid.into(),
                status: "busy".into(),
                stop_reason: None,
            });
            last = self.run_steps(sid, cancel).await;
            let _ = self.append(
                sid,
                vec![Event::SessionStatus {
                    status: "idle".into(),
                }],
            );
            self.editor.publish(Update::Status {
                session_id: sid.into(),
                status: "idle".into(),
                stop_reason: serde_json::to_value(last.end)
                    .ok()
                    .and_then(|v| v.as_str().map(String::from)),
            });
            if last.end != TurnEnd::EndTurn && last.end != TurnEnd::MaxSteps {
                return last;
            }
        }
    }

    fn fail(&self, sid: &str, message: String) -> TurnOutcome {
        self.editor.publish(Update::Error {
            session_id: sid.into(),
            message: message.clone(),
        });
        TurnOutcome {
            end: TurnEnd::Error,
            error: Some(message),
        }
    }

    fn skills(&self) -> Vec<(String, String)> {
        crate::tools::skill_list(&self.workspace)
    }

    /// Builds and stores the baseline before the session's first model call. An instruction
    /// file that cannot be read makes the first build wait (the input stays pending).
    async fn ensure_baseline(&self, sid: &str, cancel: &CancellationToken) -> StoreResult<()> {
        if self.with_store(|s| s.latest_epoch(sid))?.is_some() {
            return Ok(());
        }
        let started = Instant::now();
        crate::memory::seed(&self.workspace);
        let limits = self.limits();
        // (The scripted model replays a script: it has no window to guess.)
        let scripted = self.config.provider == Some(crate::config::ProviderKind::Scripted);
        if !limits.known && !scripted {
            tracing::warn!(
                "unknown model {:?}: assuming a {}-token window; set context_window (and \
                 max_output_tokens) to what it really takes",
                self.model(),
                limits.context_window
            );
        }
        loop {
            match baseline::build(&self.workspace, &self.skills()) {
                Ok((text, record)) => {
                    return self.append(
                        sid,
                        vec![Event::ContextEpochStarted {
                            epoch_id: new_id(),
                            baseline: text,
                            change_record: record,
                            snapshot: None,
                            summary: None,
                            first_kept: None,
                        }],
                    );
                }
                Err(e) if started.elapsed() < BASELINE_WAIT && !cancel.is_cancelled() => {
                    tracing::warn!("baseline not ready, input stays pending: {e}");
                    tokio::time::sleep(Duration::from_millis(500)).await;
                }
                Err(e) => {
                    return Err(format!(
                        "{e}; the input stays pending and runs once the file can be read"
                    ));
                }
            }
        }
    }

    /// Turns inbox input into a user message, with a supplemental note when the date or the
    /// instructions changed since the baseline (or the last note).
    fn promote(&self, sid: &str, input_id: &str) -> StoreResult<()> {
        let message_id = new_id();
        let context = self
            .with_store(|s| s.inbox(sid))?
            .into_iter()
            .find(|i| i.input_id == input_id)
            .and_then(|i| i.context["note"].as_str().map(String::from));
        let mut events = vec![Event::InputPromoted {
            input_id: input_id.into(),
            message_id: message_id.clone(),
            part_id: new_id(),
        }];
        if let Some(note) = context {
            events.push(Event::PartAdded {
                part_id: new_id(),
                message_id: message_id.clone(),
                kind: "note".into(),
                data: json!({ "text": note }),
                status: None,
            });
        }
        let record = self.latest_record(sid)?;
        let (note, new_record) = baseline::changes(&self.workspace, &record);
        if let Some(text) = note {
            events.push(Event::PartAdded {
                part_id: new_id(),
                message_id: message_id.clone(),
                kind: "note".into(),
                data: json!({"text": text, "record": new_record}),
                status: None,
            });
        }
        self.append(sid, events)?;
        if let Some(view) = self.with_store(|s| s.session(sid))?
            && let Some(m) = view.messages.iter().find(|m| m.message_id == message_id)
        {
            let text = m
                .parts
                .iter()
                .filter(|p| p.kind == "text")
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
    fn latest_record(&self, sid: &str) -> StoreResult<Value> {
        let view = self
            .with_store(|s| s.session(sid))?
            .ok_or("the session vanished")?;
        let from_note = view
            .messages
            .iter()
            .flat_map(|m| &m.parts)
            .filter(|p| p.kind == "note")
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

    fn tool_context(
        &self,
        sid: &str,
        cancel: &CancellationToken,
        todos: Vec<crate::store::Todo>,
    ) -> StoreResult<ToolContext> {
        let mut ctx = ToolContext::new(&self.workspace, &self.config, self.editor.clone());
        ctx.cancel = cancel.clone();
        ctx.session_id = sid.to_string();
        ctx.policy.grants = self.with_store(|s| s.grants(&self.project()))?;
        ctx.recall = Some(crate::tools::RecallSource {
            store: self.store.clone(),
            project: self.project(),
        });
        *ctx.todos.lock().unwrap_or_else(|p| p.into_inner()) = todos;
        Ok(ctx)
    }

    async fn run_steps(&self, sid: &str, cancel: &CancellationToken) -> TurnOutcome {
        let todos = self
            .with_store(|s| s.session(sid))
            .ok()
            .flatten()
            .map(|v| v.todos)
            .unwrap_or_default();
        // The rules a turn starts with hold for its steps; mode changes apply from the next.
        let mut ctx = match self.tool_context(sid, cancel, todos) {
            Ok(c) => c,
            Err(e) => return self.fail(sid, e),
        };
        let max_steps = self.config.max_steps.max(1);
        let mut recent: Vec<(String, String)> = Vec::new();
        for step in 1..=max_steps {
            if cancel.is_cancelled() {
                return TurnOutcome {
                    end: TurnEnd::Cancelled,
                    error: None,
                };
            }
            let last = step == max_steps;
            // A mode switch applies from the next step; the step in flight keeps its rules.
            if let Ok(Some(summary)) = self.with_store(|s| s.summary(sid))
                && let Some(mode) = summary.mode
            {
                ctx.policy.mode = crate::permission::Mode::parse(&mode);
            }
            let message_id = new_id();
            // The whole tree once a turn; between steps only what may have moved since the
            // last step's snapshot (which scanned everything after a command): the buffers
            // the editor holds. The tools' own writes were tracked by that snapshot.
            let start_snapshot = self.track((step > 1).then(Vec::new)).await;
            if let Err(e) = self.append(
                sid,
                vec![
                    Event::MessageStarted {
                        message_id: message_id.clone(),
                        role: "assistant".into(),
                        meta: json!({"step": step, "model": self.model()}),
                    },
                    Event::PartAdded {
                        part_id: new_id(),
                        message_id: message_id.clone(),
                        kind: "step_start".into(),
                        data: json!({"snapshot": start_snapshot}),
                        status: None,
                    },
                ],
            ) {
                return self.fail(sid, e);
            }
            let mut answer = match self.answer_step(sid, &message_id, &ctx, last, cancel).await {
                Ok(a) => a,
                Err(outcome) => return outcome,
            };
            let asked = answer.calls.len();
            if asked > MAX_CALLS {
                answer.calls.truncate(MAX_CALLS + 1);
                let extra = answer.calls.pop().expect("more than MAX_CALLS");
                tracing::warn!(session = %sid, asked, "an answer asked for too many tool calls");
                self.record_tool(
                    sid,
                    &message_id,
                    &extra,
                    "error",
                    &format!(
                        "not run: the answer asked for {asked} tool calls and at most \
                         {MAX_CALLS} run per answer (the first {MAX_CALLS} ran; the others were \
                         dropped). Ask again for what is still needed."
                    ),
                    "",
                    &Value::Null,
                );
            }
            if answer.calls.is_empty() {
                return TurnOutcome {
                    end: if last {
                        TurnEnd::MaxSteps
                    } else {
                        TurnEnd::EndTurn
                    },
                    error: None,
                };
            }
            let list_version = self.registry.version();
            let mut written: Vec<PathBuf> = Vec::new();
            let mut ran_commands = false;
            // Runs the calls in order; stops early on cancel or when the user stops the turn.
            let mut stop: Option<TurnOutcome> = None;
            for (i, call) in answer.calls.iter().enumerate() {
                if cancel.is_cancelled() {
                    // Calls not started yet are recorded as interrupted, never run.
                    for later in &answer.calls[i..] {
                        self.record_tool(
                            sid,
                            &message_id,
                            later,
                            "error",
                            "interrupted: the turn was cancelled",
                            "",
                            &Value::Null,
                        );
                    }
                    break;
                }
                ctx.call_id = call.id.clone();
                ran_commands |= self.registry.changes_unreported_files(&call.name);
                let (stopped, files) = self
                    .run_tool(sid, &message_id, call, list_version, &mut ctx, &mut recent)
                    .await;
                written.extend(files);
                if stopped {
                    stop = Some(TurnOutcome {
                        end: TurnEnd::Cancelled,
                        error: Some("the user rejected a tool call and stopped the turn".into()),
                    });
                    break;
                }
            }
            // Whatever the step changed is recorded, even when it ends the turn.
            self.record_patch(
                sid,
                &message_id,
                start_snapshot.as_deref(),
                &written,
                ran_commands,
            )
            .await;
            if let Some(outcome) = stop {
                return outcome;
            }
            if cancel.is_cancelled() {
                return TurnOutcome {
                    end: TurnEnd::Cancelled,
                    error: None,
                };
            }
            if last {
                return TurnOutcome {
                    end: TurnEnd::MaxSteps,
                    error: None,
                };
            }
        }
        TurnOutcome {
            end: TurnEnd::MaxSteps,
            error: None,
        }
    }

    /// The model's context window and answer budget (config, else known names, else a
    /// fallback).
    pub fn limits(&self) -> crate::tokens::Limits {
        crate::tokens::Limits::for_model(
            &self.model(),
            self.config.context_window,
            self.config.max_output_tokens,
        )
    }

    pub fn model(&self) -> String {
        self.config
            .model
            .clone()
            .unwrap_or_else(|| match self.config.provider {
                Some(crate::config::ProviderKind::Scripted) => "scripted".into(),
                _ => "default".into(),
            })
    }

    /// Records a tool part in its final state (used for calls that never ran).
    #[allow(clippy::too_many_arguments)]
    fn record_tool(
        &self,
        sid: &str,
        message_id: &str,
        call: &PendingCall,
        status: &str,
        output: &str,
        title: &str,
        metadata: &Value,
    ) {
        let data = json!({"callId": call.id, "name": call.name, "input": call.arguments, "output": output, "title": title, "metadata": metadata});
        let _ = self.append(
            sid,
            vec![Event::PartAdded {
                part_id: new_id(),
                message_id: message_id.into(),
                kind: "tool".into(),
                data,
                status: Some(status.into()),
            }],
        );
        self.editor.publish(Update::ToolResult {
            session_id: sid.into(),
            id: call.id.clone(),
            name: call.name.clone(),
            status: status.into(),
            title: title.into(),
            output: output.into(),
            diff: None,
        });
    }

    /// Runs one call: pending → running → completed/error, with the doom-loop check.
    /// Returns true when the user stopped the turn.
    async fn run_tool(
        &self,
        sid: &str,
        message_id: &str,
        call: &PendingCall,
        list_version: u64,
        ctx: &mut ToolContext,
        recent: &mut Vec<(String, String)>,
    ) -> (bool, Vec<PathBuf>) {
        let part_id = new_id();
        let input: Value =
            serde_json::from_str(&call.arguments).unwrap_or(Value::String(call.arguments.clone()));
        let mut data = json!({"callId": call.id, "name": call.name, "input": call.arguments});
        let _ = self.append(
            sid,
            vec![Event::PartAdded {
                part_id: part_id.clone(),
                message_id: message_id.into(),
                kind: "tool".into(),
                data: data.clone(),
                status: Some("pending".into()),
            }],
        );
        self.editor.publish(Update::ToolCall {
            session_id: sid.into(),
            id: call.id.clone(),
            name: call.name.clone(),
            input: input.clone(),
            status: "pending".into(),
        });

        // The same call three times in a row: ask before letting the model spin.
        recent.push((call.name.clone(), call.arguments.clone()));
        let n = recent.len();
        if n >= 3 && recent[n - 3..].iter().all(|c| *c == recent[n - 1]) {
            let request = PermissionRequest {
                session_id: Some(sid.into()),
                tool_call_id: Some(call.id.clone()),
                permission: "doom_loop".into(),
                tool: call.name.clone(),
                title: format!(
                    "{} was called three times in a row with the same arguments",
                    call.name
                ),
                patterns: vec![call.name.clone()],
                always: vec![call.name.clone()],
                ..Default::default()
            };
            let refusal = match ctx.policy.decide("doom_loop", &call.name) {
                Action::Allow => None,
                Action::Deny => Some(
                    "stopped: the same call was repeated three times; try something else"
                        .to_string(),
                ),
                Action::Ask => match ctx.editor.ask_permission(&request).await {
                    PermissionReply::Once | PermissionReply::Always => None,
                    PermissionReply::Reject { message } => Some(format!(
                        "stopped: the same call was repeated three times{}",
                        message
                            .map(|m| format!("; the user says: {m}"))
                            .unwrap_or_default()
                    )),
                },
            };
            if let Some(output) = refusal {
                data["output"] = json!(output);
                let _ = self.append(
                    sid,
                    vec![Event::PartUpdated {
                        part_id,
                        data: Some(data),
                        status: Some("error".into()),
                    }],
                );
                self.editor.publish(Update::ToolResult {
                    session_id: sid.into(),
                    id: call.id.clone(),
                    name: call.name.clone(),
                    status: "error".into(),
                    title: String::new(),
                    output,
                    diff: None,
                });
                return (false, Vec::new());
            }
        }

        let _ = self.append(
            sid,
            vec![Event::PartUpdated {
                part_id: part_id.clone(),
                data: None,
                status: Some("running".into()),
            }],
        );
        self.editor.publish(Update::ToolCall {
            session_id: sid.into(),
            id: call.id.clone(),
            name: call.name.clone(),
            input,
            status: "running".into(),
        });
        let result = self
            .registry
            .call(&call.name, &call.arguments, list_version, ctx)
            .await;
        let status = match result.status {
            CallStatus::Completed => "completed",
            _ if ctx.cancel.is_cancelled() || result.output.starts_with("interrupted") => {
                "interrupted"
            }
            _ => "error",
        };
        data["output"] = json!(result.output);
        data["title"] = json!(result.title);
        data["metadata"] = result.metadata.clone();
        let mut events = vec![Event::PartUpdated {
            part_id,
            data: Some(data),
            status: Some(status.into()),
        }];
        for (permission, pattern) in &result.grants {
            events.push(Event::PermissionGranted {
                project: self.project(),
                permission: permission.clone(),
                pattern: pattern.clone(),
            });
            ctx.policy
                .grants
                .push((permission.clone(), pattern.clone()));
        }
        if let Some((scope, label, content)) = &result.memory {
            // Who wrote which block when: the memory's provenance, in the log.
            events.push(Event::MemoryWritten {
                scope: scope.clone(),
                label: label.clone(),
                content: content.clone(),
            });
        }
        if let Some(todos) = &result.todos {
            self.editor.publish(Update::Plan {
                session_id: sid.into(),
                todos: todos.clone(),
            });
            events.push(Event::TodosReplaced {
                todos: todos.clone(),
            });
        }
        // Grants are project-wide (no session); everything else belongs to the session.
        let (grants, session_events): (Vec<Event>, Vec<Event>) = events
            .into_iter()
            .partition(|e| matches!(e, Event::PermissionGranted { .. }));
        let _ = self.append(sid, session_events);
        if !grants.is_empty() {
            let batch: Vec<(Option<&str>, Event)> = grants.into_iter().map(|e| (None, e)).collect();
            let _ = self.with_store(|s| s.append_all(&batch).map(|_| ()));
        }
        self.editor.publish(Update::ToolResult {
            session_id: sid.into(),
            id: call.id.clone(),
            name: call.name.clone(),
            status: status.into(),
            title: result.title.clone(),
            output: result.output.clone(),
            diff: result.metadata.get("edit").cloned(),
        });
        (result.status == CallStatus::Stopped, result.files_changed)
    }

    /// After a step: a snapshot (only the files the tools wrote when no command ran, the
    /// whole tree otherwise) and a patch part listing what changed, if anything did.
    async fn record_patch(
        &self,
        sid: &str,
        message_id: &str,
        from: Option<&str>,
        written: &[PathBuf],
        ran_commands: bool,
    ) {
        let Some(from) = from else { return };
        if written.is_empty() && !ran_commands {
            return;
        }
        let paths = (!ran_commands).then(|| {
            written
                .iter()
                .filter_map(|p| p.strip_prefix(&self.workspace).ok().map(Path::to_path_buf))
                .collect::<Vec<_>>()
        });
        let Some(to) = self.track(paths).await else {
            return;
        };
        if to == from {
            return;
        }
        let Some(snapshots) = self.snapshots() else {
            return;
        };
        let from_owned = from.to_string();
        let to_owned = to.clone();
        let changes = tokio::task::spawn_blocking(move || {
            snapshots
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .changed(&from_owned, Some(&to_owned))
        })
        .await;
        let Ok(Ok(changes)) = changes else { return };
        if changes.is_empty() {
            return;
        }
        let files: Vec<&str> = changes.iter().map(|c| c.path.as_str()).collect();
        let _ = self.append(
            sid,
            vec![Event::PartAdded {
                part_id: new_id(),
                message_id: message_id.into(),
                kind: "patch".into(),
                data: json!({"from": from, "to": to, "files": files, "changes": changes}),
                status: None,
            }],
        );
    }

    /// One step's answer. A request over the model's usable window is compacted first (older
    /// turns fold into a checkpoint); what still does not fit — the current turn's own tool
    /// outputs — is squeezed (older outputs as stubs). A provider's context-overflow error
    /// compacts or squeezes harder and asks again, up to [`SQUEEZE`]'s last level.
    async fn answer_step(
        &self,
        sid: &str,
        message_id: &str,
        ctx: &ToolContext,
        last: bool,
        cancel: &CancellationToken,
    ) -> Result<Answer, TurnOutcome> {
        let mut compacted = false;
        // The index into SQUEEZE of the fraction in force, if any.
        let mut squeeze: Option<usize> = None;
        // After an overflow: its message and how many outputs the request had as stubs.
        let mut overflowed: Option<(String, usize)> = None;
        loop {
            let step = context::build_request(self, sid, ctx, last, squeeze.map(|i| SQUEEZE[i]))
                .map_err(|e| self.fail(sid, e))?;
            if step.over_budget && !compacted {
                compacted = true;
                match self.compact(sid).await {
                    Ok(_) => continue,
                    Err(e) => tracing::info!(session = %sid, "compaction before a step: {e}"),
                }
            }
            if step.over_budget && squeeze.is_none() {
                squeeze = Some(0);
                continue;
            }
            if let Some((error, before)) = &overflowed
                && step.stubbed == *before
            {
                // Squeezing found nothing more to stub: the same request would fail again.
                return Err(self.fail(sid, overflow_message(error)));
            }
            let may_retry = squeeze.is_none_or(|i| i + 1 < SQUEEZE.len());
            match self
                .stream_answer(sid, message_id, &step, cancel, may_retry)
                .await
            {
                Ok(answer) => return Ok(answer),
                Err(Interrupt::Outcome(outcome)) => return Err(outcome),
                Err(Interrupt::Overflow(error)) => {
                    if !compacted {
                        compacted = true;
                        match self.compact(sid).await {
                            Ok(_) => continue,
                            Err(why) => {
                                tracing::info!(session = %sid, "{error}; compaction: {why}")
                            }
                        }
                    }
                    // Our estimate said it fits, so squeeze below it (may_retry promised a
                    // tighter level).
                    squeeze = Some(squeeze.map_or(1, |i| i + 1));
                    tracing::info!(session = %sid, "{error}; squeezing this turn's tool outputs");
                    overflowed = Some((error, step.stubbed));
                }
            }
        }
    }

    /// Streams one answer with retries before output, persisting deltas in batches.
    async fn stream_answer(
        &self,
        sid: &str,
        message_id: &str,
        step: &context::StepRequest,
        cancel: &CancellationToken,
        may_retry_smaller: bool,
    ) -> Result<Answer, Interrupt> {
        let mut attempt = 0;
        let (request, estimate) = (&step.request, step.estimate);
        loop {
            let mut writer = AnswerWriter::new(self, sid, message_id, estimate);
            let Some(provider) = &self.provider else {
                return Err(self
                    .fail(sid, "no model provider is configured".into())
                    .into());
            };
            let started = tokio::select! {
                s = provider.stream(request) => s,
                _ = cancel.cancelled() => return Err(TurnOutcome { end: TurnEnd::Cancelled, error: None }.into()),
            };
            let result = match started {
                Ok(mut stream) => loop {
                    let next = tokio::select! {
                        n = stream.next() => n,
                        _ = cancel.cancelled() => {
                            writer.close("interrupted");
                            return Err(TurnOutcome { end: TurnEnd::Cancelled, error: None }.into());
                        }
                    };
                    match next {
                        None => {
                            break Err(ProviderError::StreamBroken {
                                message: "the stream ended without a finish".into(),
                            });
                        }
                        Some(Ok(ProviderEvent::Finish(reason))) => break Ok(reason),
                        Some(Ok(event)) => {
                            if let Err(e) = writer.event(event) {
                                break Err(e);
                            }
                        }
                        Some(Err(e)) => break Err(e),
                    }
                },
                Err(e) => Err(e),
            };
            match result {
                Ok(_reason) => {
                    writer.close("completed");
                    return Ok(writer.into_answer());
                }
                Err(e) => {
                    let had_output = writer.had_output();
                    // Nothing came yet: a broken stream counts as a connection failure.
                    let retryable = match &e {
                        ProviderError::Retryable { .. } => true,
                        ProviderError::StreamBroken { .. } => !had_output,
                        _ => false,
                    };
                    if retryable && attempt < retry::MAX_RETRIES {
                        attempt += 1;
                        let after = if let ProviderError::Retryable { retry_after, .. } = &e {
                            *retry_after
                        } else {
                            None
                        };
                        let wait = retry::delay(attempt, after);
                        writer.close("error");
                        self.editor.publish(Update::Retry {
                            session_id: sid.into(),
                            attempt,
                            wait_ms: wait.as_millis() as u64,
                            reason: e.to_string(),
                        });
                        tokio::select! {
                            _ = tokio::time::sleep(wait) => continue,
                            _ = cancel.cancelled() => return Err(TurnOutcome { end: TurnEnd::Cancelled, error: None }.into()),
                        }
                    }
                    writer.close(if had_output { "interrupted" } else { "error" });
                    if may_retry_smaller
                        && !had_output
                        && matches!(e, ProviderError::ContextOverflow { .. })
                    {
                        return Err(Interrupt::Overflow(e.to_string()));
                    }
                    let message = match &e {
                        ProviderError::ContextOverflow { .. } => overflow_message(&e.to_string()),
                        ProviderError::Retryable { .. } => {
                            format!("{e} (gave up after {} retries)", retry::MAX_RETRIES)
                        }
                        ProviderError::StreamBroken { .. } if had_output => {
                            format!("{e}; the partial answer was kept")
                        }
                        _ => e.to_string(),
                    };
                    let _ = self.append(
                        sid,
                        vec![Event::PartAdded {
                            part_id: new_id(),
                            message_id: message_id.into(),
                            kind: "error".into(),
                            data: json!({"text": message}),
                            status: None,
                        }],
                    );
                    return Err(self.fail(sid, message).into());
                }
            }
        }
    }
}

/// The error that ends a turn which does not fit however it is cut.
fn overflow_message(error: &str) -> String {
    format!(
        "{error}. The conversation does not fit the model's context window even after \
         compaction and with this turn's tool outputs as stubs; start a new session, or set \
         context_window to what the model really takes."
    )
}

/// A tool call as the model made it.
#[derive(Debug, Clone)]
pub struct PendingCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

/// Why a step's answer did not come: the turn ends, or the request overflowed the context
/// (the loop compacts and asks again, once).
enum Interrupt {
    Outcome(TurnOutcome),
    /// The provider's context-overflow message.
    Overflow(String),
}

impl From<TurnOutcome> for Interrupt {
    fn from(o: TurnOutcome) -> Self {
        Interrupt::Outcome(o)
    }
}

pub struct Answer {
    pub calls: Vec<PendingCall>,
}

/// Accumulates one streamed answer and writes it to the store in batches.
struct AnswerWriter<'a> {
    agent: &'a Agent,
    sid: &'a str,
    message_id: &'a str,
    /// Our token count of the request, kept with the provider's (calibration).
    estimate: usize,
    text: Option<(String, String)>,
    reasoning: Option<(String, String)>,
    signature: Option<String>,
    pending: Vec<Event>,
    pending_bytes: usize,
    last_flush: Instant,
    calls: std::collections::BTreeMap<usize, PendingCall>,
    output: bool,
    /// Bytes of text, reasoning and tool arguments so far (see [`MAX_ANSWER_BYTES`]).
    size: usize,
}

impl<'a> AnswerWriter<'a> {
    fn new(agent: &'a Agent, sid: &'a str, message_id: &'a str, estimate: usize) -> Self {
        Self {
            agent,
            sid,
            message_id,
            estimate,
            text: None,
            reasoning: None,
            signature: None,
            pending: Vec::new(),
            pending_bytes: 0,
            last_flush: Instant::now(),
            calls: Default::default(),
            size: 0,
            output: false,
        }
    }

    fn had_output(&self) -> bool {
        self.output
    }

    fn part(&mut self, kind: &str) -> String {
        let part_id = new_id();
        self.pending.push(Event::PartAdded {
            part_id: part_id.clone(),
            message_id: self.message_id.into(),
            kind: kind.into(),
            data: json!({"text": ""}),
            status: Some("streaming".into()),
        });
        part_id
    }

    fn delta(&mut self, reasoning: bool, piece: String) {
        self.output = true;
        let slot = if reasoning {
            &self.reasoning
        } else {
            &self.text
        };
        let part_id = match slot {
            Some((id, _)) => id.clone(),
            None => {
                let id = self.part(if reasoning { "reasoning" } else { "text" });
                let slot = if reasoning {
                    &mut self.reasoning
                } else {
                    &mut self.text
                };
                *slot = Some((id.clone(), String::new()));
                id
            }
        };
        let slot = if reasoning {
            &mut self.reasoning
        } else {
            &mut self.text
        };
        if let Some((_, all)) = slot {
            all.push_str(&piece);
        }
        let update = if reasoning {
            Update::Reasoning {
                session_id: self.sid.into(),
                message_id: self.message_id.into(),
                text: piece.clone(),
            }
        } else {
            Update::Text {
                session_id: self.sid.into(),
                message_id: self.message_id.into(),
                text: piece.clone(),
            }
        };
        self.agent.editor.publish(update);
        self.pending_bytes += piece.len();
        self.pending.push(Event::TextAppended {
            part_id,
            text: piece,
        });
        if self.pending_bytes >= FLUSH_BYTES || self.last_flush.elapsed() >= FLUSH_EVERY {
            self.flush();
        }
    }

    /// Takes one event; an answer past [`MAX_ANSWER_BYTES`] (a runaway or garbage stream)
    /// is refused with the error that cuts it there.
    fn event(&mut self, event: ProviderEvent) -> Result<(), ProviderError> {
        self.size += match &event {
            ProviderEvent::TextDelta(t) | ProviderEvent::ReasoningDelta(t) => t.len(),
            ProviderEvent::ToolCallDelta { arguments, .. } => arguments.len(),
            _ => 0,
        };
        if self.size > MAX_ANSWER_BYTES {
            return Err(ProviderError::StreamBroken {
                message: format!(
                    "the model's answer passed {} MB and was cut there",
                    MAX_ANSWER_BYTES / (1024 * 1024)
                ),
            });
        }
        match event {
            ProviderEvent::TextDelta(t) => self.delta(false, t),
            ProviderEvent::ReasoningDelta(t) => self.delta(true, t),
            ProviderEvent::ReasoningSignature(s) => self.signature = Some(s),
            ProviderEvent::ToolCallStart { index, id, name } => {
                self.output = true;
                self.calls.insert(
                    index,
                    PendingCall {
                        id,
                        name,
                        arguments: String::new(),
                    },
                );
            }
            ProviderEvent::ToolCallDelta { index, arguments } => {
                self.output = true;
                if let Some(c) = self.calls.get_mut(&index) {
                    c.arguments.push_str(&arguments);
                }
            }
            ProviderEvent::ToolCallEnd { .. } => {}
            ProviderEvent::Usage(u) => {
                self.agent.editor.publish(Update::Usage {
                    session_id: self.sid.into(),
                    input_tokens: u.input_tokens,
                    output_tokens: u.output_tokens,
                    cache_read_tokens: u.cache_read_tokens,
                });
                let mut data = serde_json::to_value(u).unwrap_or(Value::Null);
                data["estimate"] = json!(self.estimate);
                data["model"] = json!(self.agent.model());
                self.pending.push(Event::PartAdded {
                    part_id: new_id(),
                    message_id: self.message_id.into(),
                    kind: "usage".into(),
                    data,
                    status: None,
                });
            }
            ProviderEvent::Finish(_) => {}
        }
        Ok(())
    }

    fn flush(&mut self) {
        if !self.pending.is_empty() {
            let events = std::mem::take(&mut self.pending);
            if let Err(e) = self.agent.append(self.sid, events) {
                tracing::error!("cannot record the answer: {e}");
            }
        }
        self.pending_bytes = 0;
        self.last_flush = Instant::now();
    }

    /// Writes what is left and gives the text and reasoning parts their final status.
    fn close(&mut self, status: &str) {
        for (slot, is_reasoning) in [(self.text.clone(), false), (self.reasoning.clone(), true)] {
            if let Some((part_id, _)) = slot {
                let data = match (&self.signature, is_reasoning) {
                    (Some(sig), true) => self
                        .reasoning
                        .as_ref()
                        .map(|(_, t)| json!({"text": t, "signature": sig})),
                    _ => None,
                };
                self.pending.push(Event::PartUpdated {
                    part_id,
                    data,
                    status: Some(status.into()),
                });
            }
        }
        self.text = None;
        self.reasoning = None;
        self.flush();
    }

    fn into_answer(self) -> Answer {
        Answer {
            calls: self
                .calls
                .into_values()
                .map(|mut c| {
                    if c.id.is_empty() {
                        c.id = format!("call_{}", new_id());
                    }
                    c
                })
                .collect(),
        }
    }
}
