//! The user's staging area in a snapshot: `git mv`, `git add` and `git rm` run by the agent
//! change `.git/index`, and an undo must take that back too, or `git status` shows a rename
//! that the work tree no longer has.
//!
//! A snapshot holds the *tree of the user's index* (what is staged, not the file's bytes,
//! which git rewrites whenever it refreshes its stat cache) as the meta entry
//! [`meta::GIT_INDEX`]. Its index entry carries the stat data of `.git/index`, so an
//! unchanged staging area costs one `stat`. Restoring it resets the user's index to that
//! tree through libgit2 (which takes git's own `index.lock`). Nothing else in `.git` is ever
//! written, and the index only by a revert of a turn that changed it.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

use git2::{ObjectType, Oid};

use super::pack::ObjectSink;
use super::{Result, Snapshots, Staged, index_entry, meta};

/// The content of the meta entry when the repository has no index file yet.
const NO_INDEX: &[u8] = b"none";

impl Snapshots {
    /// What the user's staging area holds now: its tree id, [`NO_INDEX`], or `None` when the
    /// workspace is not in a git repository (or its index cannot be read as a tree, e.g.
    /// during a merge with conflicts).
    pub(super) fn user_index_now(&self) -> Option<Vec<u8>> {
        let path = self.user_index.as_ref()?;
        if !path.exists() {
            return Some(NO_INDEX.to_vec());
        }
        let mut index = git2::Index::open(path).ok()?;
        let tree = index.write_tree_to(&self.repo).ok()?;
        Some(tree.to_string().into_bytes())
    }

    /// Brings the meta entry of the user's staging area up to date in the hidden `index`.
    pub(super) fn stage_user_index(
        &self,
        sink: &mut ObjectSink<'_, '_>,
        index: &mut git2::Index,
        staged: &mut Staged,
    ) -> Result<()> {
        let Some(path) = &self.user_index else {
            return Ok(());
        };
        let entry = Path::new(meta::GIT_INDEX);
        let existing = index.get_path(entry, 0);
        let md = std::fs::metadata(path).ok();
        let unchanged = match (&existing, &md) {
            (Some(e), Some(md)) => {
                e.mtime.seconds() == md.mtime() as i32
                    && e.mtime.nanoseconds() == md.mtime_nsec() as u32
                    && e.file_size == md.len() as u32
                    && e.ino == md.ino() as u32
            }
            _ => false,
        };
        if unchanged {
            return Ok(());
        }
        let Some(content) = self.user_index_now() else {
            // Unreadable as a tree: no entry, so a revert leaves the index alone.
            if existing.is_some() {
                index.remove_path(entry)?;
                staged.changed.push(meta::GIT_INDEX.into());
                staged.updated += 1;
            }
            return Ok(());
        };
        let id = sink.add(ObjectType::Blob, &content)?;
        staged.add(existing.as_ref(), meta::GIT_INDEX.as_bytes(), id, 0o100644);
        let entry = index_entry(
            meta::GIT_INDEX.as_bytes(),
            0o100644,
            id,
            content.len(),
            md.as_ref(),
        );
        index.add(&entry)?;
        Ok(())
    }

    /// Resets the user's staging area to what `content` (a meta entry's) holds.
    pub(super) fn reset_user_index(&self, content: &[u8]) -> std::io::Result<()> {
        let Some(path) = &self.user_index else {
            return Err(std::io::Error::other(
                "the workspace is not in a git repository",
            ));
        };
        let err = |e: git2::Error| std::io::Error::other(e.message().to_string());
        if content == NO_INDEX {
            return std::fs::remove_file(path);
        }
        let text = std::str::from_utf8(content).map_err(std::io::Error::other)?;
        let tree = Oid::from_str(text.trim()).map_err(err)?;
        let tree = self.repo.find_tree(tree).map_err(err)?;
        let mut index = git2::Index::open(path).map_err(err)?;
        index.read_tree(&tree).map_err(err)?;
        index.write().map_err(err)
    }
}
