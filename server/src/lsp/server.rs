//! The tower-lsp-server backend: lifecycle, document sync, configuration.
//!
//! tower-lsp-server runs several incoming messages at once, so notifications could overtake
//! each other at an `.await`. Every handler that changes documents does all of its state
//! changes synchronously, under a plain mutex, before its first `.await`: messages are
//! started in arrival order, so their changes apply in arrival order.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::{Value, json};
use tower_lsp_server::jsonrpc::{Error, Result};
use tower_lsp_server::ls_types::*;
use tower_lsp_server::{Client, LanguageServer};

use super::bridge::{Buffers, LspEditor};
use super::documents::{Document, DocumentStore, PositionEncoding};
use super::host::AgentHost;
use super::protocol::{
    self as wire, ClientCaps, DocumentTextParams, DocumentTextResult, Empty, NoParams,
    PromptParams, RevertParams, SearchParams, SessionParams, SetModeParams,
};
use crate::config::{ConfigLayer, LayerSource, Layers};
use crate::editor::PermissionReply;

#[derive(Default)]
pub(super) struct State {
    encoding: PositionEncoding,
    documents: DocumentStore,
    root: Option<PathBuf>,
    config: Layers,
    caps: ClientCaps,
    /// The diagnostics the client last showed us per document (from code action requests).
    diagnostics: HashMap<Uri, Vec<Diagnostic>>,
    /// Problems found before the client could be told (during `initialize`).
    deferred_messages: Vec<String>,
}

/// The server state as the bridge sees it.
struct SharedState(Arc<Mutex<State>>);

impl Buffers for SharedState {
    fn open_document(&self, path: &Path) -> Option<(Uri, Document)> {
        let state = self.0.lock().unwrap_or_else(|p| p.into_inner());
        state
            .documents
            .iter()
            .find(|(uri, _)| uri_path(uri).as_deref() == Some(path))
            .map(|(uri, doc)| (uri.clone(), doc.clone()))
    }

    fn encoding(&self) -> PositionEncoding {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).encoding
    }

    fn caps(&self) -> ClientCaps {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).caps
    }

    fn all_open(&self) -> Vec<(PathBuf, Document)> {
        let state = self.0.lock().unwrap_or_else(|p| p.into_inner());
        state
            .documents
            .iter()
            .filter_map(|(uri, doc)| Some((uri_path(uri)?, doc.clone())))
            .collect()
    }
}

pub struct Backend {
    client: Client,
    state: Arc<Mutex<State>>,
    shutdown_requested: Arc<AtomicBool>,
    host: std::sync::OnceLock<Arc<AgentHost>>,
}

fn uri_path(uri: &Uri) -> Option<PathBuf> {
    (uri.scheme().as_str() == "file")
        .then(|| uri.to_file_path().map(|p| p.into_owned()))
        .flatten()
}

impl Backend {
    pub fn new(client: Client, shutdown_requested: Arc<AtomicBool>) -> Self {
        Self {
            client,
            state: Arc::new(Mutex::new(State::default())),
            shutdown_requested,
            host: std::sync::OnceLock::new(),
        }
    }

    fn state(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic elsewhere must not take every later request down with a poisoned lock.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    async fn warn_user(&self, messages: Vec<String>) {
        for m in messages {
            tracing::warn!("{m}");
            self.client.show_message(MessageType::WARNING, m).await;
        }
    }

    /// `agent/documentText`: the server's copy of an open buffer (for plugin authors to check
    /// that sync works, and for tests).
    pub async fn document_text(&self, params: DocumentTextParams) -> Result<DocumentTextResult> {
        let state = self.state();
        let doc = state
            .documents
            .get(&params.uri)
            .ok_or_else(|| Error::invalid_params(format!("{} is not open", params.uri.as_str())))?;
        Ok(DocumentTextResult {
            uri: params.uri.clone(),
            version: doc.version,
            language_id: doc.language_id.clone(),
            text: doc.text.to_string(),
        })
    }

    /// The agent host, created on first use.
    fn host(&self) -> &Arc<AgentHost> {
        self.host.get_or_init(|| {
            let buffers = Arc::new(SharedState(self.state.clone()));
            let transcripts = crate::paths::data_dir().join("transcripts");
            AgentHost::new(LspEditor::new(self.client.clone(), buffers, transcripts))
        })
    }

    /// The workspace root and effective configuration now.
    fn workspace(&self) -> Result<(PathBuf, crate::config::Config)> {
        let state = self.state();
        let root = state.root.clone().ok_or_else(|| {
            Error::invalid_params("no workspace yet: open a file or a folder first")
        })?;
        Ok((root, state.config.effective()))
    }

    /// What the editor shows with a prompt: the selection and its diagnostics, or the file.
    fn context_note(&self, uri: &Uri, range: Option<Range>) -> Option<String> {
        let state = self.state();
        let doc = state.documents.get(uri)?;
        let path = uri_path(uri).unwrap_or_default();
        let shown = match &state.root {
            Some(root) => path
                .strip_prefix(root)
                .unwrap_or(&path)
                .display()
                .to_string(),
            None => path.display().to_string(),
        };
        let mut out = String::new();
        if let Some(range) = range.filter(|r| r.start != r.end) {
            let selection = doc.slice(range, state.encoding);
            out.push_str(&format!(
                "<selection path=\"{shown}\" lines=\"{}-{}\">\n{}\n</selection>",
                range.start.line + 1,
                range.end.line + 1,
                selection.trim_end()
            ));
            let diags: Vec<String> = state
                .diagnostics
                .get(uri)
                .into_iter()
                .flatten()
                .filter(|d| {
                    d.range.start.line <= range.end.line && d.range.end.line >= range.start.line
                })
                .map(|d| format!("{shown}:{}: {}", d.range.start.line + 1, d.message))
                .collect();
            if !diags.is_empty() {
                out.push_str(&format!(
                    "\n<diagnostics>\n{}\n</diagnostics>",
                    diags.join("\n")
                ));
            }
        } else {
            out.push_str(&format!("(The user is looking at {shown}.)"));
        }
        Some(out)
    }

    /// `agent/prompt`: admits the input and answers at once with its ids.
    pub async fn prompt(&self, params: PromptParams) -> Result<wire::PromptResult> {
        let (root, config) = self.workspace()?;
        let note = params
            .context
            .as_ref()
            .and_then(|c| self.context_note(&c.uri, c.range));
        self.host()
            .prompt(
                &config,
                &root,
                params.session_id.as_deref(),
                &params.text,
                note,
                params.mode.as_deref(),
            )
            .await
            .map_err(super::error::to_rpc)
    }

    pub async fn cancel(&self, params: SessionParams) -> Result<Empty> {
        self.host().cancel(&params.session_id);
        Ok(Empty {})
    }

    pub async fn sessions(&self, _: NoParams) -> Result<Vec<wire::SessionItem>> {
        // The first look at the log after a start recovers what a crash left behind.
        let _ = self.ensure_agent();
        self.host().sessions().map_err(super::error::to_rpc)
    }

    pub async fn history(&self, params: SessionParams) -> Result<wire::SessionHistory> {
        let _ = self.ensure_agent();
        self.host()
            .history(&params.session_id)
            .map_err(super::error::to_rpc)
    }

    /// Makes sure an agent exists for this workspace (revert needs one without a prompt).
    fn ensure_agent(&self) -> Result<()> {
        let (root, config) = self.workspace()?;
        self.host()
            .agent(&config, &root)
            .map(|_| ())
            .map_err(super::error::to_rpc)
    }

    pub async fn revert(&self, params: RevertParams) -> Result<wire::RevertResult> {
        self.ensure_agent()?;
        self.host()
            .revert(&params.session_id, &params.message_id)
            .await
            .map_err(super::error::to_rpc)
    }

    pub async fn unrevert(&self, params: SessionParams) -> Result<wire::RedoResult> {
        self.ensure_agent()?;
        self.host()
            .unrevert(&params.session_id)
            .await
            .map_err(super::error::to_rpc)
    }

    pub async fn undo(&self, params: SessionParams) -> Result<wire::RevertResult> {
        self.ensure_agent()?;
        self.host()
            .undo(&params.session_id)
            .await
            .map_err(super::error::to_rpc)
    }

    /// `agent/compact`: folds the session's older messages into a checkpoint.
    pub async fn compact(&self, params: SessionParams) -> Result<wire::CompactResult> {
        self.ensure_agent()?;
        self.host()
            .compact(&params.session_id)
            .await
            .map_err(super::error::to_rpc)
    }

    /// `agent/search`: the recall index, for a search box in the editor.
    pub async fn search(&self, params: SearchParams) -> Result<Vec<wire::SearchHit>> {
        let (root, _) = self.workspace()?;
        self.host()
            .search(&params, &root.display().to_string())
            .map_err(super::error::to_rpc)
    }

    pub async fn set_mode(&self, params: SetModeParams) -> Result<Empty> {
        self.host()
            .set_mode(&params.session_id, &params.mode)
            .map_err(super::error::to_rpc)?;
        Ok(Empty {})
    }

    /// `agent/config`: the effective configuration and every layer it came from.
    pub async fn config(&self, _: NoParams) -> Result<wire::ConfigResult> {
        let state = self.state();
        let json = |v: serde_json::Result<Value>| {
            v.map_err(|e| Error {
                code: tower_lsp_server::jsonrpc::ErrorCode::InternalError,
                message: format!("the configuration cannot be shown: {e}").into(),
                data: None,
            })
        };
        Ok(wire::ConfigResult {
            effective: json(serde_json::to_value(state.config.effective()))?,
            layers: json(serde_json::to_value(state.config.states()))?,
            root: state.root.clone(),
            position_encoding: state.encoding.kind().as_str().to_string(),
        })
    }
}

/// The commands the server runs (`agent.ask` is the client's own).
const COMMANDS: &[&str] = &[
    "agent.run",
    "agent.cancel",
    "agent.undo",
    "agent.redo",
    "agent.answerPermission",
    "agent.openTranscript",
];

/// The instruction of an `AGENT:` comment on a line, in any comment syntax.
pub fn agent_comment(line: &str) -> Option<String> {
    let at = line.find("AGENT:")?;
    let before = line[..at].trim();
    // Only in a comment: something comment-like must come before it.
    let comment_like = ["//", "#", "--", "/*", "<!--", ";", "%", "\"", "'"]
        .iter()
        .any(|m| before.ends_with(m) || before.contains(m));
    if !comment_like {
        return None;
    }
    let text = line[at + "AGENT:".len()..]
        .trim()
        .trim_end_matches("*/")
        .trim_end_matches("-->")
        .trim();
    (!text.is_empty()).then(|| text.to_string())
}

fn workspace_root(params: &InitializeParams) -> Option<PathBuf> {
    if let Some(folder) = params.workspace_folders.as_ref().and_then(|f| f.first()) {
        return uri_path(&folder.uri);
    }
    #[allow(deprecated)]
    params.root_uri.as_ref().and_then(uri_path)
}

impl LanguageServer for Backend {
    async fn initialize(&self, params: InitializeParams) -> Result<InitializeResult> {
        tracing::debug!(client = ?params.client_info, "initialize");
        let offered = params
            .capabilities
            .general
            .as_ref()
            .and_then(|g| g.position_encodings.as_deref());
        let encoding = PositionEncoding::negotiate(offered);
        let root = workspace_root(&params);
        {
            let mut state = self.state();
            state.encoding = encoding;
            let mut problems = state.config.load_files(root.as_deref());
            if let Some(options) = &params.initialization_options
                && let Err(e) = state.config.set(
                    LayerSource::InitializationOptions,
                    None,
                    ConfigLayer::from_json(options),
                )
            {
                problems.push(e);
            }
            state.deferred_messages.extend(problems);
            state.root = root;
            state.caps = ClientCaps::from_initialize(&params.capabilities);
        }
        tracing::info!(?encoding, "initialized");

        Ok(InitializeResult {
            capabilities: ServerCapabilities {
                position_encoding: Some(encoding.kind()),
                text_document_sync: Some(TextDocumentSyncCapability::Options(
                    TextDocumentSyncOptions {
                        open_close: Some(true),
                        change: Some(TextDocumentSyncKind::INCREMENTAL),
                        save: Some(TextDocumentSyncSaveOptions::SaveOptions(SaveOptions {
                            include_text: Some(false),
                        })),
                        ..Default::default()
                    },
                )),
                code_action_provider: Some(CodeActionProviderCapability::Options(
                    CodeActionOptions {
                        code_action_kinds: Some(vec![
                            CodeActionKind::QUICKFIX,
                            CodeActionKind::REFACTOR,
                            CodeActionKind::SOURCE,
                        ]),
                        resolve_provider: Some(true),
                        work_done_progress_options: Default::default(),
                    },
                )),
                execute_command_provider: Some(ExecuteCommandOptions {
                    commands: COMMANDS.iter().map(|c| c.to_string()).collect(),
                    work_done_progress_options: Default::default(),
                }),
                workspace: Some(WorkspaceServerCapabilities {
                    workspace_folders: Some(WorkspaceFoldersServerCapabilities {
                        supported: Some(true),
                        change_notifications: Some(OneOf::Left(true)),
                    }),
                    file_operations: None,
                }),
                ..Default::default()
            },
            server_info: Some(ServerInfo {
                name: "agent-lsp".into(),
                version: Some(env!("CARGO_PKG_VERSION").into()),
            }),
            offset_encoding: None,
        })
    }

    async fn initialized(&self, _: InitializedParams) {
        let messages = std::mem::take(&mut self.state().deferred_messages);
        self.warn_user(messages).await;
    }

    async fn shutdown(&self) -> Result<()> {
        self.shutdown_requested.store(true, Ordering::SeqCst);
        Ok(())
    }

    async fn did_open(&self, params: DidOpenTextDocumentParams) {
        let doc = params.text_document;
        let problems = {
            let mut state = self.state();
            state.documents.open(
                doc.uri.clone(),
                Document::new(&doc.text, doc.version, doc.language_id),
            );
            // No workspace from the client: the first file decides it.
            match (&state.root, uri_path(&doc.uri)) {
                (None, Some(path)) => {
                    let root = crate::workspace::root_for_file(&path);
                    tracing::info!(root = %root.display(), "workspace root taken from the first document");
                    let problems = state.config.load_files(Some(&root));
                    state.root = Some(root);
                    problems
                }
                _ => Vec::new(),
            }
        };
        self.warn_user(problems).await;
    }

    async fn did_change(&self, params: DidChangeTextDocumentParams) {
        let mut state = self.state();
        let encoding = state.encoding;
        let doc = &params.text_document;
        if state
            .documents
            .change(&doc.uri, doc.version, &params.content_changes, encoding)
            .is_err()
        {
            tracing::warn!(
                uri = doc.uri.as_str(),
                "didChange for a document that is not open"
            );
        }
    }

    async fn did_save(&self, _: DidSaveTextDocumentParams) {}

    async fn did_close(&self, params: DidCloseTextDocumentParams) {
        self.state().documents.close(&params.text_document.uri);
    }

    async fn did_change_configuration(&self, params: DidChangeConfigurationParams) {
        let result = self.state().config.set(
            LayerSource::DidChangeConfiguration,
            None,
            ConfigLayer::from_json(&params.settings),
        );
        if let Err(e) = result {
            self.warn_user(vec![e]).await;
        }
    }

    async fn did_change_workspace_folders(&self, params: DidChangeWorkspaceFoldersParams) {
        let problems = {
            let mut state = self.state();
            let removed = params
                .event
                .removed
                .iter()
                .filter_map(|f| uri_path(&f.uri))
                .any(|p| Some(&p) == state.root.as_ref());
            let added = params.event.added.iter().find_map(|f| uri_path(&f.uri));
            if state.root.is_none() || removed {
                state.root = added;
                let root = state.root.clone();
                state.config.load_files(root.as_deref())
            } else {
                Vec::new()
            }
        };
        self.warn_user(problems).await;
    }

    async fn code_action(&self, params: CodeActionParams) -> Result<Option<CodeActionResponse>> {
        let uri = params.text_document.uri.clone();
        let range = params.range;
        let (caps, line_text) = {
            let mut state = self.state();
            if !params.context.diagnostics.is_empty() {
                state
                    .diagnostics
                    .insert(uri.clone(), params.context.diagnostics.clone());
            }
            let line = state.documents.get(&uri).map(|d| {
                let enc = state.encoding;
                let start = Position::new(range.start.line, 0);
                let end = Position::new(range.start.line, u32::MAX);
                d.slice(Range::new(start, end), enc)
            });
            (state.caps, line)
        };
        let mut actions: Vec<CodeActionOrCommand> = Vec::new();
        let action = |title: String, kind: CodeActionKind, command: &str, args: Value| {
            CodeActionOrCommand::CodeAction(CodeAction {
                title: title.clone(),
                kind: Some(kind),
                command: Some(Command {
                    title,
                    command: command.into(),
                    arguments: Some(vec![args]),
                }),
                ..Default::default()
            })
        };
        // Pending approvals first: for editors without any other way to answer.
        if let Some(host) = self.host.get() {
            for (id, request) in host.editor().pending_asks() {
                let what = request
                    .command
                    .clone()
                    .unwrap_or_else(|| request.title.clone());
                for (label, outcome) in [("once", "once"), ("always", "always"), ("deny", "reject")]
                {
                    let title = if outcome == "reject" {
                        format!("Agent: deny `{what}`")
                    } else {
                        format!("Agent: allow `{what}` {label}")
                    };
                    actions.push(action(
                        title,
                        CodeActionKind::QUICKFIX,
                        "agent.answerPermission",
                        json!({"id": id, "outcome": outcome}),
                    ));
                }
            }
        }
        let target = json!({"uri": uri, "range": range});
        if let Some(instruction) = line_text.as_deref().and_then(agent_comment) {
            let mut args = target.clone();
            args["instruction"] = json!(instruction);
            args["line"] = json!(range.start.line);
            actions.push(action(
                "Agent: do what the comment says".into(),
                CodeActionKind::REFACTOR,
                "agent.run",
                json!({"kind": "comment", "target": args}),
            ));
        }
        if range.start != range.end {
            if !params.context.diagnostics.is_empty() {
                actions.push(action(
                    "Agent: fix the problems here".into(),
                    CodeActionKind::QUICKFIX,
                    "agent.run",
                    json!({"kind": "fix", "target": target}),
                ));
            }
            for (title, kind) in [
                ("Agent: explain this", "explain"),
                ("Agent: refactor this", "refactor"),
                ("Agent: write tests for this", "tests"),
            ] {
                actions.push(action(
                    title.into(),
                    CodeActionKind::REFACTOR,
                    "agent.run",
                    json!({"kind": kind, "target": target}),
                ));
            }
        }
        if caps.updates {
            // Clients with their own input box run this command themselves.
            actions.push(action(
                "Agent: ask…".into(),
                CodeActionKind::EMPTY,
                "agent.ask",
                target.clone(),
            ));
        }
        if let Some(host) = self.host.get()
            && let Some(sid) = host
                .last_session
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone()
        {
            let args = json!({"sessionId": sid});
            if host.is_running(&sid) {
                actions.push(action(
                    "Agent: cancel".into(),
                    CodeActionKind::EMPTY,
                    "agent.cancel",
                    args.clone(),
                ));
            } else {
                actions.push(action(
                    "Agent: undo last change".into(),
                    CodeActionKind::EMPTY,
                    "agent.undo",
                    args.clone(),
                ));
                actions.push(action(
                    "Agent: redo".into(),
                    CodeActionKind::EMPTY,
                    "agent.redo",
                    args.clone(),
                ));
            }
            actions.push(action(
                "Agent: open transcript".into(),
                CodeActionKind::EMPTY,
                "agent.openTranscript",
                args,
            ));
        }
        Ok(Some(actions))
    }

    async fn code_action_resolve(&self, action: CodeAction) -> Result<CodeAction> {
        // Resolve must be instant: Helix blocks its UI while it waits.
        Ok(action)
    }

    async fn execute_command(&self, params: ExecuteCommandParams) -> Result<Option<LSPAny>> {
        let arg = params.arguments.first().cloned().unwrap_or(Value::Null);
        let sid = || {
            arg["sessionId"].as_str().map(String::from).or_else(|| {
                self.host()
                    .last_session
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .clone()
            })
        };
        let missing = || Error::invalid_params("no session to act on");
        match params.command.as_str() {
            "agent.run" => {
                let target = &arg["target"];
                let uri: Uri = serde_json::from_value(target["uri"].clone()).map_err(|e| {
                    Error::invalid_params(format!("agent.run needs a target uri: {e}"))
                })?;
                let range: Option<Range> = serde_json::from_value(target["range"].clone()).ok();
                let text = match arg["kind"].as_str().unwrap_or("") {
                    "explain" => "Explain what this code does, briefly and concretely. Do not change any file.".to_string(),
                    "fix" => "Fix the problems reported in this code (see the diagnostics). Keep the change minimal.".to_string(),
                    "refactor" => "Refactor this code to be clearer without changing what it does.".to_string(),
                    "tests" => "Write tests for this code, in the project's existing test style, and run them.".to_string(),
                    "comment" => format!(
                        "{}\n\n(This instruction comes from an `AGENT:` comment on line {} of this file. Do what it says, and remove that comment as part of your edit.)",
                        target["instruction"].as_str().unwrap_or(""),
                        target["line"].as_u64().unwrap_or(0) + 1
                    ),
                    other => return Err(Error::invalid_params(format!("unknown agent.run kind {other:?}"))),
                };
                let note = self.context_note(&uri, range);
                let (root, config) = self.workspace()?;
                let reply = self
                    .host()
                    .prompt(&config, &root, arg["sessionId"].as_str(), &text, note, None)
                    .await
                    .map_err(super::error::to_rpc)?;
                Ok(Some(json!(reply)))
            }
            "agent.cancel" => {
                self.host().cancel(&sid().ok_or_else(missing)?);
                Ok(Some(json!({})))
            }
            "agent.undo" => {
                self.ensure_agent()?;
                self.host()
                    .undo(&sid().ok_or_else(missing)?)
                    .await
                    .map(|r| Some(json!(r)))
                    .map_err(super::error::to_rpc)
            }
            "agent.redo" => {
                self.ensure_agent()?;
                self.host()
                    .unrevert(&sid().ok_or_else(missing)?)
                    .await
                    .map(|r| Some(json!(r)))
                    .map_err(super::error::to_rpc)
            }
            "agent.answerPermission" => {
                let id = arg["id"]
                    .as_u64()
                    .ok_or_else(|| Error::invalid_params("agent.answerPermission needs an id"))?;
                let reply = match arg["outcome"].as_str() {
                    Some("once") => PermissionReply::Once,
                    Some("always") => PermissionReply::Always,
                    _ => PermissionReply::Reject {
                        message: arg["message"].as_str().map(String::from),
                    },
                };
                let answered = self.host().editor().answer(id, reply);
                Ok(Some(json!({"answered": answered})))
            }
            "agent.openTranscript" => {
                let sid = sid().ok_or_else(missing)?;
                let path = crate::paths::data_dir()
                    .join("transcripts")
                    .join(format!("{sid}.md"));
                let caps = self.state().caps;
                if caps.show_document
                    && let Some(uri) = super::bridge::file_uri(&path)
                {
                    let _ = self
                        .client
                        .show_document(ShowDocumentParams {
                            uri,
                            external: Some(false),
                            take_focus: Some(true),
                            selection: None,
                        })
                        .await;
                } else {
                    self.client
                        .show_message(
                            MessageType::INFO,
                            format!("agent-lsp transcript: {}", path.display()),
                        )
                        .await;
                }
                Ok(Some(json!({"path": path})))
            }
            other => Err(Error::invalid_params(format!("unknown command {other:?}"))),
        }
    }
}
