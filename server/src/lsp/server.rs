//! The tower-lsp-server backend: lifecycle, document sync, configuration.
//!
//! tower-lsp-server runs several incoming messages at once, so notifications could overtake
//! each other at an `.await`. Every handler that changes documents does all of its state
//! changes synchronously, under a plain mutex, before its first `.await`: messages are
//! started in arrival order, so their changes apply in arrival order.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use tower_lsp_server::jsonrpc::{Error, Result};
use tower_lsp_server::ls_types::*;
use tower_lsp_server::{Client, LanguageServer};

use super::documents::{Document, DocumentStore, PositionEncoding};
use crate::config::{ConfigLayer, LayerSource, Layers};

#[derive(Default)]
struct State {
    encoding: PositionEncoding,
    documents: DocumentStore,
    root: Option<PathBuf>,
    config: Layers,
    /// Problems found before the client could be told (during `initialize`).
    deferred_messages: Vec<String>,
}

pub struct Backend {
    client: Client,
    state: Mutex<State>,
    shutdown_requested: Arc<AtomicBool>,
}

fn uri_path(uri: &Uri) -> Option<PathBuf> {
    (uri.scheme().as_str() == "file")
        .then(|| uri.to_file_path().map(|p| p.into_owned()))
        .flatten()
}

#[derive(Debug, Deserialize)]
pub struct DocumentTextParams {
    pub uri: Uri,
}

#[derive(Debug, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DocumentTextResult {
    pub uri: Uri,
    pub version: i32,
    pub language_id: String,
    pub text: String,
}

impl Backend {
    pub fn new(client: Client, shutdown_requested: Arc<AtomicBool>) -> Self {
        Self {
            client,
            state: Mutex::new(State::default()),
            shutdown_requested,
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

    /// `agent/config`: the effective configuration and every layer it came from.
    pub async fn config(&self, _params: Value) -> Result<Value> {
        let state = self.state();
        Ok(json!({
            "effective": state.config.effective(),
            "layers": state.config.states(),
            "root": state.root,
            "positionEncoding": state.encoding.kind(),
        }))
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
                    commands: Vec::new(),
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

    async fn code_action(&self, _: CodeActionParams) -> Result<Option<CodeActionResponse>> {
        Ok(Some(Vec::new()))
    }

    async fn code_action_resolve(&self, action: CodeAction) -> Result<CodeAction> {
        // Resolve must be instant: Helix blocks its UI while it waits.
        Ok(action)
    }

    async fn execute_command(&self, params: ExecuteCommandParams) -> Result<Option<LSPAny>> {
        Err(Error::invalid_params(format!(
            "unknown command {:?}",
            params.command
        )))
    }
}
