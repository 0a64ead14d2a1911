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

use serde_json::Value;
use tower_lsp_server::jsonrpc::{Error, Result};
use tower_lsp_server::ls_types::*;
use tower_lsp_server::{Client, LanguageServer};

use super::bridge::{Buffers, LspEditor, uri_path};
use super::documents::{Document, DocumentStore, PositionEncoding};
use super::host::AgentHost;
use super::protocol::{
    self as wire, ClientCaps, DocumentTextParams, DocumentTextResult, Empty, NoParams,
    PromptParams, RevertParams, SearchParams, SessionParams, SetModeParams,
};
use crate::config::{ConfigLayer, LayerSource, Layers};

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

    /// Remembers what a code action request shows (its diagnostics, for prompts on that
    /// range) and returns the client's flags and the text of the range's first line.
    pub(super) fn note_code_action(
        &self,
        params: &CodeActionParams,
    ) -> (ClientCaps, Option<String>) {
        let uri = &params.text_document.uri;
        let line = params.range.start.line;
        let mut state = self.state();
        if !params.context.diagnostics.is_empty() {
            let diagnostics = params.context.diagnostics.clone();
            state.diagnostics.insert(uri.clone(), diagnostics);
        }
        let encoding = state.encoding;
        let text = state.documents.get(uri).map(|d| {
            let whole_line = Range::new(Position::new(line, 0), Position::new(line, u32::MAX));
            d.slice(whole_line, encoding)
        });
        (state.caps, text)
    }

    pub(super) fn client(&self) -> &Client {
        &self.client
    }

    pub(super) fn client_caps(&self) -> ClientCaps {
        self.state().caps
    }

    /// The agent host if one was made (code actions must not create it).
    pub(super) fn agent_host(&self) -> Option<&Arc<AgentHost>> {
        self.host.get()
    }

    /// The agent host, created on first use.
    pub(super) fn host(&self) -> &Arc<AgentHost> {
        self.host.get_or_init(|| {
            let buffers = Arc::new(SharedState(self.state.clone()));
            let transcripts = crate::paths::data_dir().join("transcripts");
            AgentHost::new(LspEditor::new(self.client.clone(), buffers, transcripts))
        })
    }

    /// The workspace root and effective configuration now.
    pub(super) fn workspace(&self) -> Result<(PathBuf, crate::config::Config)> {
        let state = self.state();
        let root = state.root.clone().ok_or_else(|| {
            Error::invalid_params("no workspace yet: open a file or a folder first")
        })?;
        Ok((root, state.config.effective()))
    }

    /// What the editor shows with a prompt: the selection and its diagnostics, or the file.
    pub(super) fn context_note(&self, uri: &Uri, range: Option<Range>) -> Option<String> {
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
    pub(super) fn ensure_agent(&self) -> Result<()> {
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

    /// The workspace's key for its memory facts.
    fn project(&self) -> Result<String> {
        Ok(self.workspace()?.0.display().to_string())
    }

    pub async fn memory_list(&self, _: NoParams) -> Result<wire::MemoryListResult> {
        self.host()
            .memory_list(&self.project()?)
            .map_err(super::error::to_rpc)
    }

    pub async fn memory_why(&self, p: wire::MemoryWhyParams) -> Result<wire::MemoryWhyResult> {
        self.host()
            .memory_why(&self.project()?, &p.id, &p.query)
            .map_err(super::error::to_rpc)
    }

    pub async fn memory_update(&self, p: wire::MemoryUpdateParams) -> Result<Empty> {
        self.host()
            .memory_update(&self.project()?, &p.id, &p.content)
            .map_err(super::error::to_rpc)?;
        Ok(Empty {})
    }

    pub async fn memory_forget(&self, p: wire::FactParams) -> Result<Empty> {
        self.host()
            .memory_forget(&self.project()?, &p.id)
            .map_err(super::error::to_rpc)?;
        Ok(Empty {})
    }

    /// `agent/journal/search`: the user's journal, through the workspace's agent (its
    /// embeddings model, if any).
    pub async fn journal_search(
        &self,
        p: wire::JournalSearchParams,
    ) -> Result<wire::JournalSearchResult> {
        let (root, config) = self.workspace()?;
        let agent = self
            .host()
            .agent(&config, &root)
            .map_err(super::error::to_rpc)?;
        let limit = p.limit.unwrap_or(10).clamp(1, 50);
        let found = agent
            .journal_search(&p.query, limit)
            .await
            .map_err(super::error::to_rpc)?;
        Ok(found.into())
    }

    /// `agent/knowledge/export`: the project's knowledge into its agents file.
    pub async fn knowledge_export(&self, _: NoParams) -> Result<wire::KnowledgeExportResult> {
        let (root, config) = self.workspace()?;
        let agent = self
            .host()
            .agent(&config, &root)
            .map_err(super::error::to_rpc)?;
        let report = agent.knowledge_export().map_err(super::error::to_rpc)?;
        Ok(report.into())
    }

    /// `agent/state`: the workspace's session state file.
    pub async fn session_state(&self, _: NoParams) -> Result<wire::StateResult> {
        let (root, config) = self.workspace()?;
        let path = crate::state::path(&root, &config.state_file);
        let state = crate::state::load(&path).map_err(|e| Error {
            code: tower_lsp_server::jsonrpc::ErrorCode::InternalError,
            message: e.to_string().into(),
            data: None,
        })?;
        Ok(wire::StateResult::new(path, state))
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
        let effective = state.config.effective();
        let mcp = match self.agent_host() {
            Some(host) => host.mcp_states(&effective),
            None => crate::mcp::states(&effective.mcp, None),
        };
        Ok(wire::ConfigResult {
            mcp: mcp.into_iter().map(wire::McpServerState::from).collect(),
            effective: json(serde_json::to_value(&effective))?,
            layers: json(serde_json::to_value(state.config.states()))?,
            root: state.root.clone(),
            position_encoding: state.encoding.kind().as_str().to_string(),
        })
    }
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
                    commands: super::actions::COMMANDS
                        .iter()
                        .map(|c| c.to_string())
                        .collect(),
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
        Ok(Some(self.code_actions(&params)))
    }

    async fn code_action_resolve(&self, action: CodeAction) -> Result<CodeAction> {
        // Resolve must be instant: Helix blocks its UI while it waits.
        Ok(action)
    }

    async fn execute_command(&self, params: ExecuteCommandParams) -> Result<Option<LSPAny>> {
        self.run_command(params).await
    }
}
