//! What a git tree cannot hold, kept in the snapshot as entries of its own.
//!
//! Git trees have no empty folders and a snapshot does not hold everything (skipped folders
//! such as `node_modules`, files over the size cap). So that a revert can bring back an empty
//! folder and name what it cannot bring back, a snapshot carries *meta entries* under
//! [`PREFIX`], a folder the walk never enters (the agent's own `.agent-lsp/`):
//!
//! - `PREFIX/dir/<path>`: a folder that holds no snapshotted file (an empty blob);
//! - `PREFIX/lost/<path>`: a path that exists but is not snapshotted, with its kind, size and
//!   modification time as content, so a turn that changes it shows as a change.
//!
//! `<path>` is the relative path with `%` and `/` escaped, so every meta entry is one flat
//! name and folders and files never collide inside the meta folder.

use std::os::unix::fs::MetadataExt;

use crate::paths::WORKSPACE_DIR as AGENT_DIR;

/// Where the meta entries live in a snapshot tree.
pub const PREFIX: &str = ".agent-lsp/.snapshot/";
const DIR: &str = ".agent-lsp/.snapshot/dir/";
/// The user's staging area (see `user_index.rs`): a pseudo-path whose state is the tree
/// of `.git/index`.
pub const GIT_INDEX: &str = ".agent-lsp/.snapshot/git-index";
const LOST: &str = ".agent-lsp/.snapshot/lost/";

/// What a listed snapshot path stands for.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub enum Meaning {
    /// A file or symlink at this path.
    File(Vec<u8>),
    /// A folder at this path that holds no snapshotted file.
    Dir(Vec<u8>),
    /// A path the snapshots do not hold (a skipped folder, a file over the cap).
    Lost(Vec<u8>),
    /// The user's staging area.
    GitIndex,
}

impl Meaning {
    pub fn path(&self) -> &[u8] {
        match self {
            Self::File(p) | Self::Dir(p) | Self::Lost(p) => p,
            Self::GitIndex => GIT_INDEX.as_bytes(),
        }
    }
}

fn escape(rel: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(rel.len());
    for &b in rel {
        match b {
            b'%' => out.extend_from_slice(b"%25"),
            b'/' => out.extend_from_slice(b"%2F"),
            _ => out.push(b),
        }
    }
    out
}

fn unescape(name: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(name.len());
    let mut i = 0;
    while i < name.len() {
        match &name[i..] {
            [b'%', b'2', b'5', ..] => (out.push(b'%'), i += 3).1,
            [b'%', b'2', b'F', ..] => (out.push(b'/'), i += 3).1,
            _ => (out.push(name[i]), i += 1).1,
        }
    }
    out
}

/// The meta entry of an empty folder.
pub fn dir_entry(rel: &[u8]) -> Vec<u8> {
    [DIR.as_bytes(), &escape(rel)].concat()
}

/// The meta entry of a path that is not snapshotted.
pub fn lost_entry(rel: &[u8]) -> Vec<u8> {
    [LOST.as_bytes(), &escape(rel)].concat()
}

/// What the content of a lost entry records: enough to see that the path changed.
pub fn lost_content(md: &std::fs::Metadata) -> Vec<u8> {
    let kind = if md.is_dir() { "folder" } else { "file" };
    format!("{kind} {} {}.{}", md.len(), md.mtime(), md.mtime_nsec()).into_bytes()
}

/// Whether a snapshot path is a meta entry.
pub fn is_meta(rel: &[u8]) -> bool {
    rel.starts_with(PREFIX.as_bytes())
}

/// Whether a relative path belongs to the agent's own folder (`.agent-lsp`: its memory and
/// state are not work a revert takes back; never snapshotted as files).
pub fn is_agent_own(rel: &[u8]) -> bool {
    rel == AGENT_DIR.as_bytes()
        || (rel.starts_with(AGENT_DIR.as_bytes()) && rel.get(AGENT_DIR.len()) == Some(&b'/'))
}

/// What a snapshot path stands for.
pub fn meaning(snapshot_path: &[u8]) -> Meaning {
    if let Some(rest) = snapshot_path.strip_prefix(DIR.as_bytes()) {
        Meaning::Dir(unescape(rest))
    } else if snapshot_path == GIT_INDEX.as_bytes() {
        Meaning::GitIndex
    } else if let Some(rest) = snapshot_path.strip_prefix(LOST.as_bytes()) {
        Meaning::Lost(unescape(rest))
    } else {
        Meaning::File(snapshot_path.to_vec())
    }
}

/// The folders above `rel`, nearest first (`a/b/c` → `a/b`, `a`).
pub fn ancestors(rel: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut end = rel.len();
    std::iter::from_fn(move || {
        let cut = rel[..end].iter().rposition(|&b| b == b'/')?;
        end = cut;
        Some(&rel[..cut])
    })
}

/// The folder names a snapshot does not enter unless configured otherwise: dependencies,
/// build output and caches, which a revert could not usefully bring back and which would
/// make every snapshot slow.
pub const DEFAULT_SKIP: &[&str] = &[
    "node_modules",
    "target",
    ".venv",
    "venv",
    "__pycache__",
    "dist",
    "build",
    ".cache",
    ".next",
    ".nuxt",
    ".gradle",
    ".tox",
    ".mypy_cache",
    ".pytest_cache",
    ".ruff_cache",
    ".terraform",
    ".direnv",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_round_trip_and_stay_flat() {
        for rel in ["a", "a/b c/日本", "100%/x%2F", "%"] {
            let d = dir_entry(rel.as_bytes());
            assert!(is_meta(&d));
            assert!(!d[DIR.len()..].contains(&b'/'), "flat: {rel}");
            assert_eq!(meaning(&d), Meaning::Dir(rel.as_bytes().to_vec()));
            let l = lost_entry(rel.as_bytes());
            assert_eq!(meaning(&l), Meaning::Lost(rel.as_bytes().to_vec()));
        }
        assert_eq!(meaning(b"src/x"), Meaning::File(b"src/x".to_vec()));
        assert!(is_agent_own(b".agent-lsp/memory/x") && is_agent_own(b".agent-lsp"));
        assert!(!is_agent_own(b".agent-lspx"));
        let up: Vec<&[u8]> = ancestors(b"a/b/c").collect();
        assert_eq!(up, vec![&b"a/b"[..], &b"a"[..]]);
    }
}
