//! The editor port for LSP clients: open buffers, `workspace/applyEdit`, permission asks
//! (`agent/requestPermission`, else `window/showMessageRequest`, else code actions) and
//! questions. Updates go to the [`Coalescer`].

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use futures::future::BoxFuture;
use tokio::sync::{mpsc, oneshot};
use tower_lsp_server::Client;
use tower_lsp_server::ls_types::*;

use super::coalescer::Coalescer;
use super::documents::{Document, PositionEncoding};
use super::protocol::{self as wire, AskQuestion, ClientCaps, RequestPermission};
use crate::editor::{
    BufferEdit, CodeAnswer, CodeQuery, EditorPort, FileOperation, NoCodeAnswer, PermissionReply,
    PermissionRequest, Problem, Question, Update,
};

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

/// The file a `file:` URI names.
pub fn uri_path(uri: &Uri) -> Option<PathBuf> {
    (uri.scheme().as_str() == "file")
        .then(|| uri.to_file_path().map(|p| p.into_owned()))
        .flatten()
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

/// The document changes of a file operation: the resource operation, and for a new text
/// file its text inserted in the same edit (one undo step in the editor). `None` when a
/// path is not a file URI.
fn resource_operations(op: &FileOperation) -> Option<Vec<DocumentChangeOperation>> {
    let mut out = Vec::new();
    let change = match op {
        FileOperation::Create { path, text } => {
            let uri = file_uri(path)?;
            // Created only when absent; no `ignoreIfExists`, with which Neovim makes just a
            // buffer and no file (and a snapshot would not see it).
            let options = CreateFileOptions {
                overwrite: Some(false),
                ignore_if_exists: None,
            };
            if let Some(text) = text.as_ref().filter(|t| !t.is_empty()) {
                let insert = TextEdit {
                    range: Range::default(),
                    new_text: text.clone(),
                };
                out.push(DocumentChangeOperation::Edit(TextDocumentEdit {
                    text_document: OptionalVersionedTextDocumentIdentifier {
                        uri: uri.clone(),
                        version: None,
                    },
                    edits: vec![OneOf::Left(insert)],
                }));
            }
            ResourceOp::Create(CreateFile {
                uri,
                options: Some(options),
                annotation_id: None,
            })
        }
        FileOperation::Delete { path } => ResourceOp::Delete(DeleteFile {
            uri: file_uri(path)?,
            options: None,
            annotation_id: None,
        }),
        FileOperation::Rename { from, to } => ResourceOp::Rename(RenameFile {
            old_uri: file_uri(from)?,
            new_uri: file_uri(to)?,
            options: None,
            annotation_id: None,
        }),
    };
    out.insert(0, DocumentChangeOperation::Op(change));
    Some(out)
}

impl LspEditor {
    /// Waits (half a second at most) until the editor reports `path` open with `text`.
    async fn await_buffer(&self, path: &Path, text: &str) {
        let deadline = tokio::time::Instant::now() + Duration::from_millis(500);
        while tokio::time::Instant::now() < deadline {
            if self
                .buffers
                .open_document(path)
                .is_some_and(|(_, d)| d.text == text)
            {
                return;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        tracing::debug!("the editor did not report {} open", path.display());
    }

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
            let Some(operations) = resource_operations(op) else {
                return BufferEdit::NotOpen;
            };
            let edit = WorkspaceEdit {
                document_changes: Some(DocumentChanges::Operations(operations)),
                ..Default::default()
            };
            match self.client.apply_edit(edit).await {
                Ok(r) if r.applied => match op {
                    FileOperation::Create {
                        path,
                        text: Some(text),
                    } => {
                        // The editor reports the new buffer with didOpen: wait for it, so that
                        // the step's snapshot sees the text, not the empty file on disk.
                        self.await_buffer(path, text).await;
                        BufferEdit::Applied
                    }
                    // Announced only: the caller writes the bytes.
                    FileOperation::Create { text: None, .. } => BufferEdit::NotOpen,
                    _ => BufferEdit::Applied,
                },
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
                let params = wire::PermissionParams::from(request);
                return match self.client.send_request::<RequestPermission>(params).await {
                    Ok(answer) => PermissionReply::from(answer),
                    Err(e) => {
                        tracing::warn!("the editor did not answer a permission ask: {e}");
                        PermissionReply::Reject { message: None }
                    }
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
    ) -> BoxFuture<'a, Result<Vec<Vec<String>>, crate::editor::Unanswered>> {
        Box::pin(async move {
            let caps = self.buffers.caps();
            if caps.questions {
                let params = wire::QuestionParams {
                    questions: questions.iter().map(wire::Question::from).collect(),
                };
                let reply = self
                    .client
                    .send_request::<AskQuestion>(params)
                    .await
                    .map_err(|e| {
                        format!("the editor did not answer the questions: {}", e.message)
                    })?;
                return Ok(reply.answers);
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

    fn reports_problems(&self) -> bool {
        self.buffers.caps().diagnostics
    }

    fn problems<'a>(
        &'a self,
        paths: &'a [PathBuf],
        wait: Duration,
    ) -> BoxFuture<'a, Option<Vec<Problem>>> {
        Box::pin(super::intelligence::problems(
            &self.client,
            self.buffers.as_ref(),
            paths,
            wait,
        ))
    }

    fn answers_code_queries(&self) -> bool {
        self.buffers.caps().code_requests
    }

    fn code_query<'a>(
        &'a self,
        query: &'a CodeQuery,
    ) -> BoxFuture<'a, Result<CodeAnswer, NoCodeAnswer>> {
        Box::pin(super::intelligence::code_query(
            &self.client,
            self.buffers.as_ref(),
            query,
        ))
    }
}
