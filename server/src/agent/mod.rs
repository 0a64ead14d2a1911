//! The agent loop (DESIGN §3): admit input, promote it when the session is idle and the
//! baseline is ready, then step — stream the model's answer, run the tools it asks for,
//! record everything — until the model stops calling tools or the step limit is reached.
//!
//! Everything is written to the event store as it happens, so a crash loses nothing:
//! admitted input survives and runs after a restart, and tool calls left unfinished are
//! marked failed, never re-run. A record that cannot be written ends the turn: nothing runs
//! that the log does not know of.
//!
//! The parts: `admit.rs` (inbox, baseline, promotion), `turn.rs` (the steps of a turn),
//! `answer.rs` (one streamed answer), `tool_call.rs` (one tool call), `revert.rs`,
//! `distill.rs` (observations and working contexts), `context.rs` (each step's request).

mod admit;
mod answer;
pub mod baseline;
mod context;
pub mod curate;
pub mod distill;
pub mod dream;
pub mod error;
mod journal;
pub mod knowledge;
pub mod prompts;
pub mod revert;
mod session_state;
#[cfg(test)]
mod tests;
mod tool_call;
mod turn;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::editor::{EditorPort, Update};
use crate::provider::Provider;
use crate::status::{PartStatus, SessionStatus};
use crate::store::{Event, Store};
use crate::tools::Registry;

pub use crate::status::TurnEnd;
pub use error::{AgentError, Result};

#[derive(Debug, Clone, PartialEq)]
pub struct TurnOutcome {
    pub end: TurnEnd,
    pub error: Option<String>,
}

impl TurnOutcome {
    fn ended(end: TurnEnd) -> Self {
        Self { end, error: None }
    }

    fn cancelled() -> Self {
        Self::ended(TurnEnd::Cancelled)
    }
}

/// The most an answer may hold (text, reasoning and tool arguments together).
const MAX_ANSWER_BYTES: usize = 4 * 1024 * 1024;

/// The agent of one workspace.
pub struct Agent {
    store: Arc<Mutex<Store>>,
    config: Config,
    workspace: PathBuf,
    /// `None` for commands that never call a model (revert, undo).
    provider: Option<Arc<dyn Provider>>,
    /// The tools: the built-in ones and the MCP servers' (replaced when those change).
    registry: std::sync::RwLock<Arc<Registry>>,
    /// The workspace's MCP servers, when any is configured.
    mcp: Option<Arc<crate::mcp::Hub>>,
    editor: Arc<dyn EditorPort>,
    /// The hidden snapshot repository, opened on first use (`None` when snapshots are off or
    /// it cannot be opened).
    snapshots: std::sync::OnceLock<Option<revert::SharedSnapshots>>,
    /// Held by a revert, redo or undo from start to end, and by a prompt while it is
    /// admitted: a prompt sent while a redo is still restoring files would otherwise commit
    /// the revert the redo is about to clear (and delete the messages it brings back).
    revert_guard: tokio::sync::Mutex<()>,
    /// The user's repository status as last read (see `session_state.rs`).
    repo: Arc<session_state::RepoCache>,
    /// One distillation at a time per session (see `distill.rs`).
    distilling: SessionLocks,
    /// One dream at a time per session (see `dream.rs`).
    dreaming: SessionLocks,
    /// One curation at a time per session, one consolidation per project (see `curate.rs`).
    curating: SessionLocks,
    /// The memory facts' rerank, when an embeddings model is configured (its cache lives as
    /// long as the agent).
    embedder: Option<Arc<crate::provider::embeddings::Embedder>>,
    /// The model's window as its server reported it, asked once (see `provider::window`).
    window_probe: tokio::sync::OnceCell<Option<crate::provider::window::Probe>>,
    /// A window an overflow error named, smaller than the one assumed.
    learned_window: Mutex<Option<u32>>,
    /// The warnings already given (each once per agent).
    warned: Mutex<std::collections::HashSet<&'static str>>,
}

/// A lock per session, made on first use.
type SessionLocks = Mutex<std::collections::HashMap<String, Arc<tokio::sync::Mutex<()>>>>;

fn session_lock(locks: &SessionLocks, sid: &str) -> Arc<tokio::sync::Mutex<()>> {
    let mut locks = locks.lock().unwrap_or_else(|p| p.into_inner());
    locks.entry(sid.to_string()).or_default().clone()
}

impl Agent {
    pub fn new(
        store: Arc<Mutex<Store>>,
        config: Config,
        workspace: &Path,
        provider: Option<Arc<dyn Provider>>,
        editor: Arc<dyn EditorPort>,
    ) -> Self {
        Self {
            store,
            workspace: workspace.to_path_buf(),
            provider,
            registry: std::sync::RwLock::new(Arc::new(Registry::for_config(&config))),
            mcp: crate::mcp::Hub::new(&config.mcp),
            editor,
            snapshots: std::sync::OnceLock::new(),
            revert_guard: tokio::sync::Mutex::new(()),
            repo: Arc::default(),
            distilling: Mutex::default(),
            dreaming: Mutex::default(),
            curating: Mutex::default(),
            embedder: crate::provider::embeddings::Embedder::from_config(&config).map(Arc::new),
            window_probe: tokio::sync::OnceCell::new(),
            learned_window: Mutex::new(None),
            warned: Mutex::default(),
            config,
        }
    }

    /// The tools in force (one list for a whole step: its definitions and its calls).
    pub fn registry(&self) -> Arc<Registry> {
        self.registry
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Brings the MCP servers' tools in: servers start on the first step that needs them,
    /// one that died starts again, a changed tool list is listed again. A server's failure
    /// is told to the session's editor once.
    pub async fn refresh_tools(&self, sid: &str) {
        let Some(hub) = &self.mcp else { return };
        let (extra, failures) = hub.tools().await;
        for message in failures {
            self.editor.publish(Update::Error {
                session_id: sid.to_string(),
                message,
            });
        }
        let registry = Arc::new(Registry::for_config_with(&self.config, extra));
        *self.registry.write().unwrap_or_else(|p| p.into_inner()) = registry;
    }

    /// The MCP servers' states, starting none.
    pub fn mcp_states(&self) -> Vec<crate::mcp::Report> {
        crate::mcp::states(&self.config.mcp, self.mcp.as_deref())
    }

    pub fn workspace(&self) -> &Path {
        &self.workspace
    }

    /// What follows a turn, in the background: distillation when enough is undistilled
    /// (its `[auto]` entry recorded as the agent's own edit of the state file), then a dream
    /// and a curation if enough prompts came since the last ones.
    pub async fn after_turn(&self, sid: &str) {
        match self.distill_due(sid).await {
            Ok(Some(_)) => {
                if let Err(e) = self.record_seen(sid) {
                    tracing::warn!(session = %sid, "{e}");
                }
            }
            Ok(None) => {}
            Err(e) => tracing::warn!(session = %sid, "distillation after the turn: {e}"),
        }
        self.upkeep(sid, false).await;
    }

    /// A dream and a curation when due (`idle`: the session has been quiet; both run).
    pub async fn upkeep(&self, sid: &str, idle: bool) {
        let when = if idle {
            "after a pause"
        } else {
            "after the turn"
        };
        if let Err(e) = self.dream_due(sid, idle).await {
            tracing::warn!(session = %sid, "dream {when}: {e}");
        }
        match self.curate_due(sid, idle).await {
            Ok(Some(r)) => {
                tracing::info!(session = %sid, added = r.added, merged = r.merged, "curated {when}")
            }
            Ok(None) => {}
            Err(e) => tracing::warn!(session = %sid, "curation {when}: {e}"),
        }
    }

    /// An agent for a server's workspace: the provider `config` names (none, with a warning,
    /// when it cannot be made: a prompt then says why) and the recovery after a crash done.
    pub fn start(
        store: Arc<Mutex<Store>>,
        config: &Config,
        workspace: &Path,
        editor: Arc<dyn EditorPort>,
    ) -> Arc<Self> {
        let provider = match crate::provider::from_config(config) {
            Ok(p) => Some(Arc::from(p)),
            Err(e) => {
                tracing::warn!("no model: {e}");
                None
            }
        };
        let agent = Arc::new(Self::new(
            store,
            config.clone(),
            workspace,
            provider,
            editor,
        ));
        if let Err(e) = agent.recover() {
            tracing::warn!("recovery failed: {e}");
        }
        agent
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    pub fn has_provider(&self) -> bool {
        self.provider.is_some()
    }

    /// Gives an agent made without one (for revert and friends) a model.
    pub fn set_provider(&mut self, provider: Arc<dyn Provider>) {
        self.provider = Some(provider);
    }

    /// Whether input waits in the session's inbox (a store error counts as none: the next
    /// prompt starts a task anyway).
    pub fn has_input(&self, sid: &str) -> bool {
        self.with_store(|s| s.inbox(sid))
            .is_ok_and(|inbox| !inbox.is_empty())
    }

    /// The snapshot repository, if snapshots are on (opened lazily: git is not loaded
    /// until the first step needs it).
    pub fn snapshots(&self) -> Option<revert::SharedSnapshots> {
        self.snapshots
            .get_or_init(|| revert::open_snapshots(&self.config, &self.workspace))
            .clone()
    }

    /// Tracks the work tree off the async threads: all of it (`None`), or only `paths` and
    /// the editor's open buffers. A snapshot that fails is logged: the turn goes on without
    /// one (it cannot be reverted, which the missing patch part shows).
    async fn track(&self, paths: Option<Vec<PathBuf>>) -> Option<String> {
        let snapshots = self.snapshots()?;
        let buffers = self.editor.open_buffers();
        let paths = paths.map(|mut p| {
            p.extend(
                buffers
                    .iter()
                    .filter_map(|(b, _)| b.strip_prefix(&self.workspace).ok())
                    .map(Path::to_path_buf),
            );
            p.sort();
            p.dedup();
            p
        });
        let result = tokio::task::spawn_blocking(move || {
            let mut s = snapshots.lock().unwrap_or_else(|p| p.into_inner());
            s.set_overlay(buffers);
            let id = match paths {
                Some(p) => s.track_paths(&p),
                None => s.track(),
            }?;
            // A big first snapshot leaves many loose objects: one pack instead.
            s.pack_if_many(revert::PACK_THRESHOLD)?;
            Ok::<_, crate::snapshot::SnapshotError>(id)
        })
        .await;
        let result = result
            .map_err(|e| e.to_string())
            .and_then(|r| r.map_err(|e| e.to_string()));
        result
            .inspect_err(|e| tracing::warn!("snapshot failed: {e}"))
            .ok()
    }

    fn project(&self) -> String {
        self.workspace.display().to_string()
    }

    fn append(&self, sid: &str, events: Vec<Event>) -> Result<()> {
        let batch: Vec<(Option<&str>, Event)> =
            events.into_iter().map(|e| (Some(sid), e)).collect();
        self.with_store(|s| s.append_all(&batch).map(|_| ()))
    }

    fn with_store<T>(&self, f: impl FnOnce(&mut Store) -> crate::store::Result<T>) -> Result<T> {
        Ok(f(&mut self
            .store
            .lock()
            .unwrap_or_else(|p| p.into_inner()))?)
    }

    /// Marks tool calls left pending or running by a process that died as failed (never
    /// re-runs them) and sessions left busy as idle. Returns how many parts were marked.
    pub fn recover(&self) -> Result<usize> {
        // Answers cut off mid-stream are closed as interrupted; their text stays.
        for (sid, part_id, _) in
            self.with_store(|s| s.parts_with_status(&[PartStatus::Streaming]))?
        {
            let event = Event::PartUpdated {
                part_id,
                data: None,
                status: Some(PartStatus::Interrupted),
            };
            self.append(&sid, vec![event])?;
        }
        let stale =
            self.with_store(|s| s.parts_with_status(&[PartStatus::Pending, PartStatus::Running]))?;
        for (sid, part_id, mut data) in stale.iter().cloned() {
            data["output"] = json!("interrupted: the server stopped before this call finished");
            let event = Event::PartUpdated {
                part_id,
                data: Some(data),
                status: Some(PartStatus::Error),
            };
            self.append(&sid, vec![event])?;
        }
        let busy = self.with_store(|s| s.sessions())?.into_iter();
        for s in busy.filter(|s| s.status != SessionStatus::Idle) {
            let event = Event::SessionStatus {
                status: SessionStatus::Idle,
            };
            self.append(&s.session_id, vec![event])?;
        }
        Ok(stale.len())
    }

    /// Runs everything waiting in the session's inbox, oldest first.
    pub async fn drive(&self, sid: &str, cancel: &CancellationToken) -> TurnOutcome {
        self.gc_if_due();
        let mut last = TurnOutcome::ended(TurnEnd::EndTurn);
        loop {
            if cancel.is_cancelled() {
                return TurnOutcome::cancelled();
            }
            let next = match self.with_store(|s| s.inbox(sid)) {
                Ok(inbox) => inbox.into_iter().next(),
                Err(e) => return self.fail(sid, e.to_string()),
            };
            let Some(input) = next else { return last };
            let started = async {
                self.ensure_baseline(sid, cancel).await?;
                self.promote(sid, &input.input_id).await?;
                self.set_status(sid, SessionStatus::Busy, None)
            };
            if let Err(e) = started.await {
                return self.fail(sid, e.to_string());
            }
            last = self.run_steps(sid, cancel).await;
            if let Err(e) = self.close_turn_state(sid).await {
                return self.fail(sid, e.to_string());
            }
            if let Err(e) = self.set_status(sid, SessionStatus::Idle, Some(last.end)) {
                return self.fail(sid, e.to_string());
            }
            if !matches!(
                last.end,
                TurnEnd::EndTurn | TurnEnd::MaxSteps | TurnEnd::MaxTokens | TurnEnd::Refusal
            ) {
                return last;
            }
        }
    }

    /// Records and reports the session's status (`end`: how the turn ended, on idle).
    fn set_status(&self, sid: &str, status: SessionStatus, end: Option<TurnEnd>) -> Result<()> {
        self.append(sid, vec![Event::SessionStatus { status }])?;
        self.editor.publish(Update::Status {
            session_id: sid.into(),
            status,
            stop_reason: end,
        });
        Ok(())
    }

    /// Ends the turn with an error the user sees.
    fn fail(&self, sid: &str, message: String) -> TurnOutcome {
        // A provider that echoes the key in its error body must not get it stored.
        let message = crate::secrets::Secrets::from_config(&self.config)
            .redact(&message)
            .into_owned();
        self.editor.publish(Update::Error {
            session_id: sid.into(),
            message: message.clone(),
        });
        TurnOutcome {
            end: TurnEnd::Error,
            error: Some(message),
        }
    }

    /// The window and the answer's limit: the configuration's, else what an overflow error
    /// or the server said, else the model name's (see [`crate::tokens::Limits`]).
    pub fn limits(&self) -> crate::tokens::Limits {
        let learned = *self
            .learned_window
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        let probed = self.window_probe.get().and_then(|p| p.as_ref()?.window);
        crate::tokens::Limits::for_model(
            &self.model(),
            self.config.context_window.or(learned).or(probed),
            self.config.max_output_tokens,
        )
    }

    /// Asks the model's server for its window, once per agent (the configuration's
    /// `context_window` wins, and then nothing is asked). Warns about what the user should
    /// fix: an Ollama that cuts prompts short, a window nobody told.
    pub async fn probe_window(&self) -> Option<crate::provider::window::Probe> {
        use crate::provider::window::Probe;
        if self.config.context_window.is_some() {
            return None;
        }
        let provider = self.provider.as_ref()?;
        let model = self.model();
        let probe = self
            .window_probe
            .get_or_init(|| async {
                let probe = provider.window(&model).await;
                if let Some(Probe {
                    window: Some(window),
                    source,
                    ..
                }) = &probe
                {
                    tracing::info!(model, window, %source, "the model's context window");
                }
                if let Some(warning) = probe.as_ref().and_then(|p| p.warning.as_ref()) {
                    tracing::warn!(model, "{warning}");
                }
                probe
            })
            .await
            .clone();
        // (The scripted model replays a script: it has no window to guess.)
        let scripted = self.config.provider == Some(crate::config::ProviderKind::Scripted);
        if !self.limits().known && !scripted {
            let why = probe.as_ref().map_or("", |p| p.source.as_str());
            self.warn_once(
                "window-unknown",
                &format!(
                    "the context window of {model} is unknown{}{why}{}; assuming {} tokens: \
                     set context_window (and max_output_tokens) to what it really takes",
                    if why.is_empty() { "" } else { " (" },
                    if why.is_empty() { "" } else { ")" },
                    self.limits().context_window
                ),
            );
        }
        probe
    }

    /// Logs a warning the first time `key` comes up.
    fn warn_once(&self, key: &'static str, message: &str) {
        let mut warned = self.warned.lock().unwrap_or_else(|p| p.into_inner());
        if warned.insert(key) {
            tracing::warn!(model = %self.model(), "{message}");
        }
    }

    /// Takes a window an overflow error named, when it is smaller than the one in force;
    /// whether it was.
    fn learn_window(&self, window: u32) -> bool {
        if self.config.context_window.is_some() || window >= self.limits().context_window {
            return false;
        }
        *self
            .learned_window
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(window);
        true
    }

    pub fn model(&self) -> String {
        self.config
            .model
            .clone()
            .unwrap_or_else(|| match self.config.provider {
                Some(crate::config::ProviderKind::Scripted) => "scripted".into(),
                _ => "default".into(),
            })
    }
}
