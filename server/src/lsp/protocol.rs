//! The `agent/*` extension methods: their names and payloads (stable: editor plugins and
//! external tests build on them).

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tower_lsp_server::ls_types::notification::Notification;
use tower_lsp_server::ls_types::request::Request;
use tower_lsp_server::ls_types::{Range, Uri};

/// Server → client: what a session is doing, coalesced (~16 ms) per session.
pub enum AgentUpdate {}
impl Notification for AgentUpdate {
    type Params = Value;
    const METHOD: &'static str = "agent/update";
}

/// Server → client: a permission ask, for clients that opted in.
pub enum RequestPermission {}
impl Request for RequestPermission {
    type Params = Value;
    type Result = Value;
    const METHOD: &'static str = "agent/requestPermission";
}

/// Server → client: questions for the user, for clients that opted in.
pub enum AskQuestion {}
impl Request for AskQuestion {
    type Params = Value;
    type Result = Value;
    const METHOD: &'static str = "agent/question";
}

/// What a client opted into (`capabilities.experimental.agent`), and what it can do anyway.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClientCaps {
    pub updates: bool,
    pub permissions: bool,
    pub questions: bool,
    pub show_message_request: bool,
    pub show_document: bool,
    pub work_done_progress: bool,
    pub document_changes: bool,
    pub resource_operations: bool,
}

impl ClientCaps {
    pub fn from_initialize(caps: &tower_lsp_server::ls_types::ClientCapabilities) -> Self {
        let agent = caps.experimental.as_ref().and_then(|e| e.get("agent"));
        let flag = |name: &str| {
            agent
                .and_then(|a| a.get(name))
                .and_then(Value::as_bool)
                .unwrap_or(false)
        };
        let window = caps.window.as_ref();
        let edit = caps
            .workspace
            .as_ref()
            .and_then(|w| w.workspace_edit.as_ref());
        Self {
            updates: flag("updates"),
            permissions: flag("permissions"),
            questions: flag("questions"),
            show_message_request: window.and_then(|w| w.show_message.as_ref()).is_some(),
            show_document: window
                .and_then(|w| w.show_document.as_ref())
                .is_some_and(|d| d.support),
            work_done_progress: window.and_then(|w| w.work_done_progress).unwrap_or(false),
            document_changes: edit.and_then(|e| e.document_changes).unwrap_or(false),
            resource_operations: edit
                .and_then(|e| e.resource_operations.as_ref())
                .is_some_and(|r| !r.is_empty()),
        }
    }
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PromptContext {
    pub uri: Uri,
    #[serde(default)]
    pub range: Option<Range>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PromptParams {
    #[serde(default)]
    pub session_id: Option<String>,
    pub text: String,
    #[serde(default)]
    pub context: Option<PromptContext>,
    #[serde(default)]
    pub mode: Option<String>,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionParams {
    pub session_id: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RevertParams {
    pub session_id: String,
    pub message_id: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SetModeParams {
    pub session_id: String,
    pub mode: String,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SearchParams {
    pub query: String,
    /// `session` (needs `sessionId`), `project` (the default) or `all`.
    #[serde(default)]
    pub scope: Option<crate::store::Scope>,
    #[serde(default)]
    pub session_id: Option<String>,
    #[serde(default)]
    pub limit: Option<usize>,
}
