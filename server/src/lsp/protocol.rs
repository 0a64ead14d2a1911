//! The `agent/*` extension protocol: every method as a type with its name and payloads (the
//! way `lsp_types` does it), and the wire types those payloads are made of. Nothing from the
//! store or the editor port goes on the wire by derive: each has a wire type of its own here,
//! built by the bridge and the host. `schema()` turns all of it into the JSON Schema checked
//! in at `editors/protocol/agent-protocol.schema.json` (a test keeps the file current).

use std::path::PathBuf;

use schemars::{JsonSchema, SchemaGenerator, generate::SchemaSettings};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tower_lsp_server::ls_types::notification::Notification;
use tower_lsp_server::ls_types::request::Request;
use tower_lsp_server::ls_types::{Range, Uri};

pub use crate::status::TurnEnd as StopReason;

macro_rules! request {
    ($(#[$doc:meta])* $name:ident, $method:literal, $params:ty => $result:ty) => {
        $(#[$doc])*
        pub enum $name {}
        impl Request for $name {
            type Params = $params;
            type Result = $result;
            const METHOD: &'static str = $method;
        }
    };
}

// Client → server requests.
request!(
    /// Admits a prompt (persisted before the answer) and starts or queues its turn.
    Prompt, "agent/prompt", PromptParams => PromptResult);
request!(
    /// Cancels a session's turn; idempotent. Pending asks of the session are rejected.
    Cancel, "agent/cancel", SessionParams => Empty);
request!(
    /// Every session, newest first.
    Sessions, "agent/sessions", NoParams => Vec<SessionItem>);
request!(
    /// The whole session, for a client that (re)connects.
    History, "agent/history", SessionParams => SessionHistory);
request!(
    /// Puts the files back as they were before a message (staged until the next prompt).
    Revert, "agent/revert", RevertParams => RevertResult);
request!(
    /// Brings back what the staged revert put away.
    Unrevert, "agent/unrevert", SessionParams => RedoResult);
request!(
    /// `agent/unrevert` under the name editors use.
    Redo, "agent/redo", SessionParams => RedoResult);
request!(
    /// Reverts the last prompt's changes and gives its text back.
    Undo, "agent/undo", SessionParams => RevertResult);
request!(
    /// Switches the permission mode from the next step on.
    SetMode, "agent/setMode", SetModeParams => Empty);
request!(
    /// Ranked matches from the recall index.
    Search, "agent/search", SearchParams => Vec<SearchHit>);
request!(
    /// Distils the session now: observes every undistilled message, consolidates if due,
    /// and starts a context whose raw part is the latest turn; refused while it runs.
    Compact, "agent/compact", SessionParams => CompactResult);
request!(
    /// The effective configuration and the layers it came from.
    GetConfig, "agent/config", NoParams => ConfigResult);
request!(
    /// The workspace's session state file: where it is and its Current section.
    GetState, "agent/state", NoParams => StateResult);
request!(
    /// The workspace's memory facts (its project's and the global ones), with provenance.
    MemoryList, "agent/memory/list", NoParams => MemoryListResult);
request!(
    /// Why a fact does or does not surface for a prompt.
    MemoryWhy, "agent/memory/why", MemoryWhyParams => MemoryWhyResult);
request!(
    /// Replaces a fact's text.
    MemoryUpdate, "agent/memory/update", MemoryUpdateParams => Empty);
request!(
    /// Forgets a fact.
    MemoryForget, "agent/memory/forget", FactParams => Empty);
request!(
    /// Searches the user's journal (by text, and by meaning with an embeddings model).
    JournalSearch, "agent/journal/search", JournalSearchParams => JournalSearchResult);
request!(
    /// Writes the project's long-term knowledge into its agents file's managed section
    /// (after reading back what a person changed there).
    KnowledgeExport, "agent/knowledge/export", NoParams => KnowledgeExportResult);
request!(
    /// The server's copy of an open buffer.
    DocumentText, "agent/documentText", DocumentTextParams => DocumentTextResult);

// Server → client.
/// What a session is doing, coalesced (~16 ms) per session.
pub enum AgentUpdate {}
impl Notification for AgentUpdate {
    type Params = UpdateParams;
    const METHOD: &'static str = "agent/update";
}
request!(
    /// A permission ask, for clients that opted in.
    RequestPermission, "agent/requestPermission", PermissionParams => PermissionResult);
request!(
    /// Questions for the user, for clients that opted in.
    AskQuestion, "agent/question", QuestionParams => QuestionResult);
request!(
    /// The diagnostics the client's language servers publish for files, once they caught up
    /// with the latest change (or `waitMs` passed), for clients with the `diagnostics` flag.
    Diagnostics, "agent/diagnostics", DiagnosticsParams => DiagnosticsResult);
request!(
    /// A standard LSP request (`method`, `params` as LSP defines them, positions in the
    /// negotiated encoding) for the client to run against its other language servers (never
    /// agent-lsp); the answer is that request's standard result. For clients with the `lsp`
    /// flag.
    CodeRequest, "agent/lsp", CodeRequestParams => CodeRequestResult);

/// Params of a method that takes none: anything (or nothing) is accepted.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct NoParams {}

impl<'de> Deserialize<'de> for NoParams {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        serde::de::IgnoredAny::deserialize(d).map(|_| NoParams {})
    }
}

impl JsonSchema for NoParams {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "NoParams".into()
    }
    fn json_schema(_: &mut SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({"description": "No parameters: an empty object, null, or none."})
    }
}

/// An empty object.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Empty {}

/// An LSP range (zero-based lines and columns in the negotiated encoding), for the schema.
#[derive(JsonSchema)]
#[allow(dead_code)]
struct RangeSchema {
    start: PositionSchema,
    end: PositionSchema,
}

#[derive(JsonSchema)]
#[allow(dead_code)]
struct PositionSchema {
    line: u32,
    character: u32,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PromptContext {
    #[schemars(with = "String")]
    pub uri: Uri,
    /// The selection; its text and the diagnostics the client last showed in it go along.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(with = "Option<RangeSchema>")]
    pub range: Option<Range>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PromptParams {
    /// None starts a session.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    pub text: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context: Option<PromptContext>,
    /// A permission mode for the session (`build`, `plan`, ...).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PromptResult {
    pub session_id: String,
    /// The admitted input's id (the user message's id once it runs).
    pub message_id: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionParams {
    pub session_id: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RevertParams {
    pub session_id: String,
    pub message_id: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SetModeParams {
    pub session_id: String,
    pub mode: String,
}

/// Where `agent/search` looks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum SearchScope {
    /// One session (needs `sessionId`).
    Session,
    /// This workspace's sessions (the default).
    Project,
    All,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SearchParams {
    pub query: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<SearchScope>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    /// At most this many hits (10 by default, 100 at most).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct JournalSearchParams {
    pub query: String,
    /// At most this many entries (10 by default, 50 at most).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit: Option<usize>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct JournalSearchResult {
    pub hits: Vec<JournalHit>,
    /// `off` (no embeddings model), `on`, or why meaning could not be used this time.
    pub semantic: String,
}

/// What an export did.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct KnowledgeExportResult {
    /// The agents file (absolute).
    pub file: String,
    /// Whether the file changed (an export with nothing new leaves it as it was).
    pub written: bool,
    /// The entries in its section now.
    pub entries: usize,
    /// Read back from the section first: lines a person added, changed, deleted.
    pub imported: usize,
    pub updated: usize,
    pub forgotten: usize,
}

impl From<crate::agent::knowledge::ExportReport> for KnowledgeExportResult {
    fn from(r: crate::agent::knowledge::ExportReport) -> Self {
        Self {
            file: r.file.display().to_string(),
            written: r.written,
            entries: r.entries,
            imported: r.imported,
            updated: r.updated,
            forgotten: r.forgotten,
        }
    }
}

/// A journal entry that matched, with where its file is.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct JournalHit {
    pub id: String,
    pub title: String,
    /// The entry's file.
    pub path: String,
    /// RFC 3339.
    pub created: String,
    pub project: String,
    pub tags: Vec<String>,
    pub snippet: String,
    pub score: f64,
    /// `title`, `text`, `meaning` or `text+meaning`.
    pub matched: String,
}

impl From<crate::journal::search::Found> for JournalSearchResult {
    fn from(f: crate::journal::search::Found) -> Self {
        Self {
            hits: f
                .hits
                .into_iter()
                .map(|h| JournalHit {
                    id: h.id,
                    title: h.title,
                    path: h.path,
                    created: h.created,
                    project: h.project,
                    tags: h.tags,
                    snippet: h.snippet,
                    score: h.score,
                    matched: h.matched,
                })
                .collect(),
            semantic: f.semantic,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SearchHit {
    pub session_id: String,
    pub session_title: String,
    pub message_id: String,
    pub part_id: String,
    /// `user`, `assistant` or `tool NAME`.
    pub source: String,
    pub snippet: String,
    /// Milliseconds since the Unix epoch.
    pub created_at: i64,
    /// File paths the matched text names.
    pub paths: Vec<String>,
}

/// A session as `agent/sessions` lists it.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionItem {
    pub session_id: String,
    pub title: String,
    pub status: crate::status::SessionStatus,
    /// Milliseconds since the Unix epoch.
    pub updated_at: i64,
    pub workspace: String,
}

/// A staged revert: the files put back before `messageId`, and the snapshot redo restores.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StagedRevert {
    pub message_id: String,
    pub snapshot: String,
    pub files: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HistoryPart {
    pub part_id: String,
    pub kind: crate::status::PartKind,
    /// The part's content; its fields depend on `kind` (`text`; a tool's `callId`, `name`,
    /// `input`, `output`, `title`, `metadata`; a patch's `files`; ...).
    #[schemars(with = "serde_json::Map<String, Value>")]
    pub data: Value,
    pub status: Option<crate::status::PartStatus>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct HistoryMessage {
    pub message_id: String,
    /// `user` or `assistant`.
    pub role: String,
    /// Milliseconds since the Unix epoch.
    pub created_at: i64,
    /// The step number and model of an assistant message (null for the user's).
    #[schemars(with = "Option<serde_json::Map<String, Value>>")]
    pub meta: Value,
    pub parts: Vec<HistoryPart>,
}

/// Input admitted but not run yet.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct InboxItem {
    pub input_id: String,
    pub text: String,
    /// What the editor showed with it (`note`), if anything.
    #[schemars(with = "Option<serde_json::Map<String, Value>>")]
    pub context: Value,
    /// Milliseconds since the Unix epoch.
    pub admitted_at: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct Todo {
    pub content: String,
    /// `pending`, `in_progress`, `completed` or `cancelled`.
    pub status: String,
    #[serde(default)]
    pub priority: String,
}

/// A permission ask that waits for an answer by code action.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct PendingPermission {
    pub id: u64,
    pub request: PermissionParams,
}

/// `agent/history`: everything known about one session.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct SessionHistory {
    pub session_id: String,
    pub workspace: String,
    pub title: String,
    pub status: crate::status::SessionStatus,
    pub mode: Option<String>,
    pub created_at: i64,
    pub updated_at: i64,
    pub message_count: i64,
    pub revert: Option<StagedRevert>,
    pub messages: Vec<HistoryMessage>,
    pub inbox: Vec<InboxItem>,
    pub todos: Vec<Todo>,
    pub pending_permissions: Vec<PendingPermission>,
    /// Whether a turn of the session runs in this server.
    pub running: bool,
    /// Oldest first, archived ones too.
    pub distillations: Vec<DistillationItem>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RevertResult {
    pub message_id: String,
    pub files: Vec<String>,
    /// The reverted change as a unified diff.
    pub diff: String,
    /// For `agent/undo`: the undone prompt's text.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Paths the revert left as they were, each with why (changed since the turn, not in
    /// the snapshots, a folder that is not empty).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub not_restored: Vec<NotRestored>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct NotRestored {
    pub path: String,
    pub reason: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct RedoResult {
    pub files: Vec<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct CompactResult {
    /// Messages turned into observations by this call.
    pub observed_messages: usize,
    /// Whether the observations were consolidated into a working context.
    pub reflected: bool,
    /// Messages the next request shows raw.
    pub kept_messages: usize,
    /// The session's distillations afterwards.
    pub distillations: Vec<DistillationItem>,
}

/// A distillation: an observation log (`generation` 0) or a working context (1) that
/// consolidated earlier ones, which are then `archived` (recall still finds them).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DistillationItem {
    pub id: String,
    pub generation: u32,
    pub archived: bool,
    pub text: String,
    pub from_message_id: String,
    pub to_message_id: String,
    pub created_at: i64,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FactParams {
    pub id: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemoryWhyParams {
    pub id: String,
    /// The prompt to judge it against.
    pub query: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemoryUpdateParams {
    pub id: String,
    pub content: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemoryListResult {
    pub facts: Vec<FactItem>,
}

/// A memory fact with its provenance and its record of use.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct FactItem {
    pub id: String,
    pub content: String,
    pub tier: crate::status::Tier,
    pub scope: crate::status::FactScope,
    pub sensitivity: crate::status::Sensitivity,
    pub source: crate::status::FactSource,
    pub session_id: Option<String>,
    pub message_id: Option<String>,
    pub confidence: f64,
    pub expires_at: Option<i64>,
    pub created_at: i64,
    pub updated_at: i64,
    /// Confirmation (a write of the same text, `useful`), apart from exposure below.
    pub confirmed_at: Option<i64>,
    pub useful: i64,
    pub irrelevant: i64,
    pub last_surfaced: Option<i64>,
    pub surfaced_count: i64,
    /// A dreamt fact's messages, and its dream.
    pub message_ids: Vec<String>,
    pub dream_id: Option<String>,
    /// In conflict with another fact until one of them is updated or forgotten;
    /// `conflictsWith` is the fact this one contradicts.
    pub conflicted: bool,
    pub conflicts_with: Option<String>,
}

impl From<crate::store::Fact> for FactItem {
    fn from(f: crate::store::Fact) -> Self {
        Self {
            id: f.id,
            content: f.content,
            tier: f.tier,
            scope: f.scope,
            sensitivity: f.sensitivity,
            source: f.source,
            session_id: f.session_id,
            message_id: f.message_id,
            confidence: f.confidence,
            expires_at: f.expires_at,
            created_at: f.created_at,
            updated_at: f.updated_at,
            confirmed_at: f.confirmed_at,
            useful: f.useful,
            irrelevant: f.irrelevant,
            last_surfaced: f.last_surfaced,
            surfaced_count: f.surfaced_count,
            message_ids: f.message_ids,
            dream_id: f.dream_id,
            conflicted: f.conflicted,
            conflicts_with: f.conflicts_with,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct MemoryWhyResult {
    pub id: String,
    pub tier: crate::status::Tier,
    /// `core: always shown`, `passed the gate`, `held back by the gate`, `held back: marked
    /// irrelevant ...`, `passed the gate, but the token budget was full`, or `local-only: ...`.
    pub verdict: String,
    /// Its place among what the prompt gets.
    pub rank: Option<usize>,
    /// The lexical score, before the marks below.
    pub score: Option<f64>,
    pub coverage: Option<f64>,
    pub matches: Vec<WhyMatch>,
    /// What irrelevant marks for similar prompts leave of the score (1: none).
    pub irrelevance: f64,
    /// What age since the last confirmation leaves of its rank (1: none).
    pub decay: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct WhyMatch {
    pub term: String,
    pub weight: f64,
    pub idf: f64,
}

impl From<crate::facts::Why> for MemoryWhyResult {
    fn from(w: crate::facts::Why) -> Self {
        Self {
            id: w.id,
            tier: w.tier,
            verdict: w.verdict,
            rank: w.rank,
            score: w.score,
            coverage: w.coverage,
            matches: w
                .matches
                .into_iter()
                .map(|m| WhyMatch {
                    term: m.term,
                    weight: m.weight,
                    idf: m.idf,
                })
                .collect(),
            irrelevance: w.irrelevance,
            decay: w.decay,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct StateResult {
    /// The file (it may not exist yet).
    pub path: PathBuf,
    pub exists: bool,
    pub focus: Option<String>,
    pub phase: Option<String>,
    pub task: Option<String>,
    pub blockers: Option<String>,
    pub next: Option<String>,
    pub handoff: Option<String>,
    /// When the last checkpoint was written.
    pub updated: Option<String>,
    /// How many decisions and Log entries it holds.
    pub decisions: usize,
    pub log: usize,
}

impl StateResult {
    pub fn new(path: PathBuf, state: crate::state::State) -> Self {
        let c = state.current;
        Self {
            exists: path.is_file(),
            path,
            focus: c.focus,
            phase: c.phase,
            task: c.task,
            blockers: c.blockers,
            next: c.next,
            handoff: c.handoff,
            updated: c.updated,
            decisions: state.decisions.len(),
            log: state.log.len(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ConfigResult {
    /// The configuration in force (the keys of the configuration file).
    #[schemars(with = "serde_json::Map<String, Value>")]
    pub effective: Value,
    /// Every layer, lowest first: `source`, `path`, `layer`, `error`.
    #[schemars(with = "Vec<serde_json::Map<String, Value>>")]
    pub layers: Value,
    pub root: Option<PathBuf>,
    /// `utf-8`, `utf-16` or `utf-32`.
    pub position_encoding: String,
    /// Each configured MCP server as the agent has it (asking starts none).
    pub mcp: Vec<McpServerState>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct McpServerState {
    pub name: String,
    /// `stdio` or `http`.
    pub transport: String,
    /// `running`, `starting`, `not_started`, `failed` or `disabled`.
    pub state: String,
    /// Why it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// How many tools it offers (when running).
    pub tools: usize,
}

impl From<crate::mcp::Report> for McpServerState {
    fn from(r: crate::mcp::Report) -> Self {
        Self {
            name: r.name,
            transport: r.transport.into(),
            state: r.state.into(),
            reason: r.reason,
            tools: r.tools,
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct DocumentTextParams {
    #[schemars(with = "String")]
    pub uri: Uri,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DocumentTextResult {
    #[schemars(with = "String")]
    pub uri: Uri,
    pub version: i32,
    pub language_id: String,
    pub text: String,
}

/// `agent/update`: `seq` counts per session without gaps; a client that sees a gap re-reads
/// `agent/history`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct UpdateParams {
    pub session_id: String,
    pub seq: u64,
    pub update: SessionUpdate,
}

/// What a tool does, for the editor's icon.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ToolKind {
    Read,
    Edit,
    Search,
    Execute,
    Fetch,
    Other,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ToolCallStatus {
    Pending,
    Running,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum ToolResultStatus {
    Completed,
    Failed,
}

/// A turn starts (`busy`) or ends (`idle`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum TurnStatus {
    Busy,
    Idle,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Location {
    #[schemars(with = "String")]
    pub uri: Uri,
}

/// An edit's file before and after, for the editor's diff view (files up to 256 KiB).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct EditDiff {
    #[schemars(with = "String")]
    pub uri: Uri,
    pub old_text: String,
    pub new_text: String,
}

/// One update, tagged by `kind`.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(
    tag = "kind",
    rename_all = "snake_case",
    rename_all_fields = "camelCase"
)]
pub enum SessionUpdate {
    UserMessage {
        message_id: String,
        text: String,
    },
    MessageChunk {
        message_id: String,
        text: String,
    },
    ReasoningChunk {
        message_id: String,
        text: String,
    },
    ToolCall {
        tool_call_id: String,
        name: String,
        title: String,
        /// (`kind` names the update.)
        tool_kind: ToolKind,
        status: ToolCallStatus,
        raw_input: Value,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        locations: Option<Vec<Location>>,
    },
    ToolCallUpdate {
        tool_call_id: String,
        name: String,
        status: ToolResultStatus,
        title: String,
        output: String,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        diff: Option<EditDiff>,
    },
    Status {
        status: TurnStatus,
        /// On `idle`: how the turn ended.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stop_reason: Option<StopReason>,
    },
    Usage {
        input_tokens: u64,
        output_tokens: u64,
        cache_read_tokens: u64,
    },
    Plan {
        todos: Vec<Todo>,
    },
    /// Files put back by a revert, or brought back by a redo (`messageId` null).
    Revert {
        message_id: Option<String>,
        files: Vec<String>,
    },
    /// The session state file changed: where it is, its focus and phase.
    State {
        path: PathBuf,
        focus: Option<String>,
        phase: Option<String>,
    },
    Retry {
        attempt: u32,
        wait_ms: u64,
        reason: String,
    },
    Error {
        message: String,
    },
}

/// One file an edit would change.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ProposedChange {
    pub path: PathBuf,
    pub old_text: String,
    pub new_text: String,
}

/// The answers an ask offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PermissionOption {
    Once,
    Always,
    Reject,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct PermissionParams {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call_id: Option<String>,
    /// The permission key (`edit`, `bash`, `external_directory`, `doom_loop`, ...).
    pub permission: String,
    pub tool: String,
    pub title: String,
    /// The patterns, for one line of text.
    pub description: String,
    /// What the rules were evaluated on (paths, command segments, the URL).
    pub patterns: Vec<String>,
    /// What "always" would save.
    pub always: Vec<String>,
    /// Unified diff, for edits.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub diff: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workdir: Option<PathBuf>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Paths outside the workspace that a command mentions.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub external_paths: Vec<String>,
    /// For edits: each file's text before and after.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub changes: Vec<ProposedChange>,
    pub options: Vec<PermissionOption>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum PermissionOutcome {
    Once,
    Always,
    Reject,
    /// The ask was dismissed: the same as a rejection without a message.
    Cancelled,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct PermissionResult {
    pub outcome: PermissionOutcome,
    /// With a rejection: what the model is told (the turn goes on); without one the turn
    /// stops.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct QuestionOption {
    pub label: String,
    #[serde(default)]
    pub description: String,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct Question {
    pub question: String,
    /// A very short label (a few words).
    #[serde(default)]
    pub header: String,
    #[serde(default)]
    pub options: Vec<QuestionOption>,
    /// Whether several options may be chosen.
    #[serde(default)]
    pub multiple: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct QuestionParams {
    pub questions: Vec<Question>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct QuestionResult {
    /// One list of chosen labels (or free text) per question.
    pub answers: Vec<Vec<String>>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct DiagnosticsParams {
    #[schemars(with = "Vec<String>")]
    pub uris: Vec<Uri>,
    /// How long to wait for the language servers to publish after the latest change.
    pub wait_ms: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct DiagnosticsResult {
    pub items: Vec<FileDiagnostics>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct FileDiagnostics {
    #[schemars(with = "String")]
    pub uri: Uri,
    /// LSP `Diagnostic` objects, as the language servers published them.
    pub diagnostics: Vec<Value>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
pub struct CodeRequestParams {
    /// `textDocument/definition`, `textDocument/references`, `textDocument/implementation`,
    /// `textDocument/hover`, `textDocument/documentSymbol` or `workspace/symbol`.
    pub method: String,
    pub params: Value,
}

/// The standard result of the request `agent/lsp` names: any JSON, `null` included.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema)]
#[serde(transparent)]
pub struct CodeRequestResult(pub Value);

/// Who sends a method.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Direction {
    ClientToServer,
    ServerToClient,
}

/// One method of the protocol as the schema lists it.
pub struct MethodSchema {
    pub method: &'static str,
    pub direction: Direction,
    pub params: schemars::Schema,
    /// `None` for notifications.
    pub result: Option<schemars::Schema>,
}

fn request_schema<R>(g: &mut SchemaGenerator, direction: Direction) -> MethodSchema
where
    R: Request,
    R::Params: JsonSchema,
    R::Result: JsonSchema,
{
    MethodSchema {
        method: R::METHOD,
        direction,
        params: g.subschema_for::<R::Params>(),
        result: Some(g.subschema_for::<R::Result>()),
    }
}

fn notification_schema<N>(g: &mut SchemaGenerator, direction: Direction) -> MethodSchema
where
    N: Notification,
    N::Params: JsonSchema,
{
    MethodSchema {
        method: N::METHOD,
        direction,
        params: g.subschema_for::<N::Params>(),
        result: None,
    }
}

/// Every method, in both directions, and the definitions their payloads refer to.
pub fn methods(g: &mut SchemaGenerator) -> Vec<MethodSchema> {
    use Direction::*;
    vec![
        request_schema::<Prompt>(g, ClientToServer),
        request_schema::<Cancel>(g, ClientToServer),
        request_schema::<Sessions>(g, ClientToServer),
        request_schema::<History>(g, ClientToServer),
        request_schema::<Revert>(g, ClientToServer),
        request_schema::<Unrevert>(g, ClientToServer),
        request_schema::<Redo>(g, ClientToServer),
        request_schema::<Undo>(g, ClientToServer),
        request_schema::<SetMode>(g, ClientToServer),
        request_schema::<Compact>(g, ClientToServer),
        request_schema::<Search>(g, ClientToServer),
        request_schema::<GetConfig>(g, ClientToServer),
        request_schema::<GetState>(g, ClientToServer),
        request_schema::<MemoryList>(g, ClientToServer),
        request_schema::<MemoryWhy>(g, ClientToServer),
        request_schema::<MemoryUpdate>(g, ClientToServer),
        request_schema::<MemoryForget>(g, ClientToServer),
        request_schema::<JournalSearch>(g, ClientToServer),
        request_schema::<KnowledgeExport>(g, ClientToServer),
        request_schema::<DocumentText>(g, ClientToServer),
        notification_schema::<AgentUpdate>(g, ServerToClient),
        request_schema::<RequestPermission>(g, ServerToClient),
        request_schema::<AskQuestion>(g, ServerToClient),
        request_schema::<Diagnostics>(g, ServerToClient),
        request_schema::<CodeRequest>(g, ServerToClient),
    ]
}

/// The protocol's JSON Schema: `{"methods": {METHOD: {direction, params, result?}}, "$defs"}`.
pub fn schema() -> Value {
    let mut g = SchemaSettings::draft2020_12().into_generator();
    let mut methods_map = serde_json::Map::new();
    for m in methods(&mut g) {
        let mut entry = serde_json::Map::new();
        entry.insert(
            "direction".into(),
            serde_json::to_value(m.direction).unwrap_or_default(),
        );
        entry.insert("params".into(), m.params.to_value());
        if let Some(result) = m.result {
            entry.insert("result".into(), result.to_value());
        }
        methods_map.insert(m.method.into(), Value::Object(entry));
    }
    let mut root = serde_json::Map::new();
    root.insert(
        "$schema".into(),
        "https://json-schema.org/draft/2020-12/schema".into(),
    );
    root.insert("title".into(), "agent-lsp editor protocol (agent/*)".into());
    root.insert("methods".into(), Value::Object(methods_map));
    root.insert("$defs".into(), Value::Object(g.take_definitions(true)));
    Value::Object(root)
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
    /// `agent/diagnostics`: `true` (files open in the editor) or `{"unopenedFiles": true}`
    /// (any file: the client loads it).
    pub diagnostics: bool,
    pub diagnostics_unopened: bool,
    /// `agent/lsp`.
    pub code_requests: bool,
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
        let diagnostics = agent.and_then(|a| a.get("diagnostics"));
        Self {
            diagnostics: diagnostics.is_some_and(|d| d.as_bool() == Some(true) || d.is_object()),
            diagnostics_unopened: diagnostics
                .and_then(|d| d.get("unopenedFiles"))
                .and_then(Value::as_bool)
                .unwrap_or(false),
            code_requests: flag("lsp"),
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

// The wire forms of the core's types.

impl From<&crate::editor::PermissionRequest> for PermissionParams {
    fn from(r: &crate::editor::PermissionRequest) -> Self {
        Self {
            session_id: r.session_id.clone(),
            tool_call_id: r.tool_call_id.clone(),
            permission: r.permission.clone(),
            tool: r.tool.clone(),
            title: r.title.clone(),
            description: r.patterns.join(", "),
            patterns: r.patterns.clone(),
            always: r.always.clone(),
            diff: r.diff.clone(),
            command: r.command.clone(),
            workdir: r.workdir.clone(),
            url: r.url.clone(),
            external_paths: r.external_paths.clone(),
            changes: r
                .changes
                .iter()
                .map(|c| ProposedChange {
                    path: c.path.clone(),
                    old_text: c.old_text.clone(),
                    new_text: c.new_text.clone(),
                })
                .collect(),
            options: vec![
                PermissionOption::Once,
                PermissionOption::Always,
                PermissionOption::Reject,
            ],
        }
    }
}

impl From<PermissionResult> for crate::editor::PermissionReply {
    fn from(r: PermissionResult) -> Self {
        match r.outcome {
            PermissionOutcome::Once => Self::Once,
            PermissionOutcome::Always => Self::Always,
            PermissionOutcome::Reject => Self::Reject { message: r.message },
            PermissionOutcome::Cancelled => Self::Reject { message: None },
        }
    }
}

impl From<&crate::editor::Question> for Question {
    fn from(q: &crate::editor::Question) -> Self {
        Self {
            question: q.question.clone(),
            header: q.header.clone(),
            options: q
                .options
                .iter()
                .map(|o| QuestionOption {
                    label: o.label.clone(),
                    description: o.description.clone(),
                })
                .collect(),
            multiple: q.multiple,
        }
    }
}

impl From<crate::store::Todo> for Todo {
    fn from(t: crate::store::Todo) -> Self {
        Self {
            content: t.content,
            status: t.status,
            priority: t.priority,
        }
    }
}

impl From<crate::store::Hit> for SearchHit {
    fn from(h: crate::store::Hit) -> Self {
        Self {
            session_id: h.session_id,
            session_title: h.session_title,
            message_id: h.message_id,
            part_id: h.part_id,
            source: h.source,
            snippet: h.snippet,
            created_at: h.created_at,
            paths: h.paths,
        }
    }
}

impl From<SearchScope> for crate::store::Scope {
    fn from(s: SearchScope) -> Self {
        match s {
            SearchScope::Session => Self::Session,
            SearchScope::Project => Self::Project,
            SearchScope::All => Self::All,
        }
    }
}

impl From<crate::agent::revert::RevertInfo> for RevertResult {
    fn from(r: crate::agent::revert::RevertInfo) -> Self {
        Self {
            message_id: r.message_id,
            files: r.files,
            diff: r.diff,
            text: r.text,
            not_restored: r
                .not_restored
                .into_iter()
                .map(|u| NotRestored {
                    path: u.path,
                    reason: u.reason,
                })
                .collect(),
        }
    }
}

impl From<crate::agent::distill::Report> for CompactResult {
    fn from(r: crate::agent::distill::Report) -> Self {
        Self {
            observed_messages: r.observed_messages,
            reflected: r.reflected,
            kept_messages: r.kept_messages,
            distillations: r.distillations.into_iter().map(Into::into).collect(),
        }
    }
}

impl From<crate::store::Distillation> for DistillationItem {
    fn from(d: crate::store::Distillation) -> Self {
        Self {
            id: d.id,
            generation: d.generation,
            archived: d.archived,
            text: d.text,
            from_message_id: d.from_message_id,
            to_message_id: d.to_message_id,
            created_at: d.created_at,
        }
    }
}

/// A stored status this version does not know reads as idle (a newer server wrote it).
fn session_status(stored: &str) -> crate::status::SessionStatus {
    crate::status::SessionStatus::parse(stored).unwrap_or(crate::status::SessionStatus::Idle)
}

impl SessionItem {
    /// `status`: what the server sees (a pending ask, a running turn), not the stored one.
    pub fn new(s: crate::store::SessionSummary, status: crate::status::SessionStatus) -> Self {
        Self {
            status,
            session_id: s.session_id,
            title: s.title,
            updated_at: s.updated_at,
            workspace: s.workspace,
        }
    }
}

impl From<crate::store::PartView> for HistoryPart {
    fn from(p: crate::store::PartView) -> Self {
        Self {
            part_id: p.part_id,
            kind: p.kind,
            data: p.data,
            status: p.status,
        }
    }
}

impl SessionHistory {
    pub fn new(
        view: crate::store::SessionView,
        pending_permissions: Vec<PendingPermission>,
        running: bool,
    ) -> Self {
        let summary = view.summary;
        Self {
            status: session_status(&summary.status),
            revert: summary.revert.and_then(|r| serde_json::from_value(r).ok()),
            session_id: summary.session_id,
            workspace: summary.workspace,
            title: summary.title,
            mode: summary.mode,
            created_at: summary.created_at,
            updated_at: summary.updated_at,
            message_count: summary.messages,
            messages: view
                .messages
                .into_iter()
                .map(|m| HistoryMessage {
                    message_id: m.message_id,
                    role: m.role,
                    created_at: m.created_at,
                    meta: m.meta,
                    parts: m.parts.into_iter().map(HistoryPart::from).collect(),
                })
                .collect(),
            inbox: view
                .inbox
                .into_iter()
                .map(|i| InboxItem {
                    input_id: i.input_id,
                    text: i.text,
                    context: i.context,
                    admitted_at: i.admitted_at,
                })
                .collect(),
            todos: view.todos.into_iter().map(Todo::from).collect(),
            pending_permissions,
            running,
            distillations: view.distillations.into_iter().map(Into::into).collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The checked-in schema is what the types generate. `UPDATE_SCHEMA=1 cargo test`
    /// rewrites it.
    #[test]
    fn the_checked_in_schema_is_current() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../editors/protocol/agent-protocol.schema.json");
        let generated = serde_json::to_string_pretty(&schema()).unwrap() + "\n";
        if std::env::var_os("UPDATE_SCHEMA").is_some() {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &generated).unwrap();
        }
        let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
        assert!(
            on_disk == generated,
            "{} is not what the protocol types generate; run `UPDATE_SCHEMA=1 cargo test -p \
             agent-lsp the_checked_in_schema_is_current` and commit it",
            path.display()
        );
    }

    #[test]
    fn no_params_accepts_anything() {
        for v in [
            serde_json::json!(null),
            serde_json::json!({}),
            serde_json::json!({"x": 1}),
        ] {
            serde_json::from_value::<NoParams>(v).unwrap();
        }
    }

    #[test]
    fn every_method_has_one_entry() {
        let s = schema();
        let methods = s["methods"].as_object().unwrap();
        assert_eq!(methods.len(), 25);
        assert!(methods.keys().all(|m| m.starts_with("agent/")));
        assert!(methods["agent/update"].get("result").is_none());
    }
}
