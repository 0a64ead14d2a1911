//! Snapshots of the work tree in a hidden git repository (git2), never the user's own.
//!
//! The hidden repository lives under `$AGENT_LSP_DATA_DIR/snapshot/<project>/<worktree>/`.
//! In a git workspace it borrows the project's object store (`objects/info/alternates`) and
//! starts from a copy of the project's index, so the first snapshot rehashes nothing that is
//! committed and unchanged. `track` stages the work tree into the hidden index — reusing each
//! entry whose stat data is unchanged, hashing only what changed — and writes a tree: the
//! snapshot id. The user's `.git` is only ever read.

mod lock;
pub mod meta;
mod pack;
mod restore;
mod user_index;

use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};

use git2::{IndexEntry, IndexTime, ObjectType, Oid, Repository};
use serde::{Deserialize, Serialize};

pub use lock::Lock;
use pack::ObjectSink;
pub use restore::{FileTarget, RevertPlan, State, Unrestored, real_paths};

/// Untracked files larger than this are not snapshotted (a revert names them instead).
pub const MAX_UNTRACKED_BYTES: u64 = 2 * 1024 * 1024;

#[derive(Debug, thiserror::Error)]
pub enum SnapshotError {
    #[error("snapshot repository: {0}")]
    Git(#[from] git2::Error),
    #[error("snapshot: {0}")]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Other(String),
}

pub type Result<T> = std::result::Result<T, SnapshotError>;

/// One file that differs between two snapshots.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileChange {
    pub path: String,
    /// `added`, `modified` or `deleted`.
    pub status: String,
    pub additions: usize,
    pub deletions: usize,
    pub binary: bool,
}

/// A step's change set: the snapshot before it, the one after it (when known: a revert
/// compares the disk with it to see what was changed since), and the snapshot paths that
/// differ between them — both sides of a rename, and meta entries (see [`meta`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Patch {
    pub from: String,
    #[serde(default)]
    pub to: Option<String>,
    pub files: Vec<String>,
}

pub struct Snapshots {
    repo: Repository,
    git_dir: PathBuf,
    worktree: PathBuf,
    max_untracked: u64,
    /// The user's index file, when the workspace is in a git repository.
    user_index: Option<PathBuf>,
    /// Folder names never entered (dependencies, build output, caches): named, not held.
    skip: std::sync::Arc<BTreeSet<std::ffi::OsString>>,
    /// Directories never entered: submodules (gitlinks in the index).
    gitlinks: BTreeSet<Vec<u8>>,
    /// Unsaved editor buffers (relative path → text): what the user sees is what a snapshot
    /// holds, although the disk is behind.
    overlay: BTreeMap<Vec<u8>, Vec<u8>>,
    cached: std::sync::Mutex<Option<CachedIndex>>,
}

/// The project id: the root commit of the workspace's repository when there is one, else a
/// hash of the canonical root path.
fn project_id(worktree: &Path, user_repo: Option<&Repository>) -> String {
    let root_commit = user_repo.and_then(|r| {
        let mut walk = r.revwalk().ok()?;
        walk.push_head().ok()?;
        walk.set_sorting(git2::Sort::TOPOLOGICAL | git2::Sort::REVERSE)
            .ok()?;
        walk.next()?.ok()
    });
    match root_commit {
        Some(oid) => oid.to_string(),
        None => crate::hash::stable_hex(worktree.as_os_str().as_bytes()),
    }
}

fn mtime(md: &std::fs::Metadata) -> IndexTime {
    IndexTime::new(md.mtime() as i32, md.mtime_nsec() as u32)
}

/// What a snapshot holds: regular files and symlinks (never a FIFO, device or socket, which
/// would block or never end when read).
fn snapshotted(md: &std::fs::Metadata) -> bool {
    md.is_file() || md.file_type().is_symlink()
}

pub(crate) fn entry_mode(md: &std::fs::Metadata) -> u32 {
    if md.file_type().is_symlink() {
        0o120000
    } else if md.permissions().mode() & 0o111 != 0 {
        0o100755
    } else {
        0o100644
    }
}

/// An index entry for `rel`; with the file's metadata as its stat cache, or without (an
/// unsaved buffer), which makes the next snapshot look at the file again.
pub(crate) fn index_entry(
    rel: &[u8],
    mode: u32,
    id: Oid,
    len: usize,
    md: Option<&std::fs::Metadata>,
) -> IndexEntry {
    let time = |secs: i64, nanos: i64| IndexTime::new(secs as i32, nanos as u32);
    IndexEntry {
        ctime: md
            .map(|m| time(m.ctime(), m.ctime_nsec()))
            .unwrap_or(IndexTime::new(0, 0)),
        mtime: md.map(mtime).unwrap_or(IndexTime::new(0, 0)),
        dev: md.map(|m| m.dev() as u32).unwrap_or(0),
        ino: md.map(|m| m.ino() as u32).unwrap_or(0),
        mode,
        uid: md.map(|m| m.uid()).unwrap_or(0),
        gid: md.map(|m| m.gid()).unwrap_or(0),
        file_size: len as u32,
        id,
        flags: (rel.len().min(0xfff)) as u16,
        flags_extended: 0,
        path: rel.to_vec(),
    }
}

/// A relative path from the index, refused if it could leave the work tree.
pub(crate) fn safe_relative(path: &str) -> Option<PathBuf> {
    let p = PathBuf::from(path);
    p.components()
        .all(|c| matches!(c, Component::Normal(_)))
        .then_some(p)
}

/// Above this many changed paths a snapshot's trees are all rebuilt rather than edited.
const TREE_EDIT_MAX: usize = 1000;

/// What staging did to the index.
#[derive(Default)]
pub(crate) struct Staged {
    /// Paths whose content or mode changed (or that were removed).
    pub(crate) changed: Vec<Vec<u8>>,
    /// Entries written, changed or not (a refreshed stat cache must be saved too).
    pub(crate) updated: usize,
    /// Files that already had an entry.
    matched: usize,
    /// Untracked files over the cap, left out (with their meta content).
    over_cap: Vec<(Vec<u8>, Vec<u8>)>,
}

impl Staged {
    pub(crate) fn add(&mut self, existing: Option<&IndexEntry>, rel: &[u8], id: Oid, mode: u32) {
        if existing.is_none_or(|e| e.id != id || e.mode != mode) {
            self.changed.push(rel.to_vec());
        }
        self.updated += 1;
    }

    fn merge(&mut self, other: Staged) {
        self.changed.extend(other.changed);
        self.updated += other.updated;
        self.matched += other.matched;
        self.over_cap.extend(other.over_cap);
    }
}

/// What a walk of the work tree met.
#[derive(Default)]
struct Walked {
    /// Regular files and symlinks, with their metadata.
    files: Vec<(Vec<u8>, std::fs::Metadata)>,
    /// Every folder below the root that was entered.
    dirs: Vec<Vec<u8>>,
    /// Folders not entered (the skip list), with their meta content.
    lost: Vec<(Vec<u8>, Vec<u8>)>,
}

enum Met {
    File(Vec<u8>, std::fs::Metadata),
    Dir(Vec<u8>),
    Skipped(Vec<u8>, Vec<u8>),
}

fn path_of(rel: &[u8]) -> &Path {
    Path::new(std::ffi::OsStr::from_bytes(rel))
}

/// Whether the index holds a file below folder `dir`.
fn holds_files(index: &git2::Index, dir: &[u8]) -> bool {
    index.find_prefix([dir, b"/"].concat()).is_ok()
}

/// The meta entries of the index (they sort together).
fn meta_entries(index: &git2::Index) -> Vec<Vec<u8>> {
    let Ok(start) = index.find_prefix(meta::PREFIX) else {
        return Vec::new();
    };
    (start..index.len())
        .map_while(|i| index.get(i).filter(|e| meta::is_meta(&e.path)))
        .map(|e| e.path)
        .collect()
}

/// Turns the meta entries `old` of the index into `wanted`: stale ones removed, new or
/// changed ones added (their blobs into `sink`).
fn set_meta(
    sink: &mut ObjectSink<'_, '_>,
    index: &mut git2::Index,
    staged: &mut Staged,
    old: BTreeSet<Vec<u8>>,
    wanted: BTreeMap<Vec<u8>, Vec<u8>>,
) -> Result<()> {
    for path in old.iter().filter(|p| !wanted.contains_key(*p)) {
        index.remove_path(path_of(path))?;
        staged.changed.push(path.clone());
        staged.updated += 1;
    }
    for (path, content) in wanted {
        let existing = index.get_path(path_of(&path), 0);
        let id = Oid::hash_object(ObjectType::Blob, &content)?;
        if existing.as_ref().is_some_and(|e| e.id == id) {
            continue;
        }
        let id = sink.add(ObjectType::Blob, &content)?;
        staged.add(existing.as_ref(), &path, id, 0o100644);
        index.add(&index_entry(&path, 0o100644, id, content.len(), None))?;
    }
    Ok(())
}

/// The hidden index kept in memory between snapshots, and the state of its file when it was
/// read or last written by us (a change means another process wrote it: read it again).
struct CachedIndex {
    index: git2::Index,
    file: Option<(std::time::SystemTime, u64)>,
    /// Changes not written to the file yet (the fast path defers the write).
    dirty: bool,
    /// The tree this index held when it last made a snapshot (the fast path edits it).
    tree: Option<Oid>,
}

// SAFETY: a libgit2 index opened from its file (`Index::open`) belongs to no repository
// and has no thread affinity; libgit2 only forbids using one object from two threads at
// once, and every use of this one goes through the `Snapshots::cached` mutex.
unsafe impl Send for CachedIndex {}

/// The tree of the index file as written (`index-tree`: the tree id and the index file's
/// stamp), so that a new process edits that tree on its fast path instead of building every
/// tree from the index. A stamp that does not match the index file means another writer.
const INDEX_TREE: &str = "index-tree";

fn stamp_text(stamp: (std::time::SystemTime, u64)) -> String {
    let nanos = stamp
        .0
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    format!("{nanos} {}", stamp.1)
}

fn read_index_tree(git_dir: &Path, index: Option<(std::time::SystemTime, u64)>) -> Option<Oid> {
    let text = std::fs::read_to_string(git_dir.join(INDEX_TREE)).ok()?;
    let (oid, stamp) = text.trim().split_once(' ')?;
    (stamp == stamp_text(index?)).then(|| Oid::from_str(oid).ok())?
}

fn write_index_tree(
    git_dir: &Path,
    index: Option<(std::time::SystemTime, u64)>,
    tree: Option<Oid>,
) {
    let path = git_dir.join(INDEX_TREE);
    let (Some(index), Some(tree)) = (index, tree) else {
        let _ = std::fs::remove_file(path);
        return;
    };
    if std::fs::write(&path, format!("{tree} {}\n", stamp_text(index))).is_err() {
        let _ = std::fs::remove_file(path);
    }
}

fn file_stamp(path: &Path) -> Option<(std::time::SystemTime, u64)> {
    std::fs::metadata(path)
        .ok()
        .and_then(|m| Some((m.modified().ok()?, m.len())))
}

impl Snapshots {
    /// Opens (creating on first use) the hidden repository for `worktree`.
    pub fn open(data_dir: &Path, worktree: &Path) -> Result<Self> {
        let worktree = std::fs::canonicalize(worktree)?;
        let user_repo = Repository::discover(&worktree).ok().filter(|r| {
            r.workdir()
                .and_then(|w| std::fs::canonicalize(w).ok())
                .is_some_and(|w| worktree.starts_with(w))
        });
        let git_dir = data_dir
            .join("snapshot")
            .join(project_id(&worktree, user_repo.as_ref()))
            .join(crate::hash::stable_hex(worktree.as_os_str().as_bytes()));
        std::fs::create_dir_all(&git_dir)?;
        // Two servers may open a new workspace at once: set-up happens under the lock.
        let lock = Lock::acquire(&git_dir)?;
        let fresh = !git_dir.join("HEAD").exists();
        let repo = if fresh {
            // No templates: the sample hooks and the description file are of no use here,
            // and copying them was most of a first run's set-up.
            let mut options = git2::RepositoryInitOptions::new();
            options.bare(true).external_template(false);
            Repository::init_opts(&git_dir, &options)?
        } else {
            Repository::open_bare(&git_dir)?
        };
        if fresh {
            let mut config = repo.config()?;
            config.set_bool("core.autocrlf", false)?;
            config.set_bool("gc.auto", false)?;
        }
        if let Some(user) = &user_repo {
            let objects = user.commondir().join("objects");
            let alternates = git_dir.join("objects/info/alternates");
            if std::fs::read_to_string(&alternates)
                .ok()
                .as_deref()
                .map(str::trim)
                != objects.to_str()
            {
                std::fs::create_dir_all(alternates.parent().expect("has a parent"))?;
                std::fs::write(&alternates, format!("{}\n", objects.display()))?;
            }
            // Start from the project's index: its stat cache makes the first snapshot cheap.
            let hidden_index = git_dir.join("index");
            let sha256 = user
                .config()
                .ok()
                .and_then(|c| c.get_string("extensions.objectformat").ok())
                .is_some_and(|f| f == "sha256");
            if !hidden_index.exists() && !sha256 {
                let _ = std::fs::copy(user.path().join("index"), &hidden_index);
            }
        }
        drop(lock);
        let user_index = user_repo
            .as_ref()
            .filter(|r| !r.is_bare())
            .map(|r| r.path().join("index"));
        let repo = Repository::open_bare(&git_dir)?;
        let mut snapshots = Self {
            repo,
            git_dir,
            worktree,
            max_untracked: MAX_UNTRACKED_BYTES,
            user_index,
            skip: std::sync::Arc::new(meta::DEFAULT_SKIP.iter().map(Into::into).collect()),
            gitlinks: BTreeSet::new(),
            overlay: BTreeMap::new(),
            cached: std::sync::Mutex::new(None),
        };
        if let Ok(index) = snapshots.index() {
            snapshots.gitlinks = index
                .iter()
                .filter(|e| e.mode == 0o160000)
                .map(|e| e.path)
                .collect();
        }
        Ok(snapshots)
    }

    pub fn git_dir(&self) -> &Path {
        &self.git_dir
    }

    pub fn worktree(&self) -> &Path {
        &self.worktree
    }

    /// The metadata of `rel` in the work tree, without following a symlink anywhere on the
    /// way: a path below a symlinked folder is not in the work tree but somewhere else, so
    /// it is neither read into a snapshot nor written by a revert.
    pub(crate) fn lstat(&self, rel: &Path) -> std::io::Result<std::fs::Metadata> {
        let not_here = || std::io::Error::new(std::io::ErrorKind::NotFound, "not in the tree");
        let bytes = rel.as_os_str().as_bytes();
        for dir in meta::ancestors(bytes) {
            let md = std::fs::symlink_metadata(self.worktree.join(path_of(dir)))?;
            if !md.is_dir() {
                return Err(not_here());
            }
        }
        std::fs::symlink_metadata(self.worktree.join(rel))
    }

    /// Sets the unsaved buffers the next snapshots take instead of the disk.
    pub fn set_overlay(&mut self, buffers: Vec<(PathBuf, String)>) {
        self.overlay = buffers
            .into_iter()
            .filter_map(|(p, text)| {
                let rel = p
                    .strip_prefix(&self.worktree)
                    .ok()?
                    .as_os_str()
                    .as_bytes()
                    .to_vec();
                Some((rel, text.into_bytes()))
            })
            .collect();
    }

    pub fn set_max_untracked(&mut self, bytes: u64) {
        self.max_untracked = bytes;
    }

    /// The folder names snapshots do not enter.
    pub fn set_skip<S: AsRef<str>>(&mut self, names: &[S]) {
        self.skip = std::sync::Arc::new(names.iter().map(|n| n.as_ref().into()).collect());
    }

    fn index(&self) -> Result<git2::Index> {
        let path = self.git_dir.join("index");
        match git2::Index::open(&path) {
            Ok(i) => Ok(i),
            Err(_) => {
                // An index this libgit2 cannot read (e.g. a newer format): start empty.
                let _ = std::fs::remove_file(&path);
                Ok(git2::Index::open(&path)?)
            }
        }
    }

    /// Runs `f` on the hidden index (kept in memory; read again when another process wrote
    /// the file). `f` gets the time the file was last written (for racy entries) and returns
    /// its result and whether it changed the index; `persist` writes such changes to disk now,
    /// otherwise they are written with the next persisting call.
    fn with_index<T>(
        &self,
        persist: bool,
        f: impl FnOnce(
            &mut git2::Index,
            Option<std::time::SystemTime>,
            &mut Option<Oid>,
        ) -> Result<(T, bool)>,
    ) -> Result<T> {
        let path = self.git_dir.join("index");
        let mut slot = self.cached.lock().unwrap_or_else(|p| p.into_inner());
        let on_disk = file_stamp(&path);
        let fresh = matches!(slot.as_ref(), Some(c) if c.file == on_disk);
        if !fresh {
            *slot = Some(CachedIndex {
                index: self.index()?,
                file: on_disk,
                dirty: false,
                tree: read_index_tree(&self.git_dir, on_disk),
            });
        }
        let cached = slot.as_mut().expect("loaded above");
        let written = cached.file.map(|(t, _)| t);
        let (out, changed) = f(&mut cached.index, written, &mut cached.tree)?;
        cached.dirty |= changed;
        if persist && cached.dirty {
            cached.index.write()?;
            cached.file = file_stamp(&path);
            cached.dirty = false;
            write_index_tree(&self.git_dir, cached.file, cached.tree);
        }
        Ok(out)
    }

    /// The work tree as snapshots see it: every file and symlink, ignored ones too (a revert
    /// must bring back `.env`), and every folder; never entering `.git`, the agent's own
    /// folder, submodules or the skipped folders, which are only named.
    fn walk(&self) -> Walked {
        let root = self.worktree.clone();
        let gitlinks = self.gitlinks.clone();
        let walk_root = root.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        // In parallel: on a big tree the walk is one stat per file, like `git status`.
        ignore::WalkBuilder::new(&root)
            .standard_filters(false)
            .follow_links(false)
            .filter_entry(move |e| {
                if e.file_name() == ".git" {
                    return false;
                }
                let rel = e.path().strip_prefix(&walk_root).unwrap_or(e.path());
                let rel = rel.as_os_str().as_bytes();
                !meta::is_agent_own(rel) && !gitlinks.contains(rel)
            })
            .build_parallel()
            .run(|| {
                let (tx, root, skip) = (tx.clone(), root.clone(), self.skip.clone());
                Box::new(move |entry| {
                    let Ok(entry) = entry else {
                        return ignore::WalkState::Continue;
                    };
                    let (Some(kind), true) = (entry.file_type(), entry.depth() > 0) else {
                        return ignore::WalkState::Continue;
                    };
                    let rel = entry.path().strip_prefix(&root).unwrap_or(entry.path());
                    let rel = rel.as_os_str().as_bytes().to_vec();
                    let md = std::fs::symlink_metadata(entry.path());
                    if kind.is_dir() && skip.contains(entry.file_name()) {
                        if let Ok(md) = md {
                            let _ = tx.send(Met::Skipped(rel, meta::lost_content(&md)));
                        }
                        return ignore::WalkState::Skip;
                    }
                    match md {
                        Ok(_) if kind.is_dir() => {
                            let _ = tx.send(Met::Dir(rel));
                        }
                        // Regular files and symlinks only: a FIFO or a device would block or
                        // never end when read.
                        Ok(md) if snapshotted(&md) => {
                            let _ = tx.send(Met::File(rel, md));
                        }
                        _ => {}
                    }
                    ignore::WalkState::Continue
                })
            });
        drop(tx);
        let mut walked = Walked::default();
        for met in rx {
            match met {
                Met::File(rel, md) => walked.files.push((rel, md)),
                Met::Dir(rel) => walked.dirs.push(rel),
                Met::Skipped(rel, content) => walked.lost.push((rel, content)),
            }
        }
        walked
    }

    /// Takes a snapshot of the whole work tree; returns its tree id.
    pub fn track(&self) -> Result<String> {
        let _lock = Lock::acquire(&self.git_dir)?;
        let Walked {
            mut files,
            dirs,
            mut lost,
        } = self.walk();
        self.with_index(true, |index, index_written, last_tree| {
            let odb = self.repo.odb()?;
            let mut sink = ObjectSink::new(&odb);
            let present = files.iter().map(|(p, md)| (p.as_slice(), md));
            let mut staged =
                self.stage(&mut sink, index, present, index_written, self.max_untracked)?;
            // Entries the walk did not meet: gone, or in a skipped folder although tracked
            // (git keeps those, so does a snapshot). Skipped when every entry was met.
            let metas = meta_entries(index).len();
            if staged.matched + self.gitlinks.len() + metas < index.len() {
                let seen: BTreeSet<&[u8]> = files.iter().map(|(p, _)| p.as_slice()).collect();
                let unseen: Vec<Vec<u8>> = index
                    .iter()
                    .filter(|e| e.mode != 0o160000 && !meta::is_meta(&e.path))
                    .filter(|e| !seen.contains(e.path.as_slice()))
                    .map(|e| e.path)
                    .collect();
                files.clear();
                for path in unseen {
                    let rel = Path::new(std::ffi::OsStr::from_bytes(&path));
                    match self.lstat(rel) {
                        Ok(md) if snapshotted(&md) => files.push((path, md)),
                        _ => {
                            index.remove_path(rel)?;
                            staged.changed.push(path);
                            staged.updated += 1;
                        }
                    }
                }
                let kept = files.iter().map(|(p, md)| (p.as_slice(), md));
                staged.merge(self.stage(
                    &mut sink,
                    index,
                    kept,
                    index_written,
                    self.max_untracked,
                )?);
            }
            // What a tree cannot hold: empty folders, and what is not snapshotted.
            lost.append(&mut staged.over_cap);
            let mut wanted: BTreeMap<Vec<u8>, Vec<u8>> = lost
                .into_iter()
                .map(|(rel, content)| (meta::lost_entry(&rel), content))
                .collect();
            for dir in dirs.iter().filter(|d| !holds_files(index, d)) {
                wanted.insert(meta::dir_entry(dir), Vec::new());
            }
            let old: BTreeSet<Vec<u8>> = meta_entries(index)
                .into_iter()
                .filter(|e| e != meta::GIT_INDEX.as_bytes())
                .collect();
            set_meta(&mut sink, index, &mut staged, old, wanted)?;
            self.stage_user_index(&mut sink, index, &mut staged)?;
            let tree = self.snapshot_tree(index, last_tree, &staged.changed, &mut sink)?;
            Ok((tree.to_string(), staged.updated > 0))
        })
    }

    /// Takes a snapshot after changes to `paths` alone (relative to the work tree), as after
    /// a step whose only writes the server made itself. The index is written to disk with
    /// the next full snapshot, not now: this path is meant to cost next to nothing.
    pub fn track_paths(&self, paths: &[PathBuf]) -> Result<String> {
        let _lock = Lock::acquire(&self.git_dir)?;
        let paths: Vec<&PathBuf> = paths
            .iter()
            .filter(|p| !meta::is_agent_own(p.as_os_str().as_bytes()))
            .collect();
        self.with_index(false, |index, _, last_tree| {
            let mut present = Vec::new();
            let mut staged = Staged::default();
            for rel in &paths {
                match self.lstat(rel) {
                    Ok(md) if snapshotted(&md) => {
                        present.push((rel.as_os_str().as_bytes().to_vec(), md))
                    }
                    _ => {
                        if index.remove_path(rel).is_ok() {
                            staged.changed.push(rel.as_os_str().as_bytes().to_vec());
                            staged.updated += 1;
                        }
                    }
                }
            }
            let odb = self.repo.odb()?;
            let mut sink = ObjectSink::new(&odb);
            let files = present.iter().map(|(p, md)| (p.as_slice(), md));
            staged.merge(self.stage(&mut sink, index, files, None, self.max_untracked)?);
            // The meta entries these paths and the folders above them concern.
            let mut old = BTreeSet::new();
            let mut wanted = BTreeMap::new();
            for rel in &paths {
                let rel = rel.as_os_str().as_bytes();
                old.insert(meta::lost_entry(rel));
                for dir in std::iter::once(rel).chain(meta::ancestors(rel)) {
                    let entry = meta::dir_entry(dir);
                    old.insert(entry.clone());
                    let full = self
                        .worktree
                        .join(Path::new(std::ffi::OsStr::from_bytes(dir)));
                    if full.is_dir() && !full.is_symlink() && !holds_files(index, dir) {
                        wanted.insert(entry, Vec::new());
                    }
                }
            }
            old.retain(|e| {
                index
                    .get_path(Path::new(std::ffi::OsStr::from_bytes(e)), 0)
                    .is_some()
            });
            for (rel, content) in std::mem::take(&mut staged.over_cap) {
                wanted.insert(meta::lost_entry(&rel), content);
            }
            set_meta(&mut sink, index, &mut staged, old, wanted)?;
            let tree = self.snapshot_tree(index, last_tree, &staged.changed, &mut sink)?;
            Ok((tree.to_string(), staged.updated > 0))
        })
    }

    /// The tree of the index after `changed` paths changed: the last tree itself when
    /// nothing did, the last tree edited for those paths alone when few did (only their
    /// folders' trees are written), else every tree rebuilt from the index. Flushes `sink`.
    fn snapshot_tree(
        &self,
        index: &mut git2::Index,
        last_tree: &mut Option<Oid>,
        changed: &[Vec<u8>],
        sink: &mut ObjectSink<'_, '_>,
    ) -> Result<Oid> {
        let base = last_tree.and_then(|id| self.repo.find_tree(id).ok());
        let tree = match base {
            Some(base) if changed.is_empty() => {
                sink.flush()?;
                base.id()
            }
            Some(base) if changed.len() <= TREE_EDIT_MAX => {
                // libgit2 checks that the blobs exist.
                sink.flush()?;
                let mut update = git2::build::TreeUpdateBuilder::new();
                for rel in changed {
                    let path = Path::new(std::ffi::OsStr::from_bytes(rel));
                    match index.get_path(path, 0) {
                        Some(e) => {
                            let mode = match e.mode {
                                0o100755 => git2::FileMode::BlobExecutable,
                                0o120000 => git2::FileMode::Link,
                                _ => git2::FileMode::Blob,
                            };
                            update.upsert(rel, e.id, mode);
                        }
                        None if base.get_path(path).is_ok() => {
                            update.remove(rel);
                        }
                        None => {}
                    }
                }
                // A folder that became a file (or the reverse) is beyond a tree edit: then
                // every tree is built from the index.
                match update.create_updated(&self.repo, &base) {
                    Ok(id) => id,
                    Err(_) => index.write_tree_to(&self.repo)?,
                }
            }
            // Many new objects: the trees join the blobs in the pack.
            _ if sink.is_packing() => {
                let id = pack::write_index_trees(index, sink)?;
                sink.flush()?;
                id
            }
            // Otherwise libgit2, which reuses the trees the index has cached (a copy of the
            // user's index comes with them).
            _ => {
                sink.flush()?;
                index.write_tree_to(&self.repo)?
            }
        };
        *last_tree = Some(tree);
        Ok(tree)
    }

    /// Stages `files` (relative path, metadata) into the index, their new blobs into `sink`;
    /// a file without an entry over `cap` bytes is left out (and listed as such).
    fn stage<'a>(
        &self,
        sink: &mut ObjectSink<'_, '_>,
        index: &mut git2::Index,
        files: impl Iterator<Item = (&'a [u8], &'a std::fs::Metadata)>,
        index_written: Option<std::time::SystemTime>,
        cap: u64,
    ) -> Result<Staged> {
        let mut out = Staged::default();
        for (rel, md) in files {
            let path = Path::new(std::ffi::OsStr::from_bytes(rel));
            let mode = entry_mode(md);
            let existing = index.get_path(path, 0);
            out.matched += usize::from(existing.is_some());
            if let Some(text) = self.overlay.get(rel)
                && md.is_file()
            {
                // An unsaved buffer: its text, with no stat data, so that the next snapshot
                // looks at the file again.
                let id = sink.add(ObjectType::Blob, text)?;
                out.add(existing.as_ref(), rel, id, mode);
                index.add(&index_entry(rel, mode, id, text.len(), None))?;
                continue;
            }
            // "Racily clean": modified in the same instant the index was written.
            let racy = index_written.is_some_and(|t| md.modified().map(|m| m >= t).unwrap_or(true));
            if let Some(e) = &existing
                && !racy
                && e.mtime == mtime(md)
                && e.file_size == md.len() as u32
                && e.ino == md.ino() as u32
                && e.mode == mode
            {
                continue;
            }
            if existing.is_none() && md.is_file() && md.len() > cap {
                out.over_cap.push((rel.to_vec(), meta::lost_content(md)));
                continue;
            }
            let data = if md.file_type().is_symlink() {
                std::fs::read_link(self.worktree.join(path))?
                    .as_os_str()
                    .as_bytes()
                    .to_vec()
            } else {
                match std::fs::read(self.worktree.join(path)) {
                    Ok(d) => d,
                    Err(_) => continue, // vanished or unreadable since the walk
                }
            };
            let id = sink.add(ObjectType::Blob, &data)?;
            out.add(existing.as_ref(), rel, id, mode);
            index.add(&index_entry(rel, mode, id, md.len() as usize, Some(md)))?;
        }
        Ok(out)
    }

    fn tree(&self, id: &str) -> Result<git2::Tree<'_>> {
        let oid = Oid::from_str(id)
            .map_err(|_| SnapshotError::Other(format!("not a snapshot id: {id}")))?;
        Ok(self.repo.find_tree(oid)?)
    }

    /// Files that differ between two snapshots (`to` = the work tree now). A rename is its
    /// two sides, a deletion and an addition: a revert must see both. Meta entries are
    /// listed too (see [`meta`]).
    pub fn changed(&self, from: &str, to: Option<&str>) -> Result<Vec<FileChange>> {
        let to = match to {
            Some(t) => t.to_string(),
            None => self.track()?,
        };
        let (a, b) = (self.tree(from)?, self.tree(&to)?);
        let diff = self.repo.diff_tree_to_tree(Some(&a), Some(&b), None)?;
        let mut out = Vec::new();
        for (i, delta) in diff.deltas().enumerate() {
            let path = delta
                .new_file()
                .path()
                .or_else(|| delta.old_file().path())
                .map(|p| p.to_string_lossy().into_owned())
                .unwrap_or_default();
            let status = match delta.status() {
                git2::Delta::Added => "added",
                git2::Delta::Deleted => "deleted",
                _ => "modified",
            };
            let (mut additions, mut deletions, mut binary) = (0, 0, delta.flags().is_binary());
            if let Ok(Some(patch)) = git2::Patch::from_diff(&diff, i) {
                if let Ok((_, add, del)) = patch.line_stats() {
                    additions = add;
                    deletions = del;
                }
                binary |= patch.delta().flags().is_binary();
            }
            out.push(FileChange {
                path,
                status: status.into(),
                additions,
                deletions,
                binary,
            });
        }
        Ok(out)
    }

    /// Unified diff text between two snapshots (`to` = the work tree now), meta entries left
    /// out.
    pub fn diff(&self, from: &str, to: Option<&str>) -> Result<String> {
        let to = match to {
            Some(t) => t.to_string(),
            None => self.track()?,
        };
        let (a, b) = (self.tree(from)?, self.tree(&to)?);
        let diff = self.repo.diff_tree_to_tree(Some(&a), Some(&b), None)?;
        let mut out = String::new();
        diff.print(git2::DiffFormat::Patch, |delta, _, line| {
            let path = delta.new_file().path().or_else(|| delta.old_file().path());
            if path.is_some_and(|p| meta::is_meta(p.as_os_str().as_bytes())) {
                return true;
            }
            if matches!(line.origin(), '+' | '-' | ' ') {
                out.push(line.origin());
            }
            out.push_str(&String::from_utf8_lossy(line.content()));
            true
        })?;
        Ok(out)
    }

    /// What bringing the work tree to snapshot `id` means: only the paths that differ.
    pub fn restore_plan(&self, id: &str) -> Result<Vec<FileTarget>> {
        let now = self.track()?;
        let listed: Vec<String> = self
            .changed(&now, Some(id))?
            .into_iter()
            .map(|c| c.path)
            .collect();
        let paths = real_paths(listed.iter().map(String::as_str));
        self.restore_plan_of(id, &paths)
    }

    /// A snapshot of `paths` and the folders above them alone, as they are now (the editor's
    /// buffers included): what a revert saves for redo. No index is read or written, so the
    /// cost does not grow with the work tree.
    pub fn capture(&self, paths: &[PathBuf]) -> Result<String> {
        let mut present = Vec::new();
        let mut dirs = Vec::new();
        for rel in restore::closure(paths) {
            let Ok(md) = self.lstat(&rel) else {
                continue;
            };
            let rel = rel.as_os_str().as_bytes().to_vec();
            if snapshotted(&md) {
                present.push((rel, md));
            } else if md.is_dir() {
                dirs.push(rel);
            }
        }
        let mut index = git2::Index::new()?;
        let odb = self.repo.odb()?;
        let mut sink = ObjectSink::new(&odb);
        let files = present.iter().map(|(p, md)| (p.as_slice(), md));
        let mut staged = self.stage(&mut sink, &mut index, files, None, u64::MAX)?;
        let mut wanted: BTreeMap<Vec<u8>, Vec<u8>> = dirs
            .iter()
            .filter(|d| !holds_files(&index, d))
            .map(|d| (meta::dir_entry(d), Vec::new()))
            .collect();
        if paths.iter().any(|p| p == Path::new(meta::GIT_INDEX))
            && let Some(tree) = self.user_index_now()
        {
            wanted.insert(meta::GIT_INDEX.into(), tree);
        }
        set_meta(&mut sink, &mut index, &mut staged, BTreeSet::new(), wanted)?;
        sink.flush()?;
        Ok(index.write_tree_to(&self.repo)?.to_string())
    }

    /// Reverts the paths of `patches` on disk (see [`Snapshots::revert_plan`]); returns the
    /// plan carried out and what was left.
    pub fn revert(&self, patches: &[Patch]) -> Result<(RevertPlan, Vec<Unrestored>)> {
        let plan = self.revert_plan(patches)?;
        let left = self.apply(&plan.targets)?;
        Ok((plan, left))
    }

    /// Brings the work tree to snapshot `id`, touching only the paths that differ.
    pub fn restore(&self, id: &str) -> Result<Vec<String>> {
        let plan = self.restore_plan(id)?;
        self.apply(&plan)?;
        Ok(plan.iter().map(FileTarget::display).collect())
    }

    /// The content of `path` in snapshot `id`, if it exists there.
    pub fn file_at(&self, id: &str, path: &str) -> Result<Option<Vec<u8>>> {
        let tree = self.tree(id)?;
        match tree.get_path(Path::new(path)) {
            Ok(e) => Ok(Some(self.repo.find_blob(e.id())?.content().to_vec())),
            Err(_) => Ok(None),
        }
    }

    /// The loose objects of the hidden repository (not those reached through alternates).
    fn loose_objects(&self) -> Vec<(Oid, PathBuf)> {
        let mut out = Vec::new();
        let Ok(dirs) = std::fs::read_dir(self.git_dir.join("objects")) else {
            return out;
        };
        for dir in dirs.flatten() {
            let prefix = dir.file_name().to_string_lossy().into_owned();
            if prefix.len() != 2 || !prefix.chars().all(|c| c.is_ascii_hexdigit()) {
                continue;
            }
            for file in std::fs::read_dir(dir.path())
                .into_iter()
                .flatten()
                .flatten()
            {
                let name = file.file_name().to_string_lossy().into_owned();
                if let Ok(oid) = Oid::from_str(&format!("{prefix}{name}")) {
                    out.push((oid, file.path()));
                }
            }
        }
        out
    }

    /// Packs the loose objects into one pack once there are many of them (a big first
    /// snapshot would otherwise leave one file per object).
    pub fn pack_if_many(&self, threshold: usize) -> Result<usize> {
        let loose = self.loose_objects();
        if loose.len() < threshold {
            return Ok(0);
        }
        let _lock = Lock::acquire(&self.git_dir)?;
        let odb = self.repo.odb()?;
        let mut pack = pack::PackStream::default();
        for (oid, _) in &loose {
            let object = odb.read(*oid)?;
            pack.push(object.kind(), object.data())?;
            if pack.len() >= pack::PACK_FLUSH_BYTES {
                pack.write_to(&odb)?;
            }
        }
        pack.write_to(&odb)?;
        for (_, path) in &loose {
            let _ = std::fs::remove_file(path);
        }
        Ok(loose.len())
    }

    /// Removes loose objects older than `min_age` that no snapshot in `keep` (and no entry of
    /// the hidden index) reaches. Returns how many were removed.
    pub fn gc(&self, keep: &BTreeSet<String>, min_age: std::time::Duration) -> Result<usize> {
        let _lock = Lock::acquire(&self.git_dir)?;
        let mut reachable: BTreeSet<Oid> = BTreeSet::new();
        for id in keep {
            let Ok(tree) = self.tree(id) else { continue };
            reachable.insert(tree.id());
            tree.walk(git2::TreeWalkMode::PreOrder, |_, entry| {
                reachable.insert(entry.id());
                git2::TreeWalkResult::Ok
            })?;
        }
        self.with_index(false, |index, _, _| {
            reachable.extend(index.iter().map(|e| e.id));
            Ok(((), false))
        })?;
        let now = std::time::SystemTime::now();
        let mut removed = 0;
        for (oid, path) in self.loose_objects() {
            let old = std::fs::metadata(&path)
                .and_then(|m| m.modified())
                .map(|t| now.duration_since(t).unwrap_or_default() >= min_age)
                .unwrap_or(false);
            if old && !reachable.contains(&oid) && std::fs::remove_file(&path).is_ok() {
                removed += 1;
            }
        }
        Ok(removed)
    }

    /// (bytes on disk, loose objects, packs) of the hidden repository itself.
    pub fn stats(&self) -> Result<(u64, usize, usize)> {
        let mut size = 0;
        let mut packs = 0;
        for entry in ignore::WalkBuilder::new(&self.git_dir)
            .standard_filters(false)
            .build()
            .flatten()
        {
            if let Ok(md) = entry.metadata()
                && md.is_file()
            {
                size += md.len();
                if entry.path().extension().is_some_and(|e| e == "pack") {
                    packs += 1;
                }
            }
        }
        Ok((size, self.loose_objects().len(), packs))
    }
}

#[cfg(test)]
mod proptests;
#[cfg(test)]
mod tests;
