//! Session revert in three steps (DESIGN §5): **stage** puts the files back as they were
//! before a message (the messages stay, the current state is saved for redo); **clear**
//! brings the saved state back (redo); **commit** deletes the messages from the revert point
//! on, as events — when the next prompt is sent, or explicitly. `undo` stages the last user
//! message and returns its text; `redo` clears.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde::Serialize;
use serde_json::Value;

use super::{Agent, AgentError, Result};
use crate::config::Config;
use crate::editor::{BufferEdit, FileOperation, Update};
use crate::snapshot::{FileTarget, Patch, Snapshots, State, Unrestored, real_paths};
use crate::status::{PartKind, SessionStatus};
use crate::store::{Event, SessionSummary, SessionView, Store};

pub type SharedSnapshots = Arc<Mutex<Snapshots>>;

/// Loose objects beyond which a snapshot's new objects are packed.
pub const PACK_THRESHOLD: usize = 1024;
/// Unreachable snapshot objects are kept this long.
pub const GC_AGE: std::time::Duration = std::time::Duration::from_secs(7 * 24 * 3600);
/// Automatic collection runs at most this often.
const GC_EVERY: std::time::Duration = std::time::Duration::from_secs(24 * 3600);

pub fn open_snapshots(config: &Config, workspace: &Path) -> Option<SharedSnapshots> {
    if !config.snapshot {
        return None;
    }
    match Snapshots::open(&crate::paths::data_dir(), workspace) {
        Ok(mut s) => {
            s.set_skip(&config.snapshot_skip);
            s.set_max_untracked(config.snapshot_max_file_bytes);
            Some(Arc::new(Mutex::new(s)))
        }
        Err(e) => {
            tracing::warn!("snapshots are unavailable: {e}");
            None
        }
    }
}

/// What a revert did, for the user.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RevertInfo {
    pub message_id: String,
    pub files: Vec<String>,
    /// The reverted change, as a unified diff (from the reverted state to the saved one).
    pub diff: String,
    /// For `undo`: the text of the user message that was undone.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// Paths the revert left as they are, each with why: changed since the turn (never
    /// overwritten), not in the snapshots (a skipped folder, a file over the cap), or a
    /// folder that is not empty.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub not_restored: Vec<Unrestored>,
}

/// The patches the steps of `messages` recorded.
fn patches_from(messages: &[crate::store::MessageView]) -> Vec<Patch> {
    let strings = |v: &Value| -> Option<Vec<String>> {
        let items = v
            .as_array()?
            .iter()
            .filter_map(|f| f.as_str().map(String::from));
        Some(items.collect())
    };
    messages
        .iter()
        .flat_map(|m| &m.parts)
        .filter(|p| p.kind == PartKind::Patch)
        .filter_map(|p| {
            Some(Patch {
                from: p.data["from"].as_str()?.to_string(),
                to: p.data["to"].as_str().map(String::from),
                files: strings(&p.data["files"])?,
            })
        })
        .collect()
}

fn staged(summary: &SessionSummary) -> Option<(String, String)> {
    let r = summary.revert.as_ref()?;
    Some((
        r["messageId"].as_str()?.to_string(),
        r["snapshot"].as_str()?.to_string(),
    ))
}

/// The files a staged revert changed (what a redo brings back).
fn staged_files(summary: &SessionSummary) -> impl Iterator<Item = PathBuf> + '_ {
    summary
        .revert
        .iter()
        .flat_map(|r| r["files"].as_array().into_iter().flatten())
        .filter_map(|f| f.as_str().map(PathBuf::from))
}

/// Every snapshot the sessions of workspace `project` still refer to.
fn snapshot_roots(store: &Mutex<Store>, project: &str) -> Result<BTreeSet<String>> {
    let locked = || store.lock().unwrap_or_else(|p| p.into_inner());
    let mut roots = BTreeSet::new();
    let sessions = locked().sessions()?;
    for summary in sessions {
        if summary.workspace != project {
            continue;
        }
        // (One session at a time: the lock is not held across the whole walk.)
        let view = locked().session(&summary.session_id);
        let Some(view) = view? else {
            continue;
        };
        if let Some((_, saved)) = staged(&view.summary) {
            roots.insert(saved);
        }
        for p in view.messages.iter().flat_map(|m| &m.parts) {
            for key in ["snapshot", "from", "to"] {
                if let Some(id) = p.data[key].as_str() {
                    roots.insert(id.to_string());
                }
            }
        }
    }
    Ok(roots)
}

/// Removes unreachable snapshot objects older than [`GC_AGE`]; returns how many.
fn collect(store: &Mutex<Store>, snapshots: &SharedSnapshots, project: &str) -> Result<usize> {
    let roots = snapshot_roots(store, project)?;
    let s = snapshots.lock().unwrap_or_else(|p| p.into_inner());
    let removed = s.gc(&roots, GC_AGE)?;
    let stamp = s.git_dir().join("gc.stamp");
    if let Err(e) = std::fs::write(&stamp, "") {
        tracing::warn!("cannot write {}: {e}", stamp.display());
    }
    Ok(removed)
}

impl Agent {
    /// Removes unreachable snapshot objects older than [`GC_AGE`]; returns how many.
    pub fn snapshot_gc(&self) -> Result<usize> {
        let snapshots = self.snapshots_or_err()?;
        collect(&self.store, &snapshots, &self.project())
    }

    /// Collects snapshot objects on another thread when the last collection is a day old (a
    /// new repository starts the clock: it has nothing to collect).
    pub(super) fn gc_if_due(&self) {
        let Some(snapshots) = self.snapshots() else {
            return;
        };
        let stamp = snapshots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .git_dir()
            .join("gc.stamp");
        let due = match std::fs::metadata(&stamp).and_then(|m| m.modified()) {
            Ok(t) => t.elapsed().unwrap_or_default() >= GC_EVERY,
            Err(_) => {
                if let Err(e) = std::fs::write(&stamp, "") {
                    tracing::warn!("cannot write {}: {e}", stamp.display());
                }
                false
            }
        };
        if !due {
            return;
        }
        let (store, project) = (self.store.clone(), self.project());
        tokio::task::spawn_blocking(move || match collect(&store, &snapshots, &project) {
            Ok(n) if n > 0 => tracing::info!(removed = n, "collected unreachable snapshot objects"),
            Ok(_) => {}
            Err(e) => tracing::warn!("snapshot collection failed: {e}"),
        });
    }

    fn snapshots_or_err(&self) -> Result<SharedSnapshots> {
        if !self.config.snapshot {
            return Err(AgentError::refused(
                "snapshots are off (`snapshot = false` in the configuration), so there is nothing to revert to",
            ));
        }
        self.snapshots().ok_or_else(|| {
            AgentError::refused("the snapshot repository could not be opened; see the log")
        })
    }

    fn view(&self, sid: &str) -> Result<SessionView> {
        self.with_store(|s| s.session(sid))?
            .ok_or_else(|| AgentError::not_found(format!("no session {sid}")))
    }

    /// Carries out a plan: files open in the editor change through it (so the revert is an
    /// undo step there too), the rest on disk. Returns the paths changed and what was left.
    async fn apply_plan(
        &self,
        snapshots: &SharedSnapshots,
        plan: Vec<FileTarget>,
    ) -> Result<(Vec<String>, Vec<Unrestored>)> {
        let files: Vec<String> = plan.iter().map(FileTarget::display).collect();
        let mut on_disk = Vec::new();
        for t in plan {
            let path = self.workspace.join(&t.path);
            let text = match &t.state {
                State::File(bytes, mode) if *mode != 0o120000 => std::str::from_utf8(bytes).ok(),
                _ => None,
            };
            let open = self.editor.buffer_text(&path).is_some();
            if let Some(text) = text
                && open
                && self.editor.apply_to_buffer(&path, text).await == BufferEdit::Applied
            {
                continue;
            }
            // A file the editor has open goes away through it, buffer and all (else the
            // buffer would keep the text and a save would bring the file back).
            if t.state == State::Absent
                && open
                && self
                    .editor
                    .file_operation(&FileOperation::Delete { path })
                    .await
                    == BufferEdit::Applied
            {
                continue;
            }
            on_disk.push(t);
        }
        let left = self
            .with_snapshots(snapshots, move |s| s.apply(&on_disk))
            .await?;
        Ok((files, left))
    }

    /// Snapshots see the editor's unsaved buffers, as the user does.
    fn refresh_overlay(&self, snapshots: &SharedSnapshots) {
        let buffers = self.editor.open_buffers();
        snapshots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .set_overlay(buffers);
    }

    /// Runs git work off the async threads (it reads and writes files, and holds the
    /// snapshot lock while it does).
    async fn with_snapshots<T: Send + 'static>(
        &self,
        snapshots: &SharedSnapshots,
        f: impl FnOnce(&Snapshots) -> crate::snapshot::Result<T> + Send + 'static,
    ) -> Result<T> {
        let snapshots = snapshots.clone();
        tokio::task::spawn_blocking(move || f(&snapshots.lock().unwrap_or_else(|p| p.into_inner())))
            .await
            .map_err(|e| AgentError::Internal(format!("snapshot work failed: {e}")))?
            .map_err(AgentError::from)
    }

    /// Stages a revert to just before `message_id`. Refused while the session runs.
    pub async fn revert_to(&self, sid: &str, message_id: &str) -> Result<RevertInfo> {
        let _busy = self.revert_guard.lock().await;
        self.stage_revert(sid, message_id).await
    }

    async fn stage_revert(&self, sid: &str, message_id: &str) -> Result<RevertInfo> {
        let snapshots = self.snapshots_or_err()?;
        let view = self.view(sid)?;
        if view.summary.status == SessionStatus::Busy {
            return Err(AgentError::Busy(
                "the session is running; cancel it before reverting".into(),
            ));
        }
        let Some(start) = view
            .messages
            .iter()
            .position(|m| m.message_id == message_id)
        else {
            return Err(AgentError::not_found(format!(
                "no message {message_id} in session {sid}"
            )));
        };
        self.refresh_overlay(&snapshots);
        let patches = patches_from(&view.messages[start..]);
        // Only the paths the reverted turns changed (both sides of a rename) and the folders
        // above them are read, saved and compared: the rest of the tree is not the revert's
        // business, however big it is.
        let mut touched: BTreeSet<PathBuf> =
            real_paths(patches.iter().flat_map(|p| &p.files).map(String::as_str))
                .into_iter()
                .collect();
        // Staging again moves the revert point: first bring back the state saved the first
        // time (for the paths it holds), then save the paths of the new revert as they are.
        if let Some((_, saved)) = staged(&view.summary) {
            let before: Vec<PathBuf> = staged_files(&view.summary).collect();
            touched.extend(before.iter().cloned());
            let plan = self
                .with_snapshots(&snapshots, move |s| s.restore_plan_of(&saved, &before))
                .await?;
            self.apply_plan(&snapshots, plan).await?;
            self.refresh_overlay(&snapshots);
        }
        let paths: Vec<PathBuf> = touched.iter().cloned().collect();
        let saved = self
            .with_snapshots(&snapshots, move |s| s.capture(&paths))
            .await?;
        let plan = self
            .with_snapshots(&snapshots, move |s| s.revert_plan(&patches))
            .await?;
        let mut not_restored = plan.conflicts;
        not_restored.extend(plan.not_restorable);
        let (files, left) = self.apply_plan(&snapshots, plan.targets).await?;
        not_restored.extend(left);
        self.refresh_overlay(&snapshots);
        let paths: Vec<PathBuf> = touched.into_iter().collect();
        let from = saved.clone();
        let diff = self
            .with_snapshots(&snapshots, move |s| {
                let now = s.capture(&paths)?;
                s.diff(&now, Some(&from))
            })
            .await?;
        let staged = Event::RevertStaged {
            message_id: message_id.into(),
            snapshot: saved,
            files: files.clone(),
        };
        self.append(sid, vec![staged])?;
        // Editors mark the reverted messages (until a redo, or the next prompt deletes them).
        self.editor.publish(Update::Revert {
            session_id: sid.into(),
            message_id: Some(message_id.into()),
            files: files.clone(),
        });
        Ok(RevertInfo {
            message_id: message_id.into(),
            files,
            diff,
            text: None,
            not_restored,
        })
    }

    /// Clears a staged revert: the files come back as they were before it (redo).
    pub async fn unrevert(&self, sid: &str) -> Result<Vec<String>> {
        let _busy = self.revert_guard.lock().await;
        let view = self.view(sid)?;
        let Some((_, saved)) = staged(&view.summary) else {
            return Err(AgentError::refused(
                "nothing to redo: no revert is staged in this session",
            ));
        };
        let snapshots = self.snapshots_or_err()?;
        self.refresh_overlay(&snapshots);
        let paths: Vec<PathBuf> = staged_files(&view.summary).collect();
        let plan = self
            .with_snapshots(&snapshots, move |s| s.restore_plan_of(&saved, &paths))
            .await?;
        let (files, left) = self.apply_plan(&snapshots, plan).await?;
        for l in &left {
            tracing::warn!("redo left {}: {}", l.path, l.reason);
        }
        self.append(sid, vec![Event::RevertCleared])?;
        self.editor.publish(Update::Revert {
            session_id: sid.into(),
            message_id: None,
            files: files.clone(),
        });
        Ok(files)
    }

    /// Makes a staged revert final: the messages from the revert point on are deleted.
    pub fn commit_revert(&self, sid: &str) -> Result<bool> {
        // Runs before every prompt: the summary is enough, not the whole session.
        let summary = self
            .with_store(|s| s.summary(sid))?
            .ok_or_else(|| AgentError::not_found(format!("no session {sid}")))?;
        let Some((message_id, _)) = staged(&summary) else {
            return Ok(false);
        };
        self.append(
            sid,
            vec![
                Event::MessagesDeleted {
                    from_message_id: message_id,
                },
                Event::RevertCleared,
            ],
        )?;
        Ok(true)
    }

    /// Stages the last user message (before any staged revert point) and returns its text,
    /// so an editor can put it back in the input box.
    pub async fn undo(&self, sid: &str) -> Result<RevertInfo> {
        let _busy = self.revert_guard.lock().await;
        let view = self.view(sid)?;
        let limit = staged(&view.summary)
            .and_then(|(id, _)| view.messages.iter().position(|m| m.message_id == id))
            .unwrap_or(view.messages.len());
        let Some(message) = view.messages[..limit]
            .iter()
            .rev()
            .find(|m| m.role == "user")
        else {
            return Err(AgentError::refused("nothing to undo"));
        };
        let text: String = message
            .parts
            .iter()
            .filter(|p| p.kind == PartKind::Text)
            .filter_map(|p| p.data["text"].as_str())
            .collect();
        let mut info = self.stage_revert(sid, &message.message_id.clone()).await?;
        info.text = Some(text);
        Ok(info)
    }
}

/// The JSON form of a revert for the CLI and the protocol.
pub fn to_json(info: &RevertInfo) -> Value {
    serde_json::to_value(info).unwrap_or(Value::Null)
}
