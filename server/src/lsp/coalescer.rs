//! Delivers the agent's updates to the editor: `agent/update` notifications, with the chunks
//! of one session merged for up to [`COALESCE`]; for clients without them, `$/progress`,
//! `window/showMessage` and a markdown transcript file.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::mpsc;
use tower_lsp_server::Client;
use tower_lsp_server::ls_types::notification::Progress;
use tower_lsp_server::ls_types::*;

use super::bridge::{Buffers, file_uri};
use super::protocol::{self as wire, AgentUpdate, SessionUpdate, ToolKind};
use crate::editor::{ProposedChange, Update};
use crate::status::{PartStatus, SessionStatus};

/// How long chunks of one session may wait to be merged into one notification.
pub const COALESCE: Duration = Duration::from_millis(16);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum ChunkKind {
    Message,
    Reasoning,
}

/// Streamed text waiting to be merged.
struct Chunk {
    kind: ChunkKind,
    message_id: String,
    text: String,
}

impl Chunk {
    fn into_update(self) -> SessionUpdate {
        let (message_id, text) = (self.message_id, self.text);
        match self.kind {
            ChunkKind::Message => SessionUpdate::MessageChunk { message_id, text },
            ChunkKind::Reasoning => SessionUpdate::ReasoningChunk { message_id, text },
        }
    }
}

/// Per-session delivery state.
#[derive(Default)]
struct Stream {
    seq: u64,
    chunk: Option<Chunk>,
    /// Fallback: the work-done progress of the running turn, and the turn's answer text.
    progress: Option<ProgressToken>,
    answer: String,
    /// Transcript text not yet appended to the file (written with each flush).
    transcript: String,
}

pub(super) struct Coalescer {
    client: Client,
    buffers: Arc<dyn Buffers>,
    transcripts: PathBuf,
    streams: HashMap<String, Stream>,
}

fn session_of(u: &Update) -> &str {
    match u {
        Update::Session { session_id }
        | Update::UserMessage { session_id, .. }
        | Update::Text { session_id, .. }
        | Update::Reasoning { session_id, .. }
        | Update::ToolCall { session_id, .. }
        | Update::ToolResult { session_id, .. }
        | Update::Status { session_id, .. }
        | Update::Retry { session_id, .. }
        | Update::Error { session_id, .. }
        | Update::Plan { session_id, .. }
        | Update::Revert { session_id, .. }
        | Update::Usage { session_id, .. }
        | Update::State { session_id, .. } => session_id,
    }
}

/// The tool-call kind of the protocol, from the tool's name.
fn tool_kind(name: &str) -> ToolKind {
    match name {
        "read" => ToolKind::Read,
        "write" | "edit" | "apply_patch" => ToolKind::Edit,
        "glob" | "grep" => ToolKind::Search,
        "bash" => ToolKind::Execute,
        "webfetch" => ToolKind::Fetch,
        _ => ToolKind::Other,
    }
}

fn tool_title(name: &str, input: &Value) -> String {
    let target = ["filePath", "command", "pattern", "url"]
        .iter()
        .find_map(|k| input.get(*k).and_then(Value::as_str))
        .unwrap_or("");
    format!("{name} {target}").trim().to_string()
}

/// The file a call works on, when its input names an absolute path.
fn locations(input: &Value) -> Option<Vec<wire::Location>> {
    let path = PathBuf::from(input.get("filePath")?.as_str()?);
    let uri = file_uri(&path).filter(|_| path.is_absolute())?;
    Some(vec![wire::Location { uri }])
}

fn turn_status(status: SessionStatus) -> wire::TurnStatus {
    match status {
        SessionStatus::Idle => wire::TurnStatus::Idle,
        SessionStatus::Busy | SessionStatus::Waiting => wire::TurnStatus::Busy,
    }
}

fn edit_diff(change: ProposedChange) -> Option<wire::EditDiff> {
    Some(wire::EditDiff {
        uri: file_uri(&change.path)?,
        old_text: change.old_text,
        new_text: change.new_text,
    })
}

impl Coalescer {
    pub(super) fn new(client: Client, buffers: Arc<dyn Buffers>, transcripts: PathBuf) -> Self {
        Self {
            client,
            buffers,
            transcripts,
            streams: HashMap::new(),
        }
    }

    pub(super) async fn run(mut self, mut rx: mpsc::UnboundedReceiver<Update>) {
        // Chunks wait at most COALESCE after the first of a batch, however fast they come.
        let mut deadline: Option<tokio::time::Instant> = None;
        loop {
            let waiting = self.streams.values().any(|s| s.chunk.is_some());
            if waiting && deadline.is_none() {
                deadline = Some(tokio::time::Instant::now() + COALESCE);
            }
            let due = deadline.filter(|_| waiting);
            // A backlog never postpones a flush that is due.
            if due.is_some_and(|at| tokio::time::Instant::now() >= at) {
                self.flush_all().await;
                deadline = None;
                continue;
            }
            let next = match due {
                Some(at) => match tokio::time::timeout_at(at, rx.recv()).await {
                    Ok(u) => u,
                    Err(_) => {
                        self.flush_all().await;
                        deadline = None;
                        continue;
                    }
                },
                None => {
                    deadline = None;
                    rx.recv().await
                }
            };
            let Some(update) = next else { break };
            self.handle(update).await;
        }
        self.flush_all().await;
    }

    async fn flush_all(&mut self) {
        let ids: Vec<String> = self.streams.keys().cloned().collect();
        for id in ids {
            self.flush(&id).await;
        }
    }

    async fn flush(&mut self, sid: &str) {
        self.write_transcript(sid);
        let Some(chunk) = self.streams.get_mut(sid).and_then(|s| s.chunk.take()) else {
            return;
        };
        self.send(sid, chunk.into_update()).await;
    }

    async fn send(&mut self, sid: &str, update: SessionUpdate) {
        if !self.buffers.caps().updates {
            return;
        }
        let stream = self.streams.entry(sid.to_string()).or_default();
        stream.seq += 1;
        let params = wire::UpdateParams {
            session_id: sid.to_string(),
            seq: stream.seq,
            update,
        };
        self.client.send_notification::<AgentUpdate>(params).await;
    }

    fn stream(&mut self, sid: &str) -> &mut Stream {
        self.streams.entry(sid.to_string()).or_default()
    }

    fn transcript(&mut self, sid: &str, text: &str) {
        self.stream(sid).transcript.push_str(text);
    }

    /// Appends what the transcript of `sid` has gathered to its file.
    fn write_transcript(&mut self, sid: &str) {
        use std::io::Write as _;
        let Some(stream) = self.streams.get_mut(sid) else {
            return;
        };
        if stream.transcript.is_empty() {
            return;
        }
        let text = std::mem::take(&mut stream.transcript);
        let path = self.transcript_path(sid);
        let written = path
            .parent()
            .map_or(Ok(()), std::fs::create_dir_all)
            .and_then(|()| {
                std::fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&path)
            })
            .and_then(|mut f| f.write_all(text.as_bytes()));
        if let Err(e) = written {
            tracing::warn!("cannot write the transcript {}: {e}", path.display());
        }
    }

    async fn progress(&mut self, sid: &str, value: WorkDoneProgress) {
        let caps = self.buffers.caps();
        if caps.updates || !caps.work_done_progress {
            return;
        }
        let Some(token) = self.stream(sid).progress.clone() else {
            return;
        };
        self.client
            .send_notification::<Progress>(ProgressParams {
                token,
                value: ProgressParamsValue::WorkDone(value),
            })
            .await;
    }

    async fn handle(&mut self, update: Update) {
        let sid = session_of(&update).to_string();
        match update {
            Update::Text {
                message_id, text, ..
            } => self.chunk(&sid, ChunkKind::Message, message_id, text).await,
            Update::Reasoning {
                message_id, text, ..
            } => {
                self.chunk(&sid, ChunkKind::Reasoning, message_id, text)
                    .await
            }
            Update::Session { .. } => {}
            other => {
                self.flush(&sid).await;
                let turn = match &other {
                    Update::Status { status, .. } => Some(*status),
                    _ => None,
                };
                let error = match &other {
                    Update::Error { message, .. } => Some(message.clone()),
                    _ => None,
                };
                if let Some(update) = self.translate(&sid, other).await {
                    self.send(&sid, update).await;
                }
                if let Some(status) = turn {
                    self.on_status(&sid, status).await;
                }
                if let Some(message) = error.filter(|_| !self.buffers.caps().updates) {
                    self.client
                        .show_message(MessageType::ERROR, format!("agent-lsp: {message}"))
                        .await;
                }
            }
        }
    }

    /// Merges consecutive chunks of the same kind and message.
    async fn chunk(&mut self, sid: &str, kind: ChunkKind, message_id: String, text: String) {
        if kind == ChunkKind::Message {
            self.transcript(sid, &text);
            self.stream(sid).answer.push_str(&text);
        }
        match &mut self.stream(sid).chunk {
            Some(c) if c.kind == kind && c.message_id == message_id => c.text.push_str(&text),
            _ => {
                self.flush(sid).await;
                self.stream(sid).chunk = Some(Chunk {
                    kind,
                    message_id,
                    text,
                });
            }
        }
    }

    /// The wire form of an update (none for what the protocol does not carry), and what
    /// the fallbacks make of it: transcript lines and progress reports.
    async fn translate(&mut self, sid: &str, update: Update) -> Option<SessionUpdate> {
        Some(match update {
            Update::UserMessage {
                message_id, text, ..
            } => {
                self.transcript(sid, &format!("\n\n## You\n\n{text}\n\n## Agent\n\n"));
                SessionUpdate::UserMessage { message_id, text }
            }
            Update::ToolCall {
                id,
                name,
                input,
                status,
                ..
            } => self.tool_call(sid, id, name, input, status).await,
            Update::ToolResult {
                id,
                name,
                status,
                title,
                output,
                diff,
                ..
            } => {
                let status = self.tool_status(sid, &name, status, &output);
                SessionUpdate::ToolCallUpdate {
                    tool_call_id: id,
                    name,
                    status,
                    title,
                    output,
                    diff: diff.and_then(edit_diff),
                }
            }
            Update::Status {
                status,
                stop_reason,
                ..
            } => SessionUpdate::Status {
                status: turn_status(status),
                stop_reason,
            },
            Update::Usage {
                input_tokens,
                output_tokens,
                cache_read_tokens,
                ..
            } => SessionUpdate::Usage {
                input_tokens,
                output_tokens,
                cache_read_tokens,
            },
            Update::Error { message, .. } => {
                self.transcript(sid, &format!("\n\n**Error:** {message}\n"));
                SessionUpdate::Error { message }
            }
            Update::Retry {
                attempt,
                wait_ms,
                reason,
                ..
            } => SessionUpdate::Retry {
                attempt,
                wait_ms,
                reason,
            },
            Update::Plan { todos, .. } => SessionUpdate::Plan {
                todos: todos.into_iter().map(wire::Todo::from).collect(),
            },
            Update::Revert {
                message_id, files, ..
            } => SessionUpdate::Revert { message_id, files },
            Update::State {
                path, focus, phase, ..
            } => SessionUpdate::State { path, focus, phase },
            Update::Session { .. } | Update::Text { .. } | Update::Reasoning { .. } => return None,
        })
    }

    /// A finished call's status on the wire; a failure gets a transcript line.
    fn tool_status(
        &mut self,
        sid: &str,
        name: &str,
        status: PartStatus,
        output: &str,
    ) -> wire::ToolResultStatus {
        if status == PartStatus::Completed {
            return wire::ToolResultStatus::Completed;
        }
        let first = output.lines().next().unwrap_or("");
        self.transcript(sid, &format!("  - {name} failed: {first}\n"));
        wire::ToolResultStatus::Failed
    }

    async fn tool_call(
        &mut self,
        sid: &str,
        id: String,
        name: String,
        input: Value,
        status: PartStatus,
    ) -> SessionUpdate {
        let title = tool_title(&name, &input);
        let status = if status == PartStatus::Running {
            self.transcript(sid, &format!("\n\n- `{title}`\n"));
            let report = WorkDoneProgressReport {
                message: Some(format!("running {title}")),
                ..Default::default()
            };
            self.progress(sid, WorkDoneProgress::Report(report)).await;
            wire::ToolCallStatus::Running
        } else {
            wire::ToolCallStatus::Pending
        };
        SessionUpdate::ToolCall {
            tool_call_id: id,
            tool_kind: tool_kind(&name),
            locations: locations(&input),
            name,
            title,
            status,
            raw_input: input,
        }
    }

    /// Fallbacks at the start and end of a turn: work-done progress, and the answer's first
    /// lines through `window/showMessage`.
    async fn on_status(&mut self, sid: &str, status: SessionStatus) {
        let caps = self.buffers.caps();
        if caps.updates {
            return;
        }
        if status == SessionStatus::Busy {
            self.stream(sid).answer.clear();
            if caps.work_done_progress {
                self.begin_progress(sid).await;
            }
        } else {
            self.end_progress(sid).await;
        }
    }

    async fn begin_progress(&mut self, sid: &str) {
        let token = ProgressToken::String(format!("agent-lsp/{sid}/{}", crate::store::new_id()));
        if self
            .client
            .create_work_done_progress(token.clone())
            .await
            .is_err()
        {
            return;
        }
        self.stream(sid).progress = Some(token);
        let begin = WorkDoneProgressBegin {
            title: "agent-lsp".into(),
            message: Some("working".into()),
            ..Default::default()
        };
        self.progress(sid, WorkDoneProgress::Begin(begin)).await;
    }

    async fn end_progress(&mut self, sid: &str) {
        let answer = std::mem::take(&mut self.stream(sid).answer);
        let first: Vec<&str> = answer
            .lines()
            .filter(|l| !l.trim().is_empty())
            .take(3)
            .collect();
        let summary = if first.is_empty() {
            "done".to_string()
        } else {
            first.join(" ")
        };
        let end = WorkDoneProgressEnd {
            message: Some(summary.chars().take(120).collect()),
        };
        self.progress(sid, WorkDoneProgress::End(end)).await;
        self.stream(sid).progress = None;
        if !first.is_empty() {
            let transcript = self.transcript_path(sid);
            self.client
                .show_message(
                    MessageType::INFO,
                    format!(
                        "agent-lsp: {summary} (full transcript: {})",
                        transcript.display()
                    ),
                )
                .await;
        }
    }

    fn transcript_path(&self, sid: &str) -> PathBuf {
        self.transcripts.join(format!("{sid}.md"))
    }
}
