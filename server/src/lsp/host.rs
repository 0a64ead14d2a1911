//! Runs agent sessions for the LSP server: one agent per workspace (rebuilt when the
//! configuration changes), each session's turns on their own task, so every request answers
//! at once and the work reports later.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use tokio_util::sync::CancellationToken;

use super::bridge::LspEditor;
use super::protocol as wire;
use crate::agent::{Agent, AgentError, Result};
use crate::config::Config;
use crate::store::{Event, LazyStore, Store};

/// The runtime that turns run on, apart from the one that answers the editor: a turn's
/// persistence (SQLite writes, which can take a second under load) and tool work then never
/// hold up a code action or a didChange.
/// (Where it cannot be made, turns share the editor's runtime.)
fn agent_runtime() -> tokio::runtime::Handle {
    static RUNTIME: std::sync::OnceLock<Option<tokio::runtime::Runtime>> =
        std::sync::OnceLock::new();
    let runtime = RUNTIME.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("agent")
            // Below the editor's threads: on a busy machine the scheduler serves the code
            // action first (on Linux a thread's nice value is its own).
            .on_thread_start(|| {
                // SAFETY: nice(2) only changes the calling thread's scheduling priority.
                unsafe { nix::libc::nice(5) };
            })
            .enable_all()
            .build()
            .inspect_err(|e| tracing::warn!("no separate runtime for turns: {e}"))
            .ok()
    });
    match runtime {
        Some(rt) => rt.handle().clone(),
        None => tokio::runtime::Handle::current(),
    }
}

pub struct AgentHost {
    editor: Arc<LspEditor>,
    store: LazyStore,
    agent: Mutex<Option<(Config, PathBuf, Arc<Agent>)>>,
    running: Mutex<HashMap<String, CancellationToken>>,
    /// The session the user worked with last (for "undo", "cancel", "open transcript").
    last_session: Mutex<Option<String>>,
}

impl AgentHost {
    pub fn new(editor: Arc<LspEditor>) -> Arc<Self> {
        Arc::new(Self {
            editor,
            store: LazyStore::default(),
            agent: Mutex::new(None),
            running: Mutex::new(HashMap::new()),
            last_session: Mutex::new(None),
        })
    }

    /// The session the user worked with last.
    pub fn last_session(&self) -> Option<String> {
        self.last_session
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub fn editor(&self) -> &Arc<LspEditor> {
        &self.editor
    }

    fn store(&self) -> Result<Arc<Mutex<Store>>> {
        Ok(self.store.get()?)
    }

    /// The agent for `root` under `config` (a new one when either changed).
    pub fn agent(&self, config: &Config, root: &Path) -> Result<Arc<Agent>> {
        let mut slot = self.agent.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((c, r, a)) = slot.as_ref()
            && c == config
            && r == root
        {
            return Ok(a.clone());
        }
        let agent = Agent::start(self.store()?, config, root, self.editor.clone());
        *slot = Some((config.clone(), root.to_path_buf(), agent.clone()));
        Ok(agent)
    }

    /// The MCP servers of `config`, as the workspace's agent has them (none started here).
    pub fn mcp_states(&self, config: &Config) -> Vec<crate::mcp::Report> {
        let slot = self.agent.lock().unwrap_or_else(|p| p.into_inner());
        match slot.as_ref() {
            Some((c, _, agent)) if c == config => agent.mcp_states(),
            _ => crate::mcp::states(&config.mcp, None),
        }
    }

    fn current(&self) -> Result<Arc<Agent>> {
        self.agent
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(|(_, _, a)| a.clone())
            .ok_or_else(|| {
                AgentError::not_found("no session has been started in this workspace yet")
            })
    }

    /// Admits `text` (persisted) and starts the session's task if it is idle. Answers at once.
    pub async fn prompt(
        self: &Arc<Self>,
        config: &Config,
        root: &Path,
        session: Option<&str>,
        text: &str,
        context: Option<String>,
        mode: Option<&str>,
    ) -> Result<wire::PromptResult> {
        let agent = self.agent(config, root)?;
        if !agent.has_provider() {
            let why = crate::provider::from_config(config).err();
            return Err(AgentError::NoModel(
                why.unwrap_or_else(|| "no model provider".into()),
            ));
        }
        let (sid, input_id) = agent.prompt(session, text, context).await?;
        if let Some(mode) = mode {
            self.set_mode(&sid, mode)?;
        }
        *self.last_session.lock().unwrap_or_else(|p| p.into_inner()) = Some(sid.clone());
        self.start(agent, &sid);
        Ok(wire::PromptResult {
            session_id: sid,
            message_id: input_id,
        })
    }

    fn start(self: &Arc<Self>, agent: Arc<Agent>, sid: &str) {
        let cancel = {
            let mut running = self.running.lock().unwrap_or_else(|p| p.into_inner());
            if running.contains_key(sid) {
                return; // the running task picks the new input up from the inbox
            }
            let token = CancellationToken::new();
            running.insert(sid.to_string(), token.clone());
            token
        };
        let host = self.clone();
        let sid = sid.to_string();
        agent_runtime().spawn(async move {
            loop {
                let outcome = agent.drive(&sid, &cancel).await;
                tracing::info!(session = %sid, end = ?outcome.end, "turn ended");
                // Checked and left under the `running` lock: a prompt admitted meanwhile
                // either is seen here or finds the task gone and starts a new one.
                let mut running = host.running.lock().unwrap_or_else(|p| p.into_inner());
                let more = !cancel.is_cancelled() && agent.has_input(&sid);
                if !more {
                    running.remove(&sid);
                    break;
                }
            }
            // Idle now: distillation and upkeep in the background (the editor is never kept
            // waiting; a turn that needs the lock waits for this one).
            agent.after_turn(&sid).await;
            host.upkeep_when_due(&agent, &sid).await;
        });
    }

    /// After a turn's upkeep: once the session has stayed quiet for `dream_idle_seconds`,
    /// a dream and a curation of what is left.
    async fn upkeep_when_due(&self, agent: &Agent, sid: &str) {
        let config = agent.config();
        if !(config.dream || config.knowledge.enabled) || !agent.has_provider() {
            return;
        }
        let pause = std::time::Duration::from_secs(config.dream_idle_seconds);
        tokio::time::sleep(pause).await;
        // A turn that started meanwhile schedules its own upkeep when it ends.
        if self.is_running(sid) {
            return;
        }
        agent.upkeep(sid, true).await;
    }

    pub fn is_running(&self, sid: &str) -> bool {
        self.running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains_key(sid)
    }

    /// Cancels a session's turn (idempotent; a no-op when idle) and rejects its pending asks.
    pub fn cancel(&self, sid: &str) {
        if let Some(token) = self
            .running
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(sid)
        {
            token.cancel();
        }
        self.editor.reject_pending(sid);
    }

    /// A session's status as this server sees it: an ask waits, a turn runs, or idle.
    /// (A task that has recorded its turn's end but not wound down yet counts as idle: the
    /// editor has been told so.)
    fn live_status(&self, sid: &str, stored: &str) -> crate::status::SessionStatus {
        use crate::status::SessionStatus;
        let asks = self.editor.pending_asks();
        if asks
            .iter()
            .any(|(_, r)| r.session_id.as_deref() == Some(sid))
        {
            SessionStatus::Waiting
        } else if self.is_running(sid) && SessionStatus::parse(stored) == Some(SessionStatus::Busy)
        {
            SessionStatus::Busy
        } else {
            SessionStatus::Idle
        }
    }

    pub fn sessions(&self) -> Result<Vec<wire::SessionItem>> {
        let store = self.store()?;
        let sessions = store.lock().unwrap_or_else(|p| p.into_inner()).sessions()?;
        Ok(sessions
            .into_iter()
            .map(|s| {
                let live = self.live_status(&s.session_id, &s.status);
                wire::SessionItem::new(s, live)
            })
            .collect())
    }

    /// The whole session: messages with parts, pending input and permissions, revert state.
    pub fn history(&self, sid: &str) -> Result<wire::SessionHistory> {
        let store = self.store()?;
        let view = store
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .session(sid)?
            .ok_or_else(|| AgentError::not_found(format!("no session {sid}")))?;
        let pending = self
            .editor
            .pending_asks()
            .into_iter()
            .filter(|(_, r)| r.session_id.as_deref() == Some(sid))
            .map(|(id, r)| wire::PendingPermission {
                id,
                request: wire::PermissionParams::from(&r),
            })
            .collect();
        Ok(wire::SessionHistory::new(
            view,
            pending,
            self.is_running(sid),
        ))
    }

    /// Ranked matches from the recall index; `project` is the workspace's key.
    pub fn search(
        &self,
        params: &wire::SearchParams,
        project: &str,
    ) -> Result<Vec<wire::SearchHit>> {
        let store = self.store()?;
        let hits = store.lock().unwrap_or_else(|p| p.into_inner()).search(
            &params.query,
            params
                .scope
                .map_or(crate::store::Scope::Project, Into::into),
            params.session_id.as_deref(),
            Some(project),
            params.limit.unwrap_or(10).min(100),
        )?;
        Ok(hits.into_iter().map(wire::SearchHit::from).collect())
    }

    pub fn set_mode(&self, sid: &str, mode: &str) -> Result<()> {
        let store = self.store()?;
        store
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .append(Some(sid), &Event::SessionModeSet { mode: mode.into() })?;
        Ok(())
    }

    /// The agent, for revert and friends, once no turn of the session runs in this server.
    /// A task that just reported idle is given a moment to wind down; the agent itself also
    /// refuses while the stored status is busy, which covers other processes.
    async fn guard_idle(&self, sid: &str) -> Result<Arc<Agent>> {
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_millis(500);
        while self.is_running(sid) {
            if tokio::time::Instant::now() >= deadline {
                return Err(AgentError::Busy(
                    "the session is running; cancel it before reverting".into(),
                ));
            }
            tokio::time::sleep(std::time::Duration::from_millis(5)).await;
        }
        self.current()
    }

    pub async fn revert(&self, sid: &str, message_id: &str) -> Result<wire::RevertResult> {
        let info = self
            .guard_idle(sid)
            .await?
            .revert_to(sid, message_id)
            .await?;
        Ok(info.into())
    }

    pub async fn unrevert(&self, sid: &str) -> Result<wire::RedoResult> {
        let files = self.guard_idle(sid).await?.unrevert(sid).await?;
        Ok(wire::RedoResult { files })
    }

    /// `agent/compact`, "distil now": refused while the session runs (the loop distils by
    /// itself then).
    pub async fn compact(&self, sid: &str) -> Result<wire::CompactResult> {
        if self.is_running(sid) {
            return Err(AgentError::Busy(
                "the session is running; it distils by itself when it needs to".into(),
            ));
        }
        let agent = self.current()?;
        let done = agent.distill_now(sid).await?;
        Ok(done.into())
    }

    /// The memory facts of workspace `project` (local-only ones too: this is the user).
    pub fn memory_list(&self, project: &str) -> Result<wire::MemoryListResult> {
        let store = self.store()?;
        let facts = store
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .facts(project, crate::facts::now_ms())?;
        Ok(wire::MemoryListResult {
            facts: facts.into_iter().map(Into::into).collect(),
        })
    }

    pub fn memory_why(
        &self,
        project: &str,
        id: &str,
        query: &str,
    ) -> Result<wire::MemoryWhyResult> {
        let store = self.store()?;
        let store = store.lock().unwrap_or_else(|p| p.into_inner());
        let fact = crate::facts::find(&store, id, project, true)?;
        let now = crate::facts::now_ms();
        let facts = store.facts(project, now)?;
        Ok(crate::facts::why(&facts, &fact, query, now).into())
    }

    pub fn memory_update(&self, project: &str, id: &str, content: &str) -> Result<()> {
        let store = self.store()?;
        let mut store = store.lock().unwrap_or_else(|p| p.into_inner());
        crate::facts::find(&store, id, project, true)?;
        Ok(crate::facts::update(&mut store, id, content)?)
    }

    pub fn memory_forget(&self, project: &str, id: &str) -> Result<()> {
        let store = self.store()?;
        let mut store = store.lock().unwrap_or_else(|p| p.into_inner());
        crate::facts::find(&store, id, project, true)?;
        store.append(None, &Event::FactForgotten { fact_id: id.into() })?;
        Ok(())
    }

    pub async fn undo(&self, sid: &str) -> Result<wire::RevertResult> {
        let info = self.guard_idle(sid).await?.undo(sid).await?;
        Ok(info.into())
    }
}
