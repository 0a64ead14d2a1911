//! The editor port: the one way the agent and its tools reach "the editor".
//!
//! The LSP bridge implements it for editors (buffers, `workspace/applyEdit`, approval
//! requests); the headless CLI implements it for the terminal. Nothing here knows LSP.

use std::path::{Path, PathBuf};

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};

use crate::status::{PartStatus, SessionStatus, TurnEnd};

/// What a tool wants permission for, with everything a person needs to decide.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PermissionRequest {
    /// The session and tool call asking (filled in by the registry).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// The permission key (`edit`, `bash`, `external_directory`, ...).
    pub permission: String,
    pub tool: String,
    pub title: String,
    /// What the rules were evaluated on (paths, command segments, the URL).
    pub patterns: Vec<String>,
    /// What "always" would save.
    pub always: Vec<String>,
    /// Unified diff, for edits.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub diff: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub workdir: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Paths outside the workspace that a bash command mentions.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub external_paths: Vec<String>,
    /// For edits: each file's text before and after, so an editor can open its diff view.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<ProposedChange>,
    /// Shell commands that cannot be known before they run: allowed only by a rule that
    /// names them (see `permission::shell`).
    #[serde(skip)]
    pub opaque: Vec<crate::permission::shell::Opaque>,
}

/// One file an edit would change.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ProposedChange {
    pub path: PathBuf,
    pub old_text: String,
    pub new_text: String,
}

/// The user's answer to a permission request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "outcome")]
pub enum PermissionReply {
    Once,
    /// Allow, and save the request's `always` patterns for this project.
    Always,
    /// Refuse. With a message, the model reads it and the turn goes on; without, the turn
    /// stops.
    Reject {
        message: Option<String>,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct QuestionOption {
    pub label: String,
    #[serde(default)]
    pub description: String,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct Question {
    pub question: String,
    /// A very short label for the question (a few words).
    #[serde(default)]
    pub header: String,
    #[serde(default)]
    pub options: Vec<QuestionOption>,
    /// Whether several options may be chosen.
    #[serde(default)]
    pub multiple: bool,
}

/// A file created, deleted or renamed by the agent, offered to the editor first so that it
/// knows (and its buffers follow).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FileOperation {
    /// A new file; with its text when it is text, so that an editor can take the creation
    /// and the content as one change (one undo step there). `Applied` means the editor has
    /// the file with its text; `NotOpen`, that the caller writes it (after the editor was
    /// told of the creation, if it listens).
    Create {
        path: PathBuf,
        text: Option<String>,
    },
    Delete {
        path: PathBuf,
    },
    Rename {
        from: PathBuf,
        to: PathBuf,
    },
}

/// What happened when an edit was offered to the editor's buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BufferEdit {
    /// The file is not open: the caller writes it to disk.
    NotOpen,
    /// The editor applied it (it is in the editor's undo stack).
    Applied,
    /// The editor refused it, or the buffer changed meanwhile.
    Rejected(String),
}

/// What the agent reports while it works (the CLI prints these; the LSP bridge turns them into
/// notifications).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Update {
    Session {
        session_id: String,
    },
    UserMessage {
        session_id: String,
        message_id: String,
        text: String,
    },
    Text {
        session_id: String,
        message_id: String,
        text: String,
    },
    Reasoning {
        session_id: String,
        message_id: String,
        text: String,
    },
    ToolCall {
        session_id: String,
        id: String,
        name: String,
        input: serde_json::Value,
        /// `pending` or `running`.
        status: PartStatus,
    },
    ToolResult {
        session_id: String,
        id: String,
        name: String,
        /// `completed`, `error` or `interrupted`.
        status: PartStatus,
        title: String,
        output: String,
        /// For edits: the file and its text before and after.
        #[serde(skip_serializing_if = "Option::is_none")]
        diff: Option<ProposedChange>,
    },
    Status {
        session_id: String,
        status: SessionStatus,
        /// How the turn ended, on `idle`.
        #[serde(skip_serializing_if = "Option::is_none")]
        stop_reason: Option<TurnEnd>,
    },
    Retry {
        session_id: String,
        attempt: u32,
        wait_ms: u64,
        reason: String,
    },
    Error {
        session_id: String,
        message: String,
    },
    /// The session's todo list changed.
    Plan {
        session_id: String,
        todos: Vec<crate::store::Todo>,
    },
    /// Files were reverted (or brought back) in the session.
    Revert {
        session_id: String,
        message_id: Option<String>,
        files: Vec<String>,
    },
    Usage {
        session_id: String,
        input_tokens: u64,
        output_tokens: u64,
        cache_read_tokens: u64,
    },
    /// The session state file changed: where it is, its focus and phase.
    State {
        session_id: String,
        path: std::path::PathBuf,
        focus: Option<String>,
        phase: Option<String>,
    },
}

/// How bad a problem is, in the language servers' four grades.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Severity {
    Error,
    Warning,
    Information,
    Hint,
}

impl Severity {
    pub fn name(self) -> &'static str {
        match self {
            Self::Error => "error",
            Self::Warning => "warning",
            Self::Information => "info",
            Self::Hint => "hint",
        }
    }
}

/// A problem the editor's language servers report in a file. Lines and columns are 1-based
/// and count characters, as the model sees a file in `read`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    pub path: PathBuf,
    pub line: u32,
    pub column: u32,
    pub severity: Severity,
    pub message: String,
    /// Who reports it (`rustc`, `Pyright`), and its code, when the server says.
    pub source: Option<String>,
    pub code: Option<String>,
}

/// A place in a file, 1-based as the model sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Place {
    pub path: PathBuf,
    pub line: u32,
    pub column: u32,
}

/// A question for the editor's language servers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CodeQuery {
    Definition(Place),
    References(Place),
    Implementation(Place),
    Hover(Place),
    DocumentSymbols(PathBuf),
    WorkspaceSymbols(String),
}

/// A symbol in an outline or a workspace search.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Symbol {
    pub name: String,
    /// `function`, `struct`, `class`, ... (the LSP kind's name, lower case).
    pub kind: String,
    pub place: Place,
    /// Nesting in a document outline (0 at the top).
    pub depth: usize,
}

/// What the language servers answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CodeAnswer {
    Places(Vec<Place>),
    Text(String),
    Symbols(Vec<Symbol>),
}

/// Why the editor's language servers gave no answer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct NoCodeAnswer(pub String);

impl From<&str> for NoCodeAnswer {
    fn from(why: &str) -> Self {
        Self(why.to_string())
    }
}

impl From<String> for NoCodeAnswer {
    fn from(why: String) -> Self {
        Self(why)
    }
}

/// Why questions got no answers (the editor cannot show them, or failed to).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct Unanswered(pub String);

impl From<&str> for Unanswered {
    fn from(why: &str) -> Self {
        Self(why.to_string())
    }
}

impl From<String> for Unanswered {
    fn from(why: String) -> Self {
        Self(why)
    }
}

pub trait EditorPort: Send + Sync {
    /// Reports progress; the default drops it.
    fn publish(&self, _update: Update) {}

    /// The unsaved text of `path` if the editor has it open.
    fn buffer_text(&self, path: &Path) -> Option<String>;

    /// Every open buffer: (path, text). Snapshots take these instead of the disk.
    fn open_buffers(&self) -> Vec<(PathBuf, String)> {
        Vec::new()
    }

    /// Offers the new full text of `path` to the editor's buffer.
    fn apply_to_buffer<'a>(
        &'a self,
        path: &'a Path,
        new_text: &'a str,
    ) -> BoxFuture<'a, BufferEdit>;

    fn ask_permission<'a>(
        &'a self,
        request: &'a PermissionRequest,
    ) -> BoxFuture<'a, PermissionReply>;

    /// Offers a delete or rename to the editor (`NotOpen`: the caller does it on disk).
    fn file_operation<'a>(&'a self, _op: &'a FileOperation) -> BoxFuture<'a, BufferEdit> {
        Box::pin(async { BufferEdit::NotOpen })
    }

    /// Asks the user; one list of chosen labels (or free text) per question.
    fn ask_questions<'a>(
        &'a self,
        questions: &'a [Question],
    ) -> BoxFuture<'a, Result<Vec<Vec<String>>, crate::editor::Unanswered>>;

    /// Whether [`problems`](Self::problems) can answer.
    fn reports_problems(&self) -> bool {
        false
    }

    /// The problems the editor's language servers report in those of `paths` it can see,
    /// once they caught up with the latest change or `wait` passed; `None` when the editor
    /// cannot say (no support, no answer in time).
    fn problems<'a>(
        &'a self,
        _paths: &'a [PathBuf],
        _wait: std::time::Duration,
    ) -> BoxFuture<'a, Option<Vec<Problem>>> {
        Box::pin(async { None })
    }

    /// Whether [`code_query`](Self::code_query) can answer (the `lsp` tool is offered then).
    fn answers_code_queries(&self) -> bool {
        false
    }

    /// Asks the editor's language servers (never agent-lsp itself) about the code.
    fn code_query<'a>(
        &'a self,
        _query: &'a CodeQuery,
    ) -> BoxFuture<'a, Result<CodeAnswer, NoCodeAnswer>> {
        Box::pin(async { Err("this editor does not share its language servers".into()) })
    }
}

/// An editor with no buffers and no one to ask: permission asks get a fixed answer
/// (the CLI's `--yes`, or rejection when nobody is at a terminal).
pub struct Headless {
    pub answer: PermissionReply,
}

impl EditorPort for Headless {
    fn buffer_text(&self, _: &Path) -> Option<String> {
        None
    }

    fn apply_to_buffer<'a>(&'a self, _: &'a Path, _: &'a str) -> BoxFuture<'a, BufferEdit> {
        Box::pin(async { BufferEdit::NotOpen })
    }

    fn ask_permission<'a>(&'a self, _: &'a PermissionRequest) -> BoxFuture<'a, PermissionReply> {
        Box::pin(async { self.answer.clone() })
    }

    fn ask_questions<'a>(
        &'a self,
        _: &'a [Question],
    ) -> BoxFuture<'a, Result<Vec<Vec<String>>, crate::editor::Unanswered>> {
        Box::pin(async { Err("no one is available to answer questions in this session".into()) })
    }
}
