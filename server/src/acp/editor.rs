//! The editor port for ACP clients: updates become `session/update` notifications,
//! permission asks `session/request_permission`, and edits `fs/write_text_file` when the
//! client can take them (so they land in its buffers), else the disk.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock};

use agent_client_protocol::Client;
use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema::{
    PermissionOption, PermissionOptionKind, ReadTextFileRequest, RequestPermissionOutcome,
    RequestPermissionRequest, SessionNotification, SessionUpdate, ToolCallUpdate,
    ToolCallUpdateFields, WriteTextFileRequest,
};
use futures::future::BoxFuture;

use super::convert;
use crate::editor::{
    BufferEdit, EditorPort, FileOperation, PermissionReply, PermissionRequest, Question, Update,
};

tokio::task_local! {
    /// The session whose turn runs on this task (edits through the client name it).
    pub static SESSION: String;
}

#[derive(Default)]
pub struct AcpEditor {
    connection: OnceLock<ConnectionTo<Client>>,
    /// Each session's workspace (for absolute locations).
    workspaces: Mutex<HashMap<String, PathBuf>>,
    /// The client said it can read files (`fs.readTextFile`): its buffers, unsaved text
    /// included.
    reads_files: AtomicBool,
    /// The client said it can write files (`fs.writeTextFile`).
    writes_files: AtomicBool,
}

const ALLOW_ONCE: &str = "allow_once";
const ALLOW_ALWAYS: &str = "allow_always";
const REJECT_ONCE: &str = "reject_once";
const REJECT_ALWAYS: &str = "reject_always";

impl AcpEditor {
    /// The connection (set by the first request) and what the client can do.
    pub fn connect(&self, connection: ConnectionTo<Client>) {
        let _ = self.connection.set(connection);
    }

    /// Where `sid` works (set when the session is created or loaded).
    pub fn set_workspace(&self, sid: &str, root: &Path) {
        self.workspaces
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(sid.to_string(), root.to_path_buf());
    }

    pub fn workspace(&self, sid: &str) -> Option<PathBuf> {
        self.workspaces
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(sid)
            .cloned()
    }

    /// What the client's `fs` capabilities allow.
    pub fn set_file_access(&self, reads: bool, writes: bool) {
        self.reads_files.store(reads, Ordering::Relaxed);
        self.writes_files.store(writes, Ordering::Relaxed);
    }

    /// The client's text of `path` (its buffer if open), for a turn's tools. The port's read
    /// is synchronous, so the request is waited for on this worker thread (a bounded wait;
    /// on a single-threaded runtime, or on any failure, the disk is read instead).
    fn client_text(&self, path: &Path) -> Option<String> {
        use tokio::runtime::{Handle, RuntimeFlavor};
        if !self.reads_files.load(Ordering::Relaxed) {
            return None;
        }
        let cx = self.connection.get()?;
        let sid = SESSION.try_with(Clone::clone).ok()?;
        let handle = Handle::try_current().ok()?;
        if handle.runtime_flavor() != RuntimeFlavor::MultiThread {
            return None;
        }
        let request = ReadTextFileRequest::new(sid, path.to_path_buf());
        let answer = tokio::task::block_in_place(|| {
            handle.block_on(tokio::time::timeout(
                std::time::Duration::from_secs(10),
                cx.send_request(request).block_task(),
            ))
        });
        match answer {
            Ok(Ok(r)) => Some(r.content),
            Ok(Err(e)) => {
                tracing::debug!(
                    "fs/read_text_file {}: {e:?}; reading the disk",
                    path.display()
                );
                None
            }
            Err(_) => {
                tracing::warn!(
                    "fs/read_text_file {} timed out; reading the disk",
                    path.display()
                );
                None
            }
        }
    }

    /// Sends one `session/update`; a closed connection only loses the update.
    pub fn send(&self, session_id: &str, update: SessionUpdate) {
        let Some(cx) = self.connection.get() else {
            return;
        };
        if let Err(e) =
            cx.send_notification(SessionNotification::new(session_id.to_string(), update))
        {
            tracing::debug!("session/update not sent: {e:?}");
        }
    }
}

fn options() -> Vec<PermissionOption> {
    vec![
        PermissionOption::new(ALLOW_ONCE, "Allow once", PermissionOptionKind::AllowOnce),
        PermissionOption::new(
            ALLOW_ALWAYS,
            "Always allow",
            PermissionOptionKind::AllowAlways,
        ),
        PermissionOption::new(REJECT_ONCE, "Reject", PermissionOptionKind::RejectOnce),
        PermissionOption::new(
            REJECT_ALWAYS,
            "Always reject",
            PermissionOptionKind::RejectAlways,
        ),
    ]
}

/// The client's choice as our reply. A rejection lets the model go on with another
/// approach, and reads the user's reason when the client sends one (ACP has no field for
/// it: `_meta.reason`); a cancelled ask (the client cancelled the turn) stops the turn.
fn reply(outcome: RequestPermissionOutcome) -> PermissionReply {
    match outcome {
        RequestPermissionOutcome::Selected(s) => match &*s.option_id.0 {
            ALLOW_ONCE => PermissionReply::Once,
            ALLOW_ALWAYS => PermissionReply::Always,
            _ => {
                let reason = s.meta.as_ref().and_then(|m| m.get("reason")?.as_str());
                let message = match reason.map(str::trim).filter(|r| !r.is_empty()) {
                    Some(r) => r.to_string(),
                    None => "The user rejected this call; do not retry it as it was.".into(),
                };
                PermissionReply::Reject {
                    message: Some(message),
                }
            }
        },
        _ => PermissionReply::Reject { message: None },
    }
}

/// The session an update belongs to, for those that have a place in ACP.
fn update_session(update: &Update) -> Option<&str> {
    match update {
        Update::ToolCall { session_id, .. } => Some(session_id),
        _ => None,
    }
}

impl EditorPort for AcpEditor {
    fn publish(&self, update: Update) {
        let sid = update_session(&update);
        let root = sid.and_then(|s| self.workspace(s)).unwrap_or_default();
        if let Some((sid, update)) = convert::live(&update, &root) {
            self.send(&sid, update);
        }
    }

    fn buffer_text(&self, path: &Path) -> Option<String> {
        self.client_text(path)
    }

    fn apply_to_buffer<'a>(&'a self, path: &'a Path, text: &'a str) -> BoxFuture<'a, BufferEdit> {
        Box::pin(async move {
            let (Some(cx), Ok(sid)) = (self.connection.get(), SESSION.try_with(Clone::clone))
            else {
                return BufferEdit::NotOpen;
            };
            if !self.writes_files.load(Ordering::Relaxed) {
                return BufferEdit::NotOpen;
            }
            let request = WriteTextFileRequest::new(sid, path.to_path_buf(), text.to_string());
            match cx.send_request(request).block_task().await {
                Ok(_) => BufferEdit::Applied,
                Err(e) => BufferEdit::Rejected(format!(
                    "the client did not write the file: {}",
                    e.message
                )),
            }
        })
    }

    /// A new text file goes through `fs/write_text_file` like any write, so the client
    /// creates it (in its buffers); ACP has no delete or rename for the agent to send.
    fn file_operation<'a>(&'a self, op: &'a FileOperation) -> BoxFuture<'a, BufferEdit> {
        match op {
            FileOperation::Create {
                path,
                text: Some(text),
            } => self.apply_to_buffer(path, text),
            _ => Box::pin(async { BufferEdit::NotOpen }),
        }
    }

    fn ask_permission<'a>(&'a self, req: &'a PermissionRequest) -> BoxFuture<'a, PermissionReply> {
        Box::pin(async move {
            let (Some(cx), Some(sid)) = (self.connection.get(), req.session_id.clone()) else {
                return PermissionReply::Reject { message: None };
            };
            let call = ToolCallUpdate::new(
                req.tool_call_id.clone().unwrap_or_default(),
                ToolCallUpdateFields::new()
                    .title(req.title.clone())
                    .kind(convert::tool_kind(&req.tool)),
            );
            let ask = RequestPermissionRequest::new(sid, call, options());
            match cx.send_request(ask).block_task().await {
                Ok(answer) => reply(answer.outcome),
                Err(e) => {
                    tracing::warn!("session/request_permission failed: {e:?}");
                    PermissionReply::Reject { message: None }
                }
            }
        })
    }

    fn ask_questions<'a>(
        &'a self,
        _: &'a [Question],
    ) -> BoxFuture<'a, Result<Vec<Vec<String>>, crate::editor::Unanswered>> {
        Box::pin(async {
            Err("ACP has no way to ask questions: ask in your answer and end the turn".into())
        })
    }
}
