//! Bringing paths back: what each path is in a snapshot and on disk, what a revert or a redo
//! must change, and changing it in an order that works for every kind of change.
//!
//! A plan covers the paths a revert concerns *and every folder above them*, each with the
//! state it must reach (absent, a folder, or a file or symlink with its bytes and mode). That
//! is what makes a rename, a file replaced by a folder, or a folder the turn created or
//! emptied come back exactly. Applying removes deepest first and creates shallowest first.

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use git2::ObjectType;

use super::meta::{self, Meaning};
use super::{Patch, Result, SnapshotError, Snapshots, entry_mode, safe_relative};

/// What one path is, or must become.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    Absent,
    Dir,
    /// The bytes and the git mode (`0o100644`, `0o100755`, or `0o120000` for a symlink,
    /// whose bytes are its target).
    File(Vec<u8>, u32),
}

/// One path and the state it must reach.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileTarget {
    pub path: PathBuf,
    pub state: State,
}

impl FileTarget {
    pub fn display(&self) -> String {
        self.path.to_string_lossy().into_owned()
    }
}

/// A path a revert leaves as it is, and why.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Unrestored {
    pub path: String,
    pub reason: String,
}

/// What reverting some patches means.
#[derive(Debug, Default)]
pub struct RevertPlan {
    pub targets: Vec<FileTarget>,
    /// Paths the turns changed that no snapshot holds (a skipped folder, a file over the cap).
    pub not_restorable: Vec<Unrestored>,
    /// Paths changed since the turns (by the user, or another program): left as they are.
    pub conflicts: Vec<Unrestored>,
}

fn path_of(rel: &[u8]) -> &Path {
    Path::new(std::ffi::OsStr::from_bytes(rel))
}

/// `paths` and every folder above them, deepest paths last.
pub(super) fn closure(paths: &[PathBuf]) -> BTreeSet<PathBuf> {
    let mut out = BTreeSet::new();
    for p in paths {
        let rel = p.as_os_str().as_bytes();
        if rel == meta::GIT_INDEX.as_bytes() {
            out.insert(p.clone());
            continue;
        }
        if safe_relative(&p.to_string_lossy()).is_none() || meta::is_agent_own(rel) {
            continue;
        }
        out.insert(p.clone());
        out.extend(meta::ancestors(rel).map(|a| path_of(a).to_path_buf()));
    }
    out
}

fn depth(p: &Path) -> usize {
    p.components().count()
}

impl Patch {
    /// What the patch lists, decoded from its snapshot paths.
    pub fn meanings(&self) -> impl Iterator<Item = Meaning> + '_ {
        self.files.iter().map(|f| meta::meaning(f.as_bytes()))
    }
}

/// The real paths (files and folders) among snapshot paths; lost ones are left out.
pub fn real_paths<'a>(listed: impl IntoIterator<Item = &'a str>) -> Vec<PathBuf> {
    listed
        .into_iter()
        .filter_map(|f| match meta::meaning(f.as_bytes()) {
            Meaning::File(p) | Meaning::Dir(p) => Some(path_of(&p).to_path_buf()),
            Meaning::GitIndex => Some(PathBuf::from(meta::GIT_INDEX)),
            Meaning::Lost(_) => None,
        })
        .collect()
}

impl Snapshots {
    /// What `rel` is in snapshot `tree`.
    pub(super) fn state_in(&self, tree: &git2::Tree<'_>, rel: &Path) -> Result<State> {
        match tree.get_path(rel) {
            Ok(e) if e.kind() == Some(ObjectType::Tree) || e.filemode() == 0o160000 => {
                Ok(State::Dir)
            }
            Ok(e) => Ok(State::File(
                self.repo.find_blob(e.id())?.content().to_vec(),
                e.filemode() as u32,
            )),
            Err(_) => {
                let marker = meta::dir_entry(rel.as_os_str().as_bytes());
                Ok(match tree.get_path(path_of(&marker)) {
                    Ok(_) => State::Dir,
                    Err(_) => State::Absent,
                })
            }
        }
    }

    /// What `rel` is on disk now (an unsaved editor buffer counts as the file's bytes).
    pub(super) fn state_now(&self, rel: &Path) -> Result<State> {
        if rel == Path::new(meta::GIT_INDEX) {
            return Ok(match self.user_index_now() {
                Some(tree) => State::File(tree, 0o100644),
                None => State::Absent,
            });
        }
        let full = self.worktree.join(rel);
        let Ok(md) = self.lstat(rel) else {
            return Ok(State::Absent);
        };
        Ok(if md.file_type().is_symlink() {
            State::File(
                std::fs::read_link(&full)?.as_os_str().as_bytes().to_vec(),
                0o120000,
            )
        } else if md.is_dir() {
            State::Dir
        } else if md.is_file() {
            let bytes = match self.overlay.get(rel.as_os_str().as_bytes()) {
                Some(text) => text.clone(),
                None => std::fs::read(&full)?,
            };
            State::File(bytes, entry_mode(&md))
        } else {
            // A FIFO, socket or device: nothing a snapshot holds or a revert writes.
            State::Absent
        })
    }

    /// What reverting `patches` means: each path back to its state in the earliest snapshot
    /// that lists it (so edits made between turns to files no earlier turn touched stay), and
    /// each folder above them as it was then. A path whose state now is not what the last
    /// turn that touched it left is a conflict and stays as it is.
    pub fn revert_plan(&self, patches: &[Patch]) -> Result<RevertPlan> {
        // path → (index of the earliest patch listing it or a path below it, of the last):
        // a folder changes with what is below it.
        let mut listed: BTreeMap<PathBuf, (usize, usize)> = BTreeMap::new();
        let mut plan = RevertPlan::default();
        let mut lost = BTreeSet::new();
        for (i, patch) in patches.iter().enumerate() {
            for m in patch.meanings() {
                let rel = match &m {
                    Meaning::Lost(p) => {
                        lost.insert(p.clone());
                        continue;
                    }
                    Meaning::File(p) | Meaning::Dir(p) => path_of(p).to_path_buf(),
                    Meaning::GitIndex => PathBuf::from(meta::GIT_INDEX),
                };
                for p in closure(std::slice::from_ref(&rel)) {
                    listed.entry(p).or_insert((i, i)).1 = i;
                }
            }
        }
        for p in lost {
            plan.not_restorable.push(Unrestored {
                path: String::from_utf8_lossy(&p).into_owned(),
                reason: "not in the snapshots (a skipped folder or a file over the size cap)"
                    .into(),
            });
        }
        let mut trees = BTreeMap::new();
        let mut tree = |id: &str| -> Result<git2::Tree<'_>> {
            if !trees.contains_key(id) {
                trees.insert(id.to_string(), self.tree(id)?.id());
            }
            Ok(self.repo.find_tree(trees[id])?)
        };
        let mut wanted: BTreeMap<PathBuf, State> = BTreeMap::new();
        let mut now_states = BTreeMap::new();
        for (p, (first, last)) in &listed {
            let now = self.state_now(p)?;
            if let Some(to) = patches[*last].to.as_deref() {
                // (A folder the user filled since is no conflict: both states are `Dir`, and
                // a folder is only removed when empty.)
                if now != self.state_in(&tree(to)?, p)? {
                    plan.conflicts.push(Unrestored {
                        path: p.to_string_lossy().into_owned(),
                        reason: "changed since the agent's turn; left as it is".into(),
                    });
                    continue;
                }
            }
            let target = self.state_in(&tree(&patches[*first].from)?, p)?;
            wanted.insert(p.clone(), target);
            now_states.insert(p.clone(), now);
        }
        plan.targets = self.differing(wanted, now_states)?;
        Ok(plan)
    }

    /// The targets among `wanted` that differ from the disk, with every folder above a
    /// present target wanted as a folder (a path may come from a later snapshot than its
    /// folder did). `now` holds states already read from the disk, so none is read twice.
    fn differing(
        &self,
        mut wanted: BTreeMap<PathBuf, State>,
        mut now: BTreeMap<PathBuf, State>,
    ) -> Result<Vec<FileTarget>> {
        let present: Vec<PathBuf> = wanted
            .iter()
            .filter(|(_, s)| **s != State::Absent)
            .map(|(p, _)| p.clone())
            .collect();
        for p in present
            .iter()
            .filter(|p| !meta::is_meta(p.as_os_str().as_bytes()))
        {
            for a in meta::ancestors(p.as_os_str().as_bytes()) {
                wanted.insert(path_of(a).to_path_buf(), State::Dir);
            }
        }
        let mut out = Vec::new();
        for (path, state) in wanted {
            let current = match now.remove(&path) {
                Some(known) => known,
                None => self.state_now(&path)?,
            };
            if current != state {
                out.push(FileTarget { path, state });
            }
        }
        Ok(out)
    }

    /// What bringing `paths` (and the folders above them) to their state in snapshot `id`
    /// means: only those that differ. Only they are read, so the cost does not grow with
    /// the tree.
    pub fn restore_plan_of(&self, id: &str, paths: &[PathBuf]) -> Result<Vec<FileTarget>> {
        let tree = self.tree(id)?;
        let mut wanted = BTreeMap::new();
        for p in closure(paths) {
            let state = self.state_in(&tree, &p)?;
            wanted.insert(p, state);
        }
        self.differing(wanted, BTreeMap::new())
    }

    /// Carries out `targets`: removals deepest first (a folder only when empty), then
    /// creations shallowest first. Returns what could not be done.
    pub fn apply(&self, targets: &[FileTarget]) -> Result<Vec<Unrestored>> {
        let _lock = super::Lock::acquire(&self.git_dir)?;
        let mut left = Vec::new();
        let mut order: Vec<&FileTarget> = targets.iter().collect();
        order.sort_by_key(|t| std::cmp::Reverse(depth(&t.path)));
        for t in &order {
            let full = self.checked(&t.path)?;
            let Ok(md) = self.lstat(&t.path) else {
                continue;
            };
            let result = if md.is_dir() {
                if t.state == State::Dir {
                    continue;
                }
                std::fs::remove_dir(&full)
            } else {
                std::fs::remove_file(&full)
            };
            if let Err(e) = result {
                left.push(Unrestored {
                    path: t.display(),
                    reason: format!("could not be removed: {e}"),
                });
            }
        }
        order.reverse();
        for t in order.into_iter().filter(|t| t.state != State::Absent) {
            let full = self.checked(&t.path)?;
            // Never through a symlinked folder: the removals above replaced every one the
            // plan knows of, so one here was put there since.
            let result = if let (true, State::File(tree, _)) =
                (t.path == Path::new(meta::GIT_INDEX), &t.state)
            {
                self.reset_user_index(tree)
            } else if self.creatable(&t.path) {
                put(&full, &t.state)
            } else {
                Err(std::io::Error::other(
                    "a folder above it is a symlink or a file",
                ))
            };
            if let Err(e) = result {
                left.push(Unrestored {
                    path: t.display(),
                    reason: format!("could not be restored: {e}"),
                });
            }
        }
        Ok(left)
    }

    /// Whether every folder above `rel` is a real folder or missing (then created), never a
    /// symlink or a file.
    fn creatable(&self, rel: &Path) -> bool {
        let mut above: Vec<&[u8]> = meta::ancestors(rel.as_os_str().as_bytes()).collect();
        above.reverse();
        for dir in above {
            match std::fs::symlink_metadata(self.worktree.join(path_of(dir))) {
                Ok(md) if md.is_dir() => {}
                Ok(_) => return false,
                Err(_) => return true,
            }
        }
        true
    }

    fn checked(&self, rel: &Path) -> Result<PathBuf> {
        match safe_relative(&rel.to_string_lossy()) {
            Some(rel) => Ok(self.worktree.join(rel)),
            None => Err(SnapshotError::Other(format!(
                "refusing to write outside the work tree: {}",
                rel.display()
            ))),
        }
    }
}

/// Creates what `state` says at `full`, whose old content the removal phase took away.
fn put(full: &Path, state: &State) -> std::io::Result<()> {
    match state {
        State::Absent => Ok(()), // the removals did it
        State::Dir => std::fs::create_dir_all(full),
        State::File(bytes, mode) => {
            if let Some(parent) = full.parent() {
                std::fs::create_dir_all(parent)?;
            }
            if std::fs::symlink_metadata(full).is_ok_and(|m| !m.is_dir()) {
                std::fs::remove_file(full)?;
            }
            if *mode == 0o120000 {
                std::os::unix::fs::symlink(std::ffi::OsStr::from_bytes(bytes), full)
            } else {
                std::fs::write(full, bytes)?;
                let bits = if *mode == 0o100755 { 0o755 } else { 0o644 };
                std::fs::set_permissions(full, std::fs::Permissions::from_mode(bits))
            }
        }
    }
}
