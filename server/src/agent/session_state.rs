//! The session state in the loop (the file itself is `crate::state`): the short state block
//! each turn's prompt carries (the Current section, the count of decisions, the git line,
//! obligations, warnings), a note after the newest tool result when it changes mid-turn
//! (never a rewrite of earlier messages: the request's prefix stays as it was), and the
//! server's own `[auto]` Log entries.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::{Value, json};

use super::{Agent, Result};
use crate::editor::Update;
use crate::repo_status::RepoStatus;
use crate::state::{self, State};
use crate::status::{PartKind, PartStatus};
use crate::store::{Event, SessionView, new_id};

/// How long a request waits for `git status` before going with the last one known.
const GIT_WAIT: Duration = Duration::from_millis(300);
/// A read younger than this is reused: steps come faster than a big tree's status.
const GIT_FRESH: Duration = Duration::from_secs(2);

/// The user's repository status as last read, and whether a read is under way.
#[derive(Default)]
pub(super) struct RepoCache {
    status: std::sync::Mutex<Option<RepoStatus>>,
    reading: std::sync::atomic::AtomicBool,
    read_at: std::sync::Mutex<Option<std::time::Instant>>,
}

/// A state block, and what a change is judged on (not the git line, which moves with every
/// edit).
pub(super) struct Block {
    pub text: String,
    pub key: String,
}

/// Whether a patch part names a file of the work (not the agent's own folder).
fn work_files(data: &Value) -> bool {
    data["files"].as_array().is_some_and(|files| {
        files
            .iter()
            .filter_map(Value::as_str)
            .any(|f| !f.starts_with(crate::paths::WORKSPACE_DIR))
    })
}

/// Since the last checkpoint, from message `from` on: whether files of the work changed, and
/// how many tool calls ran. The last checkpoint is the session's own last successful
/// `context_checkpoint` call, by its place in the log; before any, the file's checkpoint
/// time (`updated`, to the second: messages of that second or earlier count as before it).
fn since_checkpoint(view: &SessionView, updated: Option<i64>, from: usize) -> (bool, usize) {
    let (mut changed, mut calls) = (false, 0);
    for m in view.messages.iter().skip(from) {
        if updated.is_some_and(|t| m.created_at / 1000 <= t / 1000) {
            continue;
        }
        for p in &m.parts {
            match p.kind {
                PartKind::Tool
                    if p.data["name"] == "context_checkpoint"
                        && p.status == Some(PartStatus::Completed) =>
                {
                    (changed, calls) = (false, 0);
                }
                PartKind::Tool => calls += 1,
                PartKind::Patch if work_files(&p.data) => changed = true,
                _ => {}
            }
        }
    }
    (changed, calls)
}

fn file_hash(path: &Path) -> Option<String> {
    std::fs::read(path)
        .ok()
        .map(|b| crate::hash::stable_hex(&b))
}

/// The latest "seen" record of the session: the hashes of the state file and AGENTS.md as
/// the agent left them at the end of a turn.
fn last_seen(view: &SessionView) -> Option<&Value> {
    view.messages
        .iter()
        .flat_map(|m| &m.parts)
        .filter(|p| p.kind == PartKind::Note)
        .filter_map(|p| p.data.get("seen"))
        .next_back()
}

/// The newest state block the session's requests carry.
fn last_key(view: &SessionView) -> Option<&str> {
    view.messages
        .iter()
        .flat_map(|m| &m.parts)
        .filter(|p| p.kind == PartKind::Note)
        .filter_map(|p| p.data["state"].as_str())
        .next_back()
}

impl Agent {
    pub(super) fn state_path(&self) -> PathBuf {
        state::path(&self.workspace, &self.config.state_file)
    }

    fn load_state(&self) -> State {
        state::load(&self.state_path())
            .inspect_err(|e| tracing::warn!("{e}"))
            .unwrap_or_default()
    }

    /// The user's repository status. A read younger than [`GIT_FRESH`] is reused; else a
    /// fresh one starts on a blocking thread (unless one is under way). With `wait` the
    /// caller gives it up to [`GIT_WAIT`]; otherwise — and when it takes longer — it goes
    /// with the last one known, and the read lands in the cache for the next.
    async fn repo_status(&self, wait: bool) -> Option<RepoStatus> {
        let cached = || {
            self.repo
                .status
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .clone()
        };
        let read_at = *self.repo.read_at.lock().unwrap_or_else(|p| p.into_inner());
        if read_at.is_some_and(|t| t.elapsed() < GIT_FRESH)
            || self
                .repo
                .reading
                .swap(true, std::sync::atomic::Ordering::AcqRel)
        {
            return cached();
        }
        let workspace = self.workspace.clone();
        let repo = self.repo.clone();
        let read = tokio::task::spawn_blocking(move || {
            let status = crate::repo_status::read(&workspace);
            *repo.status.lock().unwrap_or_else(|p| p.into_inner()) = status.clone();
            repo.reading
                .store(false, std::sync::atomic::Ordering::Release);
            status
        });
        if !wait {
            return cached();
        }
        match tokio::time::timeout(GIT_WAIT, read).await {
            Ok(Ok(status)) => status,
            _ => cached(),
        }
    }

    /// What the state asks of the agent now.
    fn obligations(&self, view: &SessionView, state: &State) -> Vec<String> {
        let checkpointed = state.current.updated.as_deref().and_then(state::parse_time);
        if since_checkpoint(view, checkpointed, 0).0 {
            let name = self.config.state_file.display();
            vec![format!(
                "{name} needs a checkpoint (files changed since the last one)"
            )]
        } else {
            Vec::new()
        }
    }

    /// The block; `fresh`: worth waiting a moment for a new git line (a turn's start).
    async fn block(
        &self,
        view: &SessionView,
        tag: &str,
        warnings: &[String],
        fresh: bool,
    ) -> Block {
        let state = self.load_state();
        let mut head = state.current_lines();
        if head.is_empty() {
            head.push("No checkpoint yet (context_checkpoint records one).".into());
        }
        head.push(format!("Decisions: {} recorded", state.decisions.len()));
        let obligations: Vec<String> = self
            .obligations(view, &state)
            .into_iter()
            .map(|o| format!("Obligations: {o}"))
            .collect();
        let git = self.repo_status(fresh).await.map(|r| r.line());
        let warnings = warnings.iter().map(|w| format!("Warning: {w}"));
        let lines: Vec<String> = head
            .iter()
            .cloned()
            .chain(git)
            .chain(obligations.iter().cloned())
            .chain(warnings)
            .collect();
        Block {
            text: format!(
                "<{tag} file=\"{}\">\n{}\n</{tag}>",
                self.config.state_file.display(),
                lines.join("\n")
            ),
            key: [head, obligations].concat().join("\n"),
        }
    }

    /// The state note of a turn's prompt: the block, with a resumption warning on a
    /// session's first turn after an `[auto]` entry, and a warning for the state file or
    /// AGENTS.md edited outside the agent since the last turn. A new HEAD commit is logged.
    pub(super) async fn turn_state_note(&self, sid: &str) -> Result<Value> {
        self.log_new_commit(true).await;
        let view = self.session_view(sid)?;
        let state = self.load_state();
        let mut warnings = Vec::new();
        let first_turn = !view.messages.iter().any(|m| m.role == "user");
        if first_turn && let Some(entry) = state.last_auto() {
            warnings.push(format!(
                "resuming after an automatic entry ({entry}): the last session left no \
                 checkpoint; read {} and check the repository before going on",
                self.config.state_file.display()
            ));
        }
        if let Some(seen) = last_seen(&view) {
            for (key, path, name) in self.watched() {
                if seen[key].as_str() != file_hash(&path).as_deref() {
                    warnings.push(format!(
                        "{name} was edited outside the agent since the last turn; read it again"
                    ));
                }
            }
        }
        let block = self.block(&view, "session-state", &warnings, true).await;
        Ok(json!({"text": block.text, "state": block.key}))
    }

    /// The files whose outside edits are warned about: (key, path, name).
    fn watched(&self) -> [(&'static str, PathBuf, String); 2] {
        [
            (
                "state",
                self.state_path(),
                self.config.state_file.display().to_string(),
            ),
            (
                "agents",
                self.workspace.join("AGENTS.md"),
                "AGENTS.md".into(),
            ),
        ]
    }

    /// After a step's tools: when the state changed, a short note on the step's message
    /// (shown after its tool results) and an update for the editor.
    pub(super) async fn note_state_change(&self, sid: &str, message_id: &str) -> Result<()> {
        let view = self.session_view(sid)?;
        let block = self.block(&view, "session-state-update", &[], false).await;
        if last_key(&view) == Some(block.key.as_str()) {
            return Ok(());
        }
        self.append(
            sid,
            vec![Event::PartAdded {
                part_id: new_id(),
                message_id: message_id.into(),
                kind: PartKind::Note,
                data: json!({"text": block.text, "state": block.key}),
                status: None,
            }],
        )?;
        self.publish_state(sid);
        Ok(())
    }

    /// Tells the editor where the state stands.
    pub(super) fn publish_state(&self, sid: &str) {
        let state = self.load_state();
        self.editor.publish(Update::State {
            session_id: sid.into(),
            path: self.state_path(),
            focus: state.current.focus,
            phase: state.current.phase,
        });
    }

    /// At the end of a turn: an `[auto]` entry when it changed files and no checkpoint
    /// followed, and the "seen" record of the watched files.
    pub(super) async fn close_turn_state(&self, sid: &str) -> Result<()> {
        let view = self.session_view(sid)?;
        let state = self.load_state();
        let turn_start = view.messages.iter().rposition(|m| m.role == "user");
        let checkpointed = state.current.updated.as_deref().and_then(state::parse_time);
        // This turn changed files, and no checkpoint came after the change.
        let unchecked = since_checkpoint(&view, checkpointed, turn_start.unwrap_or(0)).0;
        if unchecked {
            let calls = since_checkpoint(&view, checkpointed, 0).1;
            let tag = format!("(session {})", &sid[..sid.len().min(8)]);
            let entry = format!(
                "{} [{}] Session ended. {calls} tool calls. No explicit checkpoint. {tag}",
                state::AUTO,
                state::now()
            );
            self.write_auto(move |s| {
                // One entry per stretch without a checkpoint: the newest one of this session
                // is brought up to date rather than repeated.
                let same = s
                    .log
                    .last()
                    .is_some_and(|l| l.starts_with(state::AUTO) && l.ends_with(&tag));
                if same {
                    s.log.pop();
                }
                s.log.push(entry);
            });
        }
        self.log_new_commit(false).await;
        self.record_seen(sid)
    }

    /// Records the hashes of the watched files as the agent leaves them (on the session's
    /// last message; a note without text is not shown to the model).
    pub fn record_seen(&self, sid: &str) -> Result<()> {
        let view = self.session_view(sid)?;
        let Some(last) = view.messages.last() else {
            return Ok(());
        };
        let mut seen = serde_json::Map::new();
        for (key, path, _) in self.watched() {
            seen.insert(key.into(), json!(file_hash(&path)));
        }
        self.append(
            sid,
            vec![Event::PartAdded {
                part_id: new_id(),
                message_id: last.message_id.clone(),
                kind: PartKind::Note,
                data: json!({ "seen": seen }),
                status: None,
            }],
        )
    }

    /// An `[auto]` Log entry for a commit on HEAD the Log does not name yet (`wait`: worth
    /// waiting a moment for a fresh read).
    async fn log_new_commit(&self, wait: bool) {
        let Some(repo) = self.repo_status(wait).await else {
            return;
        };
        let Some((hash, summary)) = repo.head else {
            return;
        };
        let entry = format!(
            "{} [{}] Commit {hash} on {}: {summary}",
            state::AUTO,
            state::now(),
            repo.branch
        );
        let marker = format!("Commit {hash} ");
        if self.load_state().log.iter().any(|l| l.contains(&marker)) {
            return;
        }
        self.write_auto(move |s| s.log.push(entry));
    }

    /// Writes an `[auto]` entry; a state file that cannot be written is logged, the turn
    /// goes on.
    pub(super) fn write_auto(&self, change: impl FnOnce(&mut State)) {
        let result = state::update(&self.workspace, &self.state_path(), |s| {
            change(s);
            Ok(())
        });
        if let Err(e) = result {
            tracing::warn!("the state file: {e}");
        }
    }

    /// An `[auto]` entry for a distillation that landed.
    pub(super) fn log_distillation(&self, what: String) {
        let entry = format!("{} [{}] {what}", state::AUTO, state::now());
        self.write_auto(move |s| s.log.push(entry));
    }

    /// The state as the observer and reflector read it.
    pub(super) fn state_for_distillation(&self) -> String {
        let state = self.load_state();
        let mut lines = state.current_lines();
        let recent = state.decisions.len().saturating_sub(20);
        lines.extend(
            state.decisions[recent..]
                .iter()
                .map(|d| format!("Decision: {d}")),
        );
        if lines.is_empty() {
            return String::new();
        }
        format!(
            "<session-state>\n{}\n</session-state>\n\n",
            lines.join("\n")
        )
    }

    fn session_view(&self, sid: &str) -> Result<SessionView> {
        self.with_store(|s| s.session(sid))?
            .ok_or_else(|| super::AgentError::not_found(format!("no session {sid}")))
    }
}
