//! `agent-lsp acp`: the Agent Client Protocol (v1, newline-delimited JSON-RPC over stdio) for
//! Zed, JetBrains, Emacs and Neovim's ACP clients, from the same agent core as the LSP
//! server. The `agent-client-protocol` crate does the protocol; this module maps it onto
//! the agent: one `Agent` per workspace (`cwd`), one turn per `session/prompt`.

mod convert;
mod editor;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use agent_client_protocol::v1::ConnectionTo;
use agent_client_protocol::v1::schema as acp_schema;
use agent_client_protocol::v1::schema::{
    AgentCapabilities, AvailableCommand, AvailableCommandsUpdate, CancelNotification,
    Implementation, InitializeRequest, InitializeResponse, LoadSessionRequest, LoadSessionResponse,
    McpCapabilities, NewSessionRequest, NewSessionResponse, PromptCapabilities, PromptRequest,
    PromptResponse, SessionUpdate, SetSessionModeRequest, SetSessionModeResponse, StopReason,
};
use agent_client_protocol::{Agent as AcpRole, Client, Error, Stdio};
use tokio_util::sync::CancellationToken;

use crate::agent::error::ErrorClass;
use crate::agent::{Agent, AgentError};
use crate::config::Layers;
use crate::store::{Event, LazyStore, Store};
use editor::{AcpEditor, SESSION};

const MODES: &[&str] = &["build", "plan", "auto"];

/// Serves ACP on stdin/stdout until the client closes it.
pub async fn serve() -> i32 {
    let server = Arc::new(AcpServer::default());
    let (s1, s2, s3, s4, s5, s6) = (
        server.clone(),
        server.clone(),
        server.clone(),
        server.clone(),
        server.clone(),
        server.clone(),
    );
    let served = AcpRole
        .v1()
        .name("agent-lsp")
        .on_receive_request(
            async move |req: InitializeRequest, responder, cx| {
                responder.respond(s1.initialize(req, cx))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: NewSessionRequest, responder, _cx| {
                let answer = s2.new_session(&req);
                let sid = answer.as_ref().ok().map(|r| r.session_id.to_string());
                responder.respond_with_result(answer)?;
                if let Some(sid) = sid {
                    s2.announce_commands(&sid);
                }
                Ok(())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: LoadSessionRequest, responder, _cx| {
                responder.respond_with_result(s3.load_session(&req))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: PromptRequest, responder, _cx| {
                // The turn runs on its own task: the loop must go on to carry the client's
                // answers to permission asks and its cancel.
                let server = s4.clone();
                tokio::spawn(async move {
                    let answer = server.prompt(req).await;
                    if let Err(e) = responder.respond_with_result(answer) {
                        tracing::debug!("session/prompt answer not sent: {e:?}");
                    }
                });
                Ok(())
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_request(
            async move |req: SetSessionModeRequest, responder, _cx| {
                responder.respond_with_result(s5.set_mode(&req))
            },
            agent_client_protocol::on_receive_request!(),
        )
        .on_receive_notification(
            async move |n: CancelNotification, _cx| {
                s6.cancel(&n.session_id.to_string());
                Ok(())
            },
            agent_client_protocol::on_receive_notification!(),
        )
        .connect_to(Stdio::new())
        .await;
    match served {
        Ok(()) => 0,
        Err(e) => {
            tracing::error!("ACP connection ended: {e:?}");
            1
        }
    }
}

/// The agent's errors as JSON-RPC errors, with the codes the LSP surface uses.
fn to_rpc(e: AgentError) -> Error {
    let (class, reason) = e.class();
    let code = match class {
        ErrorClass::InvalidParams => Error::invalid_params().code,
        // ACP has no code of its own for this: LSP's RequestFailed, as the LSP surface says.
        ErrorClass::Failed => (-32803).into(),
        ErrorClass::Internal => Error::internal_error().code,
    };
    Error::new(code, e.to_string()).data(serde_json::json!({ "reason": reason }))
}

/// What an agent is made for: a workspace and the client's MCP servers (as JSON).
#[derive(Clone, PartialEq, Eq, Hash)]
struct AgentKey {
    cwd: PathBuf,
    servers: String,
}

#[derive(Default)]
struct AcpServer {
    editor: Arc<AcpEditor>,
    store: LazyStore,
    /// One agent per workspace and set of the client's MCP servers.
    agents: Mutex<HashMap<AgentKey, Arc<Agent>>>,
    /// Each session's agent (its key), once created or loaded on this connection.
    sessions: Mutex<HashMap<String, AgentKey>>,
    running: Mutex<HashMap<String, CancellationToken>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl AcpServer {
    fn initialize(&self, req: InitializeRequest, cx: ConnectionTo<Client>) -> InitializeResponse {
        self.editor.connect(cx);
        let fs = &req.client_capabilities.fs;
        self.editor
            .set_file_access(fs.read_text_file, fs.write_text_file);
        InitializeResponse::new(
            req.protocol_version
                .min(agent_client_protocol::schema::ProtocolVersion::V1),
        )
        .agent_capabilities(
            AgentCapabilities::new()
                .load_session(true)
                .mcp_capabilities(McpCapabilities::new().http(true).sse(true))
                .prompt_capabilities(PromptCapabilities::new().embedded_context(true)),
        )
        .agent_info(Implementation::new("agent-lsp", env!("CARGO_PKG_VERSION")))
    }

    fn store(&self) -> Result<Arc<Mutex<Store>>, AgentError> {
        Ok(self.store.get()?)
    }

    /// The agent for `cwd` and the MCP servers the client passed, configured from the same
    /// files as the LSP server (the client's servers added to theirs).
    fn agent(
        &self,
        cwd: &Path,
        servers: &[acp_schema::McpServer],
    ) -> Result<(AgentKey, Arc<Agent>), Error> {
        if !cwd.is_absolute() || !cwd.is_dir() {
            return Err(Error::new(
                Error::invalid_params().code,
                format!(
                    "cwd must be an absolute path to a folder, not {}",
                    cwd.display()
                ),
            ));
        }
        let cwd = std::fs::canonicalize(cwd).unwrap_or_else(|_| cwd.to_path_buf());
        let servers = convert::mcp_servers(servers);
        let key = AgentKey {
            cwd: cwd.clone(),
            servers: serde_json::to_string(&servers).unwrap_or_default(),
        };
        if let Some(a) = lock(&self.agents).get(&key) {
            return Ok((key, a.clone()));
        }
        let mut layers = Layers::default();
        for problem in layers.load_files(Some(&cwd)) {
            tracing::warn!("{problem}");
        }
        let mut config = layers.effective();
        config.mcp.extend(servers);
        let store = self.store().map_err(to_rpc)?;
        let agent = Agent::start(store, &config, &cwd, self.editor.clone());
        lock(&self.agents).insert(key.clone(), agent.clone());
        Ok((key, agent))
    }

    /// The session's agent and workspace, once it was created or loaded on this connection.
    fn remember(&self, sid: &str, key: AgentKey) {
        self.editor.set_workspace(sid, &key.cwd);
        lock(&self.sessions).insert(sid.to_string(), key);
    }

    fn session_agent(&self, sid: &str) -> Result<Arc<Agent>, Error> {
        let key = lock(&self.sessions).get(sid).cloned();
        match key.and_then(|k| lock(&self.agents).get(&k).cloned()) {
            Some(agent) => Ok(agent),
            None => Err(Error::new(
                Error::invalid_params().code,
                format!("no session {sid} on this connection (session/new or session/load first)"),
            )),
        }
    }

    fn mode_of(&self, sid: &str) -> String {
        let store = self.store().ok();
        let summary = store.and_then(|s| lock(&s).summary(sid).ok().flatten());
        summary
            .and_then(|s| s.mode)
            .unwrap_or_else(|| "build".into())
    }

    fn new_session(&self, req: &NewSessionRequest) -> Result<NewSessionResponse, Error> {
        let (key, agent) = self.agent(&req.cwd, &req.mcp_servers)?;
        let sid = agent.create_session("").map_err(to_rpc)?;
        self.remember(&sid, key);
        let mode = self.mode_of(&sid);
        Ok(NewSessionResponse::new(sid).modes(convert::modes(&mode)))
    }

    /// Replays the stored session as `session/update`s, then answers.
    fn load_session(&self, req: &LoadSessionRequest) -> Result<LoadSessionResponse, Error> {
        let sid = req.session_id.to_string();
        let (key, agent) = self.agent(&req.cwd, &req.mcp_servers)?;
        let store = self.store().map_err(to_rpc)?;
        let view = lock(&store)
            .session(&sid)
            .map_err(|e| to_rpc(e.into()))?
            .ok_or_else(|| to_rpc(AgentError::not_found(format!("no session {sid}"))))?;
        self.remember(&sid, key);
        for update in convert::replay(&view, agent.workspace()) {
            self.editor.send(&sid, update);
        }
        self.announce_commands(&sid);
        Ok(LoadSessionResponse::new().modes(convert::modes(&self.mode_of(&sid))))
    }

    /// `/undo` and `/redo`, offered as the session's commands.
    fn announce_commands(&self, sid: &str) {
        let commands = vec![
            AvailableCommand::new(
                "undo",
                "Revert the last turn's changes; its prompt is shown again",
            ),
            AvailableCommand::new("redo", "Bring back what /undo reverted"),
        ];
        self.editor.send(
            sid,
            SessionUpdate::AvailableCommandsUpdate(AvailableCommandsUpdate::new(commands)),
        );
    }

    fn set_mode(&self, req: &SetSessionModeRequest) -> Result<SetSessionModeResponse, Error> {
        let sid = req.session_id.to_string();
        let mode = req.mode_id.0.to_string();
        self.session_agent(&sid)?;
        if !MODES.contains(&mode.as_str()) {
            return Err(Error::new(
                Error::invalid_params().code,
                format!("unknown mode {mode:?}: build, plan or auto"),
            ));
        }
        let store = self.store().map_err(to_rpc)?;
        lock(&store)
            .append(Some(&sid), &Event::SessionModeSet { mode })
            .map_err(|e| to_rpc(e.into()))?;
        Ok(SetSessionModeResponse::new())
    }

    fn cancel(&self, sid: &str) {
        if let Some(token) = lock(&self.running).get(sid) {
            token.cancel();
        }
    }

    /// One turn: the prompt admitted, the loop driven to its end, the stop reason.
    async fn prompt(&self, req: PromptRequest) -> Result<PromptResponse, Error> {
        let sid = req.session_id.to_string();
        let agent = self.session_agent(&sid)?;
        let (text, context) = convert::prompt_text(&req.prompt);
        if let Some(reply) = self.command(&agent, &sid, text.trim()).await {
            self.editor.send(
                &sid,
                SessionUpdate::AgentMessageChunk(convert::chunk(&reply)),
            );
            return Ok(PromptResponse::new(StopReason::EndTurn));
        }
        if !agent.has_provider() {
            let why = crate::provider::from_config(agent.config()).err();
            return Err(to_rpc(AgentError::NoModel(
                why.unwrap_or_else(|| "no model provider".into()),
            )));
        }
        let cancel = CancellationToken::new();
        {
            let mut running = lock(&self.running);
            if running.contains_key(&sid) {
                return Err(to_rpc(AgentError::Busy(
                    "a turn of this session is running; cancel it first".into(),
                )));
            }
            running.insert(sid.clone(), cancel.clone());
        }
        let admitted = agent.prompt(Some(&sid), &text, context).await;
        let outcome = match admitted {
            Ok(_) => Ok(SESSION.scope(sid.clone(), agent.drive(&sid, &cancel)).await),
            Err(e) => Err(to_rpc(e)),
        };
        lock(&self.running).remove(&sid);
        let outcome = outcome?;
        let (upkeep, after) = (agent.clone(), sid.clone());
        tokio::spawn(async move { upkeep.after_turn(&after).await });
        let end = if cancel.is_cancelled() {
            crate::status::TurnEnd::Cancelled
        } else {
            outcome.end
        };
        match (end, outcome.error) {
            (crate::status::TurnEnd::Error, Some(e)) => {
                Err(Error::new(Error::internal_error().code, e))
            }
            (end, _) => Ok(PromptResponse::new(convert::stop_reason(end))),
        }
    }

    /// A slash command's answer, or `None` when the text is a prompt for the model.
    async fn command(&self, agent: &Agent, sid: &str, text: &str) -> Option<String> {
        let answer = match text {
            "/undo" => agent.undo(sid).await.map(|info| {
                let prompt = info.text.unwrap_or_default();
                format!(
                    "Undid the last turn ({} file(s)). Its prompt was:\n\n> {}\n",
                    info.files.len(),
                    prompt.replace('\n', "\n> ")
                )
            }),
            "/redo" => agent
                .unrevert(sid)
                .await
                .map(|files| format!("Brought back {} file(s).", files.len())),
            _ => return None,
        };
        Some(answer.unwrap_or_else(|e| format!("Cannot do that: {e}")))
    }
}
