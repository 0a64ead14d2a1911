//! The agent's tools and the one path every tool call takes:
//! parse arguments → prepare (check the boundary, compute what will happen) → permission →
//! execute → truncate. Every failure on that path is a result the model can read, never a
//! panic.

mod apply_patch;
mod bash;
mod context_state;
pub mod diagnostics;
mod edit;
mod facts;
pub mod files;
mod glob;
mod grep;
mod journal;
pub mod lsp;
mod memory;
mod question;
mod read;
mod recall;
mod skill;
mod todo;
pub mod truncate;
mod webfetch;
mod write;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use schemars::JsonSchema;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::config::Action;
use crate::editor::{EditorPort, PermissionReply, PermissionRequest};
use crate::permission::Policy;
use crate::permission::boundary::{Boundary, Resolved};
use crate::store::Todo;

/// A tool's own failure, shown to the model as the call's result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ToolError(pub String);

impl ToolError {
    pub fn new(msg: impl Into<String>) -> Self {
        Self(msg.into())
    }
}

impl From<std::io::Error> for ToolError {
    fn from(e: std::io::Error) -> Self {
        Self(e.to_string())
    }
}

/// What a successful execution returns before truncation.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ToolOutput {
    pub title: String,
    pub output: String,
    pub metadata: Value,
    /// Keep the end as well as the start when cutting (command output).
    pub keep_tail: bool,
    /// New todo list, for the loop to record.
    pub todos: Option<Vec<Todo>>,
    /// Files this call wrote (for snapshots and the editor).
    pub files_changed: Vec<PathBuf>,
    /// A memory block this call wrote: (scope, label, content), for the log.
    pub memory: Option<(String, String, String)>,
}

/// One permission a call needs before it may run.
#[derive(Debug, Clone, PartialEq)]
pub struct Need {
    pub request: PermissionRequest,
}

type Run =
    Box<dyn for<'a> FnOnce(&'a ToolContext) -> BoxFuture<'a, Result<ToolOutput, ToolError>> + Send>;

/// A call that passed its checks: the permissions it needs, and the work to do once granted.
pub struct Prepared {
    pub needs: Vec<Need>,
    pub run: Run,
}

impl Prepared {
    pub fn new<F>(needs: Vec<Need>, run: F) -> Self
    where
        F: for<'a> FnOnce(&'a ToolContext) -> BoxFuture<'a, Result<ToolOutput, ToolError>>
            + Send
            + 'static,
    {
        Self {
            needs,
            run: Box::new(run),
        }
    }
}

/// When the agent last read or wrote each file (modification time and length), to refuse
/// edits of files that changed behind its back; and one lock per file so that edits to the
/// same file run one after the other.
#[derive(Default)]
pub struct FileState {
    seen: Mutex<HashMap<PathBuf, (Option<std::time::SystemTime>, u64)>>,
    locks: Mutex<HashMap<PathBuf, Arc<tokio::sync::Mutex<()>>>>,
}

impl FileState {
    pub fn stamp(path: &Path) -> Option<(Option<std::time::SystemTime>, u64)> {
        std::fs::metadata(path)
            .ok()
            .map(|m| (m.modified().ok(), m.len()))
    }

    /// Records the file as the agent now knows it.
    pub fn remember(&self, path: &Path) {
        if let Some(stamp) = Self::stamp(path) {
            self.seen
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(path.to_path_buf(), stamp);
        }
    }

    /// An error when the file changed on disk since the agent last read or wrote it.
    pub fn check_fresh(&self, path: &Path) -> Result<(), ToolError> {
        let seen = self.seen.lock().unwrap_or_else(|p| p.into_inner());
        match (seen.get(path), Self::stamp(path)) {
            (Some(before), Some(now)) if *before != now => Err(ToolError::new(format!(
                "{} was modified since you last read it. Read it again before editing it.",
                path.display()
            ))),
            _ => Ok(()),
        }
    }

    pub fn lock(&self, path: &Path) -> Arc<tokio::sync::Mutex<()>> {
        self.locks
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(path.to_path_buf())
            .or_default()
            .clone()
    }
}

/// Everything a tool call may use. Calls run at once (see [`Registry::runs_concurrently`])
/// each get a clone: the shared parts are behind `Arc`s.
#[derive(Clone)]
pub struct ToolContext {
    pub boundary: Boundary,
    pub policy: Policy,
    pub editor: Arc<dyn EditorPort>,
    /// Where full outputs of cut results are kept (`$AGENT_LSP_DATA_DIR/tool-output`).
    pub output_dir: PathBuf,
    /// The most bytes one result may hand the model ([`truncate::MAX_BYTES`], less for a
    /// small context window: see [`truncate::limit_for`]).
    pub output_bytes: usize,
    pub cancel: CancellationToken,
    pub files: Arc<FileState>,
    pub todos: Arc<Mutex<Vec<Todo>>>,
    /// Skill folders, nearest first (workspace, then global).
    pub skill_dirs: Vec<PathBuf>,
    /// Hosts webfetch may reach although they resolve to private addresses.
    pub webfetch_allow_hosts: Vec<String>,
    /// The id of the call being run (names its saved output).
    pub call_id: String,
    /// The session the calls belong to, and the message of the call being run.
    pub session_id: String,
    pub message_id: String,
    /// The session store, for `recall` (absent in contexts without one).
    pub recall: Option<RecallSource>,
    /// The session state file, relative to the root (`state_file`).
    pub state_file: PathBuf,
    /// The journal, when it is on.
    pub journal: Option<JournalSource>,
    /// Held while a permission is asked: calls running at once ask one after the other.
    pub asking: Arc<tokio::sync::Mutex<()>>,
    /// What commands must not inherit and results must not show.
    pub secrets: Arc<crate::secrets::Secrets>,
}

/// Where the journal tools write and search, and what each entry says about where it came
/// from (the session and mode are the call's).
#[derive(Clone)]
pub struct JournalSource {
    pub dir: PathBuf,
    pub store: Arc<Mutex<crate::store::Store>>,
    pub embedder: Option<Arc<crate::provider::embeddings::Embedder>>,
    /// project, model and provider filled in.
    pub meta: crate::journal::Meta,
}

/// The session store and the workspace's key in it (for `recall` and the memory facts).
#[derive(Clone)]
pub struct RecallSource {
    pub store: Arc<Mutex<crate::store::Store>>,
    pub project: String,
}

impl ToolContext {
    /// A context for the workspace at `root` under `config`.
    pub fn new(root: &Path, config: &crate::config::Config, editor: Arc<dyn EditorPort>) -> Self {
        let output_dir = truncate::output_dir();
        Self {
            boundary: Boundary::new(root).with_readable(&output_dir),
            policy: Policy::new(config),
            editor,
            output_dir,
            output_bytes: truncate::MAX_BYTES,
            cancel: CancellationToken::new(),
            files: Arc::new(FileState::default()),
            todos: Arc::default(),
            skill_dirs: vec![
                root.join(".agent-lsp/skills"),
                crate::paths::config_dir().join("skills"),
            ],
            webfetch_allow_hosts: config.webfetch_allow_hosts.clone(),
            call_id: String::new(),
            session_id: String::new(),
            message_id: String::new(),
            recall: None,
            state_file: config.state_file.clone(),
            journal: None,
            asking: Arc::default(),
            secrets: Arc::new(crate::secrets::Secrets::from_config(config)),
        }
    }

    /// Resolves a path argument; outside the workspace (and not in a readable extra folder
    /// when `reading`), the call needs `external_directory` too.
    pub fn resolve(
        &self,
        input: &str,
        reading: bool,
        needs: &mut Vec<Need>,
        tool: &str,
    ) -> Result<Resolved, ToolError> {
        let r = self
            .boundary
            .resolve(input)
            .map_err(|e| ToolError::new(e.to_string()))?;
        if !(r.inside || reading && r.readable_extra) {
            let folder = r
                .path
                .parent()
                .unwrap_or(&r.path)
                .to_string_lossy()
                .into_owned();
            needs.push(Need {
                request: PermissionRequest {
                    permission: "external_directory".into(),
                    tool: tool.into(),
                    title: format!("{tool} outside the workspace: {}", r.path.display()),
                    patterns: vec![r.path.to_string_lossy().into_owned()],
                    always: vec![format!("{folder}/*")],
                    external_paths: vec![r.path.to_string_lossy().into_owned()],
                    ..Default::default()
                },
            });
        }
        Ok(r)
    }

    /// The display form of a path (workspace-relative when inside).
    pub fn display(&self, r: &Resolved) -> String {
        self.boundary.display(r)
    }
}

/// A tool with typed arguments; its JSON schema comes from the argument type.
pub trait TypedTool: Send + Sync + 'static {
    type Args: DeserializeOwned + JsonSchema;
    const NAME: &'static str;
    /// Whether a call may change files it does not report (a command): the snapshot after
    /// it scans the whole tree instead of the reported files.
    const CHANGES_UNREPORTED_FILES: bool = false;
    /// Whether a call only looks (changes no file, no state the model relies on, asks
    /// nothing but a permission): such calls of one answer run at once.
    const READ_ONLY: bool = false;
    /// Whether the model is offered the tool in this context (e.g. only with an editor
    /// that can answer it).
    fn offered(&self, _ctx: &ToolContext) -> bool {
        true
    }
    fn description(&self, ctx: &ToolContext) -> String;
    fn prepare(&self, args: Self::Args, ctx: &ToolContext) -> Result<Prepared, ToolError>;
}

/// The object-safe face of every tool.
pub trait Tool: Send + Sync {
    fn name(&self) -> &str;
    fn changes_unreported_files(&self) -> bool;
    fn read_only(&self) -> bool;
    fn offered(&self, ctx: &ToolContext) -> bool;
    fn description(&self, ctx: &ToolContext) -> String;
    fn parameters(&self) -> Value;
    fn prepare_value(&self, args: Value, ctx: &ToolContext) -> Result<Prepared, ToolError>;
}

impl<T: TypedTool> Tool for T {
    fn name(&self) -> &str {
        T::NAME
    }

    fn changes_unreported_files(&self) -> bool {
        T::CHANGES_UNREPORTED_FILES
    }

    fn read_only(&self) -> bool {
        T::READ_ONLY
    }

    fn offered(&self, ctx: &ToolContext) -> bool {
        TypedTool::offered(self, ctx)
    }

    fn description(&self, ctx: &ToolContext) -> String {
        TypedTool::description(self, ctx)
    }

    fn parameters(&self) -> Value {
        let schema = schemars::schema_for!(T::Args);
        let mut v = serde_json::to_value(schema).unwrap_or(Value::Null);
        if let Some(map) = v.as_object_mut() {
            map.remove("$schema");
            map.remove("title");
        }
        v
    }

    fn prepare_value(&self, args: Value, ctx: &ToolContext) -> Result<Prepared, ToolError> {
        let args: T::Args = serde_json::from_value(args).map_err(|e| {
            ToolError::new(format!(
                "invalid arguments for {}: {e}. Expected arguments matching this schema: {}",
                T::NAME,
                self.parameters()
            ))
        })?;
        self.prepare(args, ctx)
    }
}

/// What the model is told a tool is.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolDefinition {
    pub name: String,
    pub description: String,
    pub parameters: Value,
}

/// How a call ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum CallStatus {
    Completed,
    Error,
    /// The user refused without a message: the turn stops.
    Stopped,
}

/// The recorded result of one call.
#[derive(Debug, Clone, PartialEq)]
pub struct CallResult {
    pub status: CallStatus,
    pub title: String,
    /// What the model reads.
    pub output: String,
    pub metadata: Value,
    /// Grants answered "always", for the caller to persist: (permission, pattern).
    pub grants: Vec<(String, String)>,
    pub todos: Option<Vec<Todo>>,
    pub files_changed: Vec<PathBuf>,
    /// A memory block written: (scope, label, content).
    pub memory: Option<(String, String, String)>,
}

impl CallResult {
    fn error(msg: impl Into<String>) -> Self {
        Self {
            status: CallStatus::Error,
            title: String::new(),
            output: msg.into(),
            metadata: Value::Null,
            grants: Vec::new(),
            todos: None,
            files_changed: Vec::new(),
            memory: None,
        }
    }
}

/// The tools offered to the model, as a versioned list.
pub struct Registry {
    tools: Vec<Box<dyn Tool>>,
    version: u64,
}

impl Registry {
    /// Every built-in tool.
    pub fn standard() -> Self {
        Self::with(vec![
            Box::new(read::Read),
            Box::new(write::Write),
            Box::new(edit::Edit),
            Box::new(apply_patch::ApplyPatch),
            Box::new(glob::Glob),
            Box::new(grep::Grep),
            Box::new(bash::Bash),
            Box::new(webfetch::WebFetch),
            Box::new(todo::TodoWrite),
            Box::new(todo::TodoRead),
            Box::new(question::QuestionTool),
            Box::new(skill::Skill),
            Box::new(recall::Recall),
            Box::new(memory::MemoryList),
            Box::new(memory::MemorySet),
            Box::new(memory::MemoryReplace),
            Box::new(context_state::ContextCheckpoint),
            Box::new(context_state::ContextDiscover),
            Box::new(context_state::ContextLoad),
            Box::new(facts::MemoryWrite),
            Box::new(facts::MemoryUpdate),
            Box::new(facts::MemoryRead),
            Box::new(facts::MemoryForget),
            Box::new(facts::MemoryWhy),
            Box::new(facts::MemoryUseful),
            Box::new(facts::MemoryIrrelevant),
            Box::new(lsp::Lsp),
        ])
    }

    /// The tools `config` gives the model: every built-in one, and the journal's when it is
    /// on.
    pub fn for_config(config: &crate::config::Config) -> Self {
        Self::for_config_with(config, Vec::new())
    }

    /// [`for_config`](Self::for_config) and `extra` tools (the MCP servers'), under the same
    /// `[tools]` filter.
    pub fn for_config_with(config: &crate::config::Config, extra: Vec<Box<dyn Tool>>) -> Self {
        let mut reg = Self::standard();
        reg.tools.extend(extra);
        if config.journal {
            reg.tools.push(Box::new(journal::JournalWrite));
            reg.tools.push(Box::new(journal::JournalSearch));
            reg.tools.push(Box::new(journal::JournalRead));
        }
        // `[tools]`: a name's own entry, else `"*"`, else offered.
        let default = config.tools.get("*").copied().unwrap_or(true);
        reg.tools
            .retain(|t| config.tools.get(t.name()).copied().unwrap_or(default));
        Self::with(reg.tools)
    }

    pub fn with(tools: Vec<Box<dyn Tool>>) -> Self {
        // The version changes whenever the set of tools does.
        let version = crate::hash::stable(tools.iter().map(|t| t.name().as_bytes()));
        Self { tools, version }
    }

    pub fn version(&self) -> u64 {
        self.version
    }

    /// Whether a call of `name` may change files it does not report (see
    /// [`TypedTool::CHANGES_UNREPORTED_FILES`]); an unknown name may not (it does not run).
    pub fn changes_unreported_files(&self, name: &str) -> bool {
        self.tools
            .iter()
            .any(|t| t.name() == name && t.changes_unreported_files())
    }

    /// Whether calls of `name` may run at the same time as other such calls (read-only
    /// tools); an unknown name may (it only answers an error).
    pub fn runs_concurrently(&self, name: &str) -> bool {
        self.tools
            .iter()
            .find(|t| t.name() == name)
            .is_none_or(|t| t.read_only())
    }

    pub fn names(&self) -> Vec<&str> {
        self.tools.iter().map(|t| t.name()).collect()
    }

    pub fn definitions(&self, ctx: &ToolContext) -> Vec<ToolDefinition> {
        self.tools
            .iter()
            .filter(|t| t.offered(ctx))
            .map(|t| ToolDefinition {
                name: t.name().into(),
                description: t.description(ctx),
                parameters: t.parameters(),
            })
            .collect()
    }

    /// Runs one call made against tool list `list_version`. `arguments` is the raw JSON text
    /// the model produced.
    pub async fn call(
        &self,
        name: &str,
        arguments: &str,
        list_version: u64,
        ctx: &ToolContext,
    ) -> CallResult {
        if list_version != self.version {
            return CallResult::error(format!(
                "the tool list changed since this call was made; call again with one of: {}",
                self.names().join(", ")
            ));
        }
        let Some(tool) = self
            .tools
            .iter()
            .find(|t| t.name() == name && t.offered(ctx))
        else {
            let offered: Vec<&str> = (self.tools.iter())
                .filter(|t| t.offered(ctx))
                .map(|t| t.name())
                .collect();
            return CallResult::error(format!(
                "there is no tool named {name:?}; available tools: {}",
                offered.join(", ")
            ));
        };
        let args: Value = if arguments.trim().is_empty() {
            Value::Object(Default::default())
        } else {
            match serde_json::from_str(arguments) {
                Ok(v) => v,
                Err(e) => {
                    return CallResult::error(format!(
                        "the arguments for {name} are not valid JSON ({e}); send a JSON object"
                    ));
                }
            }
        };
        let prepared = match tool.prepare_value(args, ctx) {
            Ok(p) => p,
            Err(e) => return CallResult::error(e.0),
        };
        let mut grants = Vec::new();
        for need in &prepared.needs {
            let req = &need.request;
            let patterns = req.patterns.iter().map(String::as_str);
            let opaque = req
                .opaque
                .iter()
                .map(|o| ctx.policy.decide_opaque(&req.permission, o));
            let all = ctx.policy.decide_all(&req.permission, patterns);
            match opaque.fold(all, Action::max) {
                Action::Allow => {}
                Action::Deny => {
                    return CallResult::error(format!(
                        "permission denied by configuration: {} {}",
                        req.permission,
                        req.patterns.join(", ")
                    ));
                }
                Action::Ask => {
                    let req = &PermissionRequest {
                        session_id: Some(ctx.session_id.clone()).filter(|s| !s.is_empty()),
                        tool_call_id: Some(ctx.call_id.clone()).filter(|s| !s.is_empty()),
                        ..req.clone()
                    };
                    let _one_ask_at_a_time = ctx.asking.lock().await;
                    let reply = tokio::select! {
                        reply = ctx.editor.ask_permission(req) => reply,
                        _ = ctx.cancel.cancelled() => PermissionReply::Reject { message: None },
                    };
                    match reply {
                        PermissionReply::Once => {}
                        PermissionReply::Always => grants.extend(
                            req.always
                                .iter()
                                .map(|p| (req.permission.clone(), p.clone())),
                        ),
                        PermissionReply::Reject { message: Some(m) } if !m.trim().is_empty() => {
                            return CallResult::error(format!(
                                "the user rejected this call ({}): {m}",
                                req.title
                            ));
                        }
                        PermissionReply::Reject { .. } => {
                            let mut r = CallResult::error(format!(
                                "the user rejected this call ({}) and stopped the turn",
                                req.title
                            ));
                            r.status = CallStatus::Stopped;
                            return r;
                        }
                    }
                }
            }
        }
        let problems_before = diagnostics::before(ctx, &prepared.needs).await;
        match (prepared.run)(ctx).await {
            Ok(out) => {
                let mut cut = truncate::truncate(
                    &out.output,
                    out.keep_tail,
                    ctx.output_bytes,
                    &ctx.output_dir,
                    &ctx.call_id,
                );
                if let Some(before) = &problems_before
                    && let Some(note) = diagnostics::after(ctx, before, &out.files_changed).await
                {
                    cut = format!("{cut}\n\n{note}");
                }
                let cut = ctx.secrets.redact(&cut).into_owned();
                CallResult {
                    status: CallStatus::Completed,
                    title: out.title,
                    output: cut,
                    metadata: out.metadata,
                    grants,
                    todos: out.todos,
                    files_changed: out.files_changed,
                    memory: out.memory,
                }
            }
            Err(e) => {
                let mut r = CallResult::error(truncate::truncate(
                    &ctx.secrets.redact(&e.0),
                    true,
                    ctx.output_bytes,
                    &ctx.output_dir,
                    &ctx.call_id,
                ));
                r.grants = grants;
                r
            }
        }
    }
}

/// The skills installed for a workspace: (name, one-line description).
pub fn skill_list(workspace: &Path) -> Vec<(String, String)> {
    let dirs = [
        workspace.join(".agent-lsp/skills"),
        crate::paths::config_dir().join("skills"),
    ];
    skill::discover(&dirs)
        .into_iter()
        .map(|s| (s.name, s.description))
        .collect()
}

/// A change for the editor to show as a diff: the file and its text before and after
/// (left out for big files).
pub fn edit_metadata(path: &Path, old: &str, new: &str) -> Value {
    const MAX: usize = 256 * 1024;
    if old.len() + new.len() > MAX {
        return Value::Null;
    }
    serde_json::json!({"path": path, "oldText": old, "newText": new})
}

/// The unified diff of a change, for permission requests and the editor.
pub fn unified_diff(display_path: &str, old: &str, new: &str) -> String {
    similar::TextDiff::from_lines(old, new)
        .unified_diff()
        .context_radius(3)
        .header(&format!("a/{display_path}"), &format!("b/{display_path}"))
        .to_string()
}

/// The permission request for an edit-like tool on one file (`path`, shown as `display`)
/// that would turn `old` into `new`.
pub fn edit_need(tool: &str, display: &str, path: &Path, old: &str, new: &str) -> Need {
    Need {
        request: PermissionRequest {
            permission: "edit".into(),
            tool: tool.into(),
            title: format!("{tool} {display}"),
            patterns: vec![display.to_string()],
            always: vec!["*".into()],
            diff: Some(unified_diff(display, old, new)),
            changes: vec![crate::editor::ProposedChange {
                path: path.to_path_buf(),
                old_text: old.into(),
                new_text: new.into(),
            }],
            ..Default::default()
        },
    }
}

#[cfg(test)]
pub mod testing;

#[cfg(test)]
mod tests;
