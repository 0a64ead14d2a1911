//! The editor port for LSP clients: open buffers, `workspace/applyEdit`, permission asks
//! (`agent/requestPermission`, else `window/showMessageRequest`, else code actions), and
//! updates (`agent/update` coalesced per session, else `$/progress`, `window/showMessage` and
//! a transcript file).

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};
use tower_lsp_server::Client;
use tower_lsp_server::ls_types::notification::Progress;
use tower_lsp_server::ls_types::*;

use super::documents::{Document, PositionEncoding};
use super::protocol::{AgentUpdate, AskQuestion, ClientCaps, RequestPermission};
use crate::editor::{
    BufferEdit, EditorPort, FileOperation, PermissionReply, PermissionRequest, Question, Update,
};

/// How long chunks of one session may wait to be merged into one notification.
pub const COALESCE: Duration = Duration::from_millis(16);

/// A permission ask waiting for an answer through a code action (clients without
/// `agent/requestPermission` or `window/showMessageRequest`, like Helix).
pub struct PendingAsk {
    pub request: PermissionRequest,
    reply: oneshot::Sender<PermissionReply>,
}

/// What the bridge needs from the server's state.
pub trait Buffers: Send + Sync {
    /// The open document holding `path`: its URI and a copy of it.
    fn open_document(&self, path: &Path) -> Option<(Uri, Document)>;
    fn encoding(&self) -> PositionEncoding;
    fn caps(&self) -> ClientCaps;
    /// Every open document with a file path.
    fn all_open(&self) -> Vec<(PathBuf, Document)>;
}

pub struct LspEditor {
    client: Client,
    buffers: Arc<dyn Buffers>,
    pub pending: Arc<Mutex<BTreeMap<u64, PendingAsk>>>,
    next_ask: std::sync::atomic::AtomicU64,
    updates: mpsc::UnboundedSender<Update>,
    /// Edits the editor accepted but has not reported back with didChange yet: the text they
    /// produce, keyed by path, with the version it applies to. Reads and snapshots use it
    /// until the document's version moves on.
    expected: Mutex<HashMap<PathBuf, (i32, String)>>,
}

pub fn file_uri(path: &Path) -> Option<Uri> {
    let mut s = String::from("file://");
    for b in path.to_string_lossy().bytes() {
        if b.is_ascii_alphanumeric() || b"/-._~".contains(&b) {
            s.push(b as char);
        } else {
            s.push_str(&format!("%{b:02X}"));
        }
    }
    s.parse().ok()
}

/// Line-level minimal edits turning `doc` into `new_text`, in the negotiated encoding.
pub fn text_edits(doc: &Document, new_text: &str, enc: PositionEncoding) -> Vec<TextEdit> {
    let old = doc.text.to_string();
    let diff = similar::TextDiff::from_lines(old.as_str(), new_text);
    let mut edits = Vec::new();
    for op in diff.ops() {
        if matches!(op, similar::DiffOp::Equal { .. }) {
            continue;
        }
        let (old_range, new_range) = (op.old_range(), op.new_range());
        let start = doc
            .text
            .line_to_char(old_range.start.min(doc.text.len_lines()));
        let end = if old_range.end >= doc.text.len_lines() {
            doc.text.len_chars()
        } else {
            doc.text.line_to_char(old_range.end)
        };
        let replacement: String = diff.new_slices()[new_range].concat();
        edits.push(TextEdit {
            range: Range::new(doc.position(start, enc), doc.position(end, enc)),
            new_text: replacement,
        });
    }
    edits
}

impl LspEditor {
    pub fn new(client: Client, buffers: Arc<dyn Buffers>, transcripts: PathBuf) -> Arc<Self> {
        let (tx, rx) = mpsc::unbounded_channel();
        let editor = Arc::new(Self {
            client: client.clone(),
            buffers: buffers.clone(),
            pending: Arc::default(),
            next_ask: Default::default(),
            updates: tx,
            expected: Mutex::new(HashMap::new()),
        });
        tokio::spawn(Coalescer::new(client, buffers, transcripts).run(rx));
        editor
    }

    /// The text of an open document as the agent should see it (an accepted edit the editor
    /// has not reported yet included).
    fn current_text(&self, path: &Path, doc: &Document) -> String {
        match self
            .expected
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(path)
        {
            Some((version, text)) if *version == doc.version => text.clone(),
            _ => doc.text.to_string(),
        }
    }

    /// Answers a pending ask (from the code action `agent.answerPermission`).
    pub fn answer(&self, id: u64, reply: PermissionReply) -> bool {
        match self
            .pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&id)
        {
            Some(ask) => ask.reply.send(reply).is_ok(),
            None => false,
        }
    }

    /// The pending asks, oldest first.
    pub fn pending_asks(&self) -> Vec<(u64, PermissionRequest)> {
        self.pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|(id, a)| (*id, a.request.clone()))
            .collect()
    }

    /// Rejects every pending ask of a session (its turn was cancelled).
    pub fn reject_pending(&self, session_id: &str) {
        let mut pending = self.pending.lock().unwrap_or_else(|p| p.into_inner());
        let ids: Vec<u64> = pending
            .iter()
            .filter(|(_, a)| a.request.session_id.as_deref() == Some(session_id))
            .map(|(id, _)| *id)
            .collect();
        for id in ids {
            if let Some(a) = pending.remove(&id) {
                let _ = a.reply.send(PermissionReply::Reject { message: None });
            }
        }
    }

    async fn ask_by_code_action(&self, request: &PermissionRequest) -> PermissionReply {
        let id = self
            .next_ask
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst)
            + 1;
        let (tx, rx) = oneshot::channel();
        self.pending
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(
                id,
                PendingAsk {
                    request: request.clone(),
                    reply: tx,
                },
            );
        // Removed again however this ends (answered, cancelled, dropped).
        struct Forget<'a>(&'a LspEditor, u64);
        impl Drop for Forget<'_> {
            fn drop(&mut self) {
                self.0
                    .pending
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .remove(&self.1);
            }
        }
        let _forget = Forget(self, id);
        self.client
            .show_message(
                MessageType::WARNING,
                format!(
                    "agent-lsp asks permission: {}. Answer with a code action (\"Agent: allow … once\", \"… always\", \"… deny\").",
                    request.title
                ),
            )
            .await;
        rx.await
            .unwrap_or(PermissionReply::Reject { message: None })
    }
}

impl EditorPort for LspEditor {
    fn publish(&self, update: Update) {
        let _ = self.updates.send(update);
    }

    fn buffer_text(&self, path: &Path) -> Option<String> {
        self.buffers
            .open_document(path)
            .map(|(_, d)| self.current_text(path, &d))
    }

    fn open_buffers(&self) -> Vec<(PathBuf, String)> {
        self.buffers
            .all_open()
            .into_iter()
            .map(|(path, doc)| {
                let text = self.current_text(&path, &doc);
                (path, text)
            })
            .collect()
    }

    fn apply_to_buffer<'a>(
        &'a self,
        path: &'a Path,
        new_text: &'a str,
    ) -> BoxFuture<'a, BufferEdit> {
        Box::pin(async move {
            let Some((uri, doc)) = self.buffers.open_document(path) else {
                return BufferEdit::NotOpen;
            };
            // After an edit the editor accepted but never reported, the server's copy is the
            // text that edit produced, and the editor's version is unknown (it moved on):
            // the next edit is computed against that text and sent without a version.
            let unreported = self
                .expected
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .get(path)
                .filter(|(version, _)| *version == doc.version)
                .map(|(_, text)| text.clone());
            let (edits, version) = match &unreported {
                Some(text) => {
                    let base = Document::new(text, doc.version, doc.language_id.clone());
                    (text_edits(&base, new_text, self.buffers.encoding()), None)
                }
                None => (
                    text_edits(&doc, new_text, self.buffers.encoding()),
                    Some(doc.version),
                ),
            };
            let edit = if self.buffers.caps().document_changes {
                WorkspaceEdit {
                    document_changes: Some(DocumentChanges::Edits(vec![TextDocumentEdit {
                        text_document: OptionalVersionedTextDocumentIdentifier { uri, version },
                        edits: edits.into_iter().map(OneOf::Left).collect(),
                    }])),
                    ..Default::default()
                }
            } else {
                WorkspaceEdit {
                    changes: Some(HashMap::from([(uri, edits)])),
                    ..Default::default()
                }
            };
            match self.client.apply_edit(edit).await {
                Ok(r) if r.applied => {
                    // The editor reports the change with didChange (some clients just after
                    // answering): wait for it, so what the agent reads next — and the
                    // snapshot after the step — sees the new text.
                    let deadline = tokio::time::Instant::now() + Duration::from_millis(500);
                    let mut reported = false;
                    while tokio::time::Instant::now() < deadline {
                        match self.buffers.open_document(path) {
                            Some((_, d)) if d.version != doc.version || d.text == new_text => {
                                reported = true;
                                break;
                            }
                            None => break,
                            _ => tokio::time::sleep(Duration::from_millis(5)).await,
                        }
                    }
                    let mut expected = self.expected.lock().unwrap_or_else(|p| p.into_inner());
                    if reported {
                        expected.remove(path);
                    } else {
                        expected.insert(path.to_path_buf(), (doc.version, new_text.to_string()));
                    }
                    BufferEdit::Applied
                }
                Ok(r) => BufferEdit::Rejected(
                    r.failure_reason
                        .unwrap_or_else(|| "the editor declined the edit".into()),
                ),
                Err(e) => BufferEdit::Rejected(e.message.to_string()),
            }
        })
    }

    fn file_operation<'a>(&'a self, op: &'a FileOperation) -> BoxFuture<'a, BufferEdit> {
        Box::pin(async move {
            if !self.buffers.caps().resource_operations {
                return BufferEdit::NotOpen;
            }
            let change = match op {
                FileOperation::Create { path } => {
                    let Some(uri) = file_uri(path) else {
                        return BufferEdit::NotOpen;
                    };
                    let options = CreateFileOptions {
                        overwrite: Some(false),
                        ignore_if_exists: Some(true),
                    };
                    ResourceOp::Create(CreateFile {
                        uri,
                        options: Some(options),
                        annotation_id: None,
                    })
                }
                FileOperation::Delete { path } => {
                    let Some(uri) = file_uri(path) else {
                        return BufferEdit::NotOpen;
                    };
                    ResourceOp::Delete(DeleteFile {
                        uri,
                        options: None,
                        annotation_id: None,
                    })
                }
                FileOperation::Rename { from, to } => {
                    let (Some(old_uri), Some(new_uri)) = (file_uri(from), file_uri(to)) else {
                        return BufferEdit::NotOpen;
                    };
                    ResourceOp::Rename(RenameFile {
                        old_uri,
                        new_uri,
                        options: None,
                        annotation_id: None,
                    })
                }
            };
            let edit = WorkspaceEdit {
                document_changes: Some(DocumentChanges::Operations(vec![
                    DocumentChangeOperation::Op(change),
                ])),
                ..Default::default()
            };
            match self.client.apply_edit(edit).await {
                Ok(r) if r.applied => BufferEdit::Applied,
                Ok(r) => BufferEdit::Rejected(
                    r.failure_reason
                        .unwrap_or_else(|| "the editor declined".into()),
                ),
                Err(e) => BufferEdit::Rejected(e.message.to_string()),
            }
        })
    }

    fn ask_permission<'a>(
        &'a self,
        request: &'a PermissionRequest,
    ) -> BoxFuture<'a, PermissionReply> {
        Box::pin(async move {
            let caps = self.buffers.caps();
            if caps.permissions {
                let mut params = serde_json::to_value(request).unwrap_or_default();
                params["description"] = json!(request.patterns.join(", "));
                params["options"] = json!(["once", "always", "reject"]);
                return match self.client.send_request::<RequestPermission>(params).await {
                    Ok(v) => match v["outcome"].as_str() {
                        Some("once") => PermissionReply::Once,
                        Some("always") => PermissionReply::Always,
                        _ => PermissionReply::Reject {
                            message: v["message"].as_str().map(String::from),
                        },
                    },
                    Err(_) => PermissionReply::Reject { message: None },
                };
            }
            if caps.show_message_request {
                let mut message = format!("agent-lsp: {}", request.title);
                if let Some(cmd) = &request.command {
                    message.push_str(&format!("\n$ {cmd}"));
                }
                let actions = ["Allow once", "Always allow", "Deny"].map(|t| MessageActionItem {
                    title: t.into(),
                    properties: Default::default(),
                });
                return match self
                    .client
                    .show_message_request(MessageType::WARNING, message, Some(actions.to_vec()))
                    .await
                {
                    Ok(Some(a)) if a.title == "Allow once" => PermissionReply::Once,
                    Ok(Some(a)) if a.title == "Always allow" => PermissionReply::Always,
                    _ => PermissionReply::Reject { message: None },
                };
            }
            self.ask_by_code_action(request).await
        })
    }

    fn ask_questions<'a>(
        &'a self,
        questions: &'a [Question],
    ) -> BoxFuture<'a, Result<Vec<Vec<String>>, String>> {
        Box::pin(async move {
            let caps = self.buffers.caps();
            if caps.questions {
                let v = self
                    .client
                    .send_request::<AskQuestion>(json!({"questions": questions}))
                    .await
                    .map_err(|e| e.message.to_string())?;
                return serde_json::from_value(v["answers"].clone())
                    .map_err(|e| format!("bad answers from the editor: {e}"));
            }
            if caps.show_message_request {
                let mut answers = Vec::new();
                for q in questions {
                    let actions: Vec<MessageActionItem> = q
                        .options
                        .iter()
                        .map(|o| MessageActionItem {
                            title: o.label.clone(),
                            properties: Default::default(),
                        })
                        .collect();
                    let picked = self
                        .client
                        .show_message_request(MessageType::INFO, q.question.clone(), Some(actions))
                        .await
                        .ok()
                        .flatten();
                    answers.push(picked.map(|a| vec![a.title]).unwrap_or_default());
                }
                return Ok(answers);
            }
            Err("this editor cannot show questions; ask in your answer instead".into())
        })
    }
}

/// Per-session delivery state.
#[derive(Default)]
struct Stream {
    seq: u64,
    /// Chunks waiting to be merged: (kind, message id, text).
    chunk: Option<(&'static str, String, String)>,
    /// Fallback: the work-done progress of the running turn, and the turn's answer text.
    progress: Option<ProgressToken>,
    answer: String,
    /// Transcript text not yet appended to the file (written with each flush).
    transcript: String,
}

struct Coalescer {
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
        | Update::Usage { session_id, .. } => session_id,
    }
}

/// The tool-call kind of the protocol, from the tool's name.
fn tool_kind(name: &str) -> &'static str {
    match name {
        "read" => "read",
        "write" | "edit" | "apply_patch" => "edit",
        "glob" | "grep" => "search",
        "bash" => "execute",
        "webfetch" => "fetch",
        _ => "other",
    }
}

fn tool_title(name: &str, input: &Value) -> String {
    let target = ["filePath", "command", "pattern", "url"]
        .iter()
        .find_map(|k| input.get(*k).and_then(Value::as_str))
        .unwrap_or("");
    format!("{name} {target}").trim().to_string()
}

impl Coalescer {
    fn new(client: Client, buffers: Arc<dyn Buffers>, transcripts: PathBuf) -> Self {
        Self {
            client,
            buffers,
            transcripts,
            streams: HashMap::new(),
        }
    }

    async fn run(mut self, mut rx: mpsc::UnboundedReceiver<Update>) {
        // Chunks wait at most COALESCE after the first of a batch, however fast they come.
        let mut deadline: Option<tokio::time::Instant> = None;
        loop {
            let waiting = self.streams.values().any(|s| s.chunk.is_some());
            if waiting && deadline.is_none() {
                deadline = Some(tokio::time::Instant::now() + COALESCE);
            }
            // A backlog never postpones a flush that is due.
            if let Some(at) = deadline.filter(|_| waiting)
                && tokio::time::Instant::now() >= at
            {
                self.flush_all().await;
                deadline = None;
                continue;
            }
            let next = match deadline.filter(|_| waiting) {
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
        let Some(stream) = self.streams.get_mut(sid) else {
            return;
        };
        let Some((kind, message_id, text)) = stream.chunk.take() else {
            return;
        };
        self.send(
            sid,
            json!({"kind": kind, "messageId": message_id, "text": text}),
        )
        .await;
    }

    async fn send(&mut self, sid: &str, update: Value) {
        if !self.buffers.caps().updates {
            return;
        }
        let stream = self.streams.entry(sid.to_string()).or_default();
        stream.seq += 1;
        let params = json!({"sessionId": sid, "seq": stream.seq, "update": update});
        self.client.send_notification::<AgentUpdate>(params).await;
    }

    fn transcript(&mut self, sid: &str, text: &str) {
        self.streams
            .entry(sid.to_string())
            .or_default()
            .transcript
            .push_str(text);
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
        let path = self.transcripts.join(format!("{sid}.md"));
        if let Some(dir) = path.parent() {
            let _ = std::fs::create_dir_all(dir);
        }
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
        {
            let _ = f.write_all(text.as_bytes());
        }
    }

    async fn progress(&mut self, sid: &str, value: WorkDoneProgress) {
        let caps = self.buffers.caps();
        if caps.updates || !caps.work_done_progress {
            return;
        }
        let token = match &self.streams.entry(sid.to_string()).or_default().progress {
            Some(t) => t.clone(),
            None => return,
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
        // Merge consecutive chunks of the same kind and message.
        if let Update::Text {
            message_id, text, ..
        }
        | Update::Reasoning {
            message_id, text, ..
        } = &update
        {
            let kind = if matches!(update, Update::Text { .. }) {
                "message_chunk"
            } else {
                "reasoning_chunk"
            };
            if kind == "message_chunk" {
                self.transcript(&sid, text);
            }
            let stream = self.streams.entry(sid.clone()).or_default();
            if kind == "message_chunk" {
                stream.answer.push_str(text);
            }
            match &mut stream.chunk {
                Some((k, m, t)) if *k == kind && m == message_id => t.push_str(text),
                _ => {
                    self.flush(&sid).await;
                    self.streams.entry(sid.clone()).or_default().chunk =
                        Some((kind, message_id.clone(), text.clone()));
                }
            }
            return;
        }
        self.flush(&sid).await;
        match update {
            Update::UserMessage {
                message_id, text, ..
            } => {
                self.transcript(&sid, &format!("\n\n## You\n\n{text}\n\n## Agent\n\n"));
                self.send(
                    &sid,
                    json!({"kind": "user_message", "messageId": message_id, "text": text}),
                )
                .await;
            }
            Update::ToolCall {
                id,
                name,
                input,
                status,
                ..
            } => {
                let title = tool_title(&name, &input);
                if status == "running" {
                    self.transcript(&sid, &format!("\n\n- `{title}`\n"));
                    self.progress(
                        &sid,
                        WorkDoneProgress::Report(WorkDoneProgressReport {
                            message: Some(format!("running {title}")),
                            ..Default::default()
                        }),
                    )
                    .await;
                }
                // `kind` names the update, so the tool's kind is `toolKind`.
                let mut update = json!({"kind": "tool_call", "toolCallId": id, "name": name, "title": title,
                    "toolKind": tool_kind(&name), "status": status, "rawInput": input});
                if let Some(path) = input.get("filePath").and_then(Value::as_str) {
                    let root = PathBuf::from(path);
                    if let Some(uri) = file_uri(&root).filter(|_| root.is_absolute()) {
                        update["locations"] = json!([{"uri": uri}]);
                    }
                }
                self.send(&sid, update).await;
            }
            Update::ToolResult {
                id,
                name,
                status,
                title,
                output,
                diff,
                ..
            } => {
                let status = if status == "completed" {
                    "completed"
                } else {
                    "failed"
                };
                if status == "failed" {
                    self.transcript(
                        &sid,
                        &format!(
                            "  - {name} failed: {}\n",
                            output.lines().next().unwrap_or("")
                        ),
                    );
                }
                let mut update = json!({"kind": "tool_call_update", "toolCallId": id, "name": name,
                    "status": status, "title": title, "output": output});
                // An edit's before and after, for the editor's diff view.
                if let Some(d) = diff.filter(|d| d.is_object())
                    && let Some(uri) = d["path"].as_str().and_then(|p| file_uri(Path::new(p)))
                {
                    update["diff"] =
                        json!({"uri": uri, "oldText": d["oldText"], "newText": d["newText"]});
                }
                self.send(&sid, update).await;
            }
            Update::Status {
                status,
                stop_reason,
                ..
            } => {
                let mut update = json!({"kind": "status", "status": status});
                if let Some(reason) = stop_reason {
                    update["stopReason"] = json!(reason);
                }
                self.send(&sid, update).await;
                self.on_status(&sid, &status).await;
            }
            Update::Usage {
                input_tokens,
                output_tokens,
                cache_read_tokens,
                ..
            } => {
                self.send(&sid, json!({"kind": "usage", "inputTokens": input_tokens, "outputTokens": output_tokens,
                    "cacheReadTokens": cache_read_tokens})).await;
            }
            Update::Error { message, .. } => {
                self.transcript(&sid, &format!("\n\n**Error:** {message}\n"));
                self.send(&sid, json!({"kind": "error", "message": message}))
                    .await;
                if !self.buffers.caps().updates {
                    self.client
                        .show_message(MessageType::ERROR, format!("agent-lsp: {message}"))
                        .await;
                }
            }
            Update::Retry {
                attempt,
                wait_ms,
                reason,
                ..
            } => {
                self.send(&sid, json!({"kind": "retry", "attempt": attempt, "waitMs": wait_ms, "reason": reason})).await;
            }
            Update::Plan { todos, .. } => {
                self.send(&sid, json!({"kind": "plan", "todos": todos}))
                    .await;
            }
            Update::Revert {
                message_id, files, ..
            } => {
                self.send(
                    &sid,
                    json!({"kind": "revert", "messageId": message_id, "files": files}),
                )
                .await;
            }
            Update::Session { .. } | Update::Text { .. } | Update::Reasoning { .. } => {}
        }
    }

    /// Fallbacks at the start and end of a turn: work-done progress, and the answer's first
    /// lines through `window/showMessage`.
    async fn on_status(&mut self, sid: &str, status: &str) {
        let caps = self.buffers.caps();
        if caps.updates {
            return;
        }
        if status == "busy" {
            let stream = self.streams.entry(sid.to_string()).or_default();
            stream.answer.clear();
            if caps.work_done_progress {
                let token =
                    ProgressToken::String(format!("agent-lsp/{sid}/{}", crate::store::new_id()));
                if self
                    .client
                    .create_work_done_progress(token.clone())
                    .await
                    .is_ok()
                {
                    self.streams.entry(sid.to_string()).or_default().progress = Some(token);
                    self.progress(
                        sid,
                        WorkDoneProgress::Begin(WorkDoneProgressBegin {
                            title: "agent-lsp".into(),
                            message: Some("working".into()),
                            ..Default::default()
                        }),
                    )
                    .await;
                }
            }
        } else {
            let answer = self
                .streams
                .get(sid)
                .map(|s| s.answer.clone())
                .unwrap_or_default();
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
            self.progress(
                sid,
                WorkDoneProgress::End(WorkDoneProgressEnd {
                    message: Some(summary.chars().take(120).collect()),
                }),
            )
            .await;
            self.streams.entry(sid.to_string()).or_default().progress = None;
            if !first.is_empty() {
                let transcript = self.transcripts.join(format!("{sid}.md"));
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
    }
}
