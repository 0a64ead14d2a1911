//! What the user's own git repository says — branch, uncommitted files, commits ahead of
//! upstream, HEAD — for the state block. Read only: nothing here writes to `.git` (status
//! does not refresh the index on disk).

use std::path::Path;

/// A repository's state at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepoStatus {
    /// The branch, or `detached at <short hash>`.
    pub branch: String,
    /// Changed, staged or untracked files (untracked folders count once).
    pub uncommitted: usize,
    /// Commits on the branch not on its upstream (0 without one).
    pub ahead: usize,
    /// HEAD: (short hash, summary line).
    pub head: Option<(String, String)>,
}

impl RepoStatus {
    /// The state block's line.
    pub fn line(&self) -> String {
        format!(
            "Git: {}, {} uncommitted, {} ahead",
            self.branch, self.uncommitted, self.ahead
        )
    }
}

/// The status of the repository `workspace` is in; `None` when it is in none.
pub fn read(workspace: &Path) -> Option<RepoStatus> {
    let repo = git2::Repository::discover(workspace).ok()?;
    if repo.is_bare() {
        return None;
    }
    let head = repo.head().ok();
    let commit = head.as_ref().and_then(|h| h.peel_to_commit().ok());
    let short = |c: &git2::Commit<'_>| c.id().to_string()[..7].to_string();
    let branch = match &head {
        Some(h) if h.is_branch() => h.shorthand().unwrap_or("HEAD").to_string(),
        Some(_) => format!(
            "detached at {}",
            commit.as_ref().map(short).unwrap_or_default()
        ),
        None => "no commits yet".to_string(),
    };
    let mut options = git2::StatusOptions::new();
    options
        .include_untracked(true)
        .recurse_untracked_dirs(false)
        .exclude_submodules(true)
        .include_ignored(false);
    let uncommitted = repo
        .statuses(Some(&mut options))
        .map(|s| s.len())
        .unwrap_or(0);
    let ahead = head
        .as_ref()
        .filter(|h| h.is_branch())
        .and_then(|h| {
            let local = h.target()?;
            let name = h.shorthand().ok()?;
            let branch = repo.find_branch(name, git2::BranchType::Local).ok()?;
            let upstream = branch.upstream().ok()?.get().target()?;
            repo.graph_ahead_behind(local, upstream)
                .ok()
                .map(|(a, _)| a)
        })
        .unwrap_or(0);
    Some(RepoStatus {
        branch,
        uncommitted,
        ahead,
        head: commit.map(|c| {
            (
                short(&c),
                c.summary().ok().flatten().unwrap_or("").to_string(),
            )
        }),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn git(dir: &Path, args: &[&str]) {
        let out = std::process::Command::new("git")
            .args(args)
            .current_dir(dir)
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@t")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@t")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    #[test]
    fn branch_changes_and_commits_ahead_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        assert_eq!(read(d), None);
        git(d, &["init", "-q", "-b", "main"]);
        std::fs::write(d.join("a.txt"), "a").unwrap();
        git(d, &["add", "."]);
        git(d, &["commit", "-qm", "first"]);
        git(d, &["branch", "-q", "base"]);
        git(d, &["branch", "-q", "--set-upstream-to=base"]);
        std::fs::write(d.join("b.txt"), "b").unwrap();
        git(d, &["add", "."]);
        git(d, &["commit", "-qm", "second commit"]);
        std::fs::write(d.join("a.txt"), "changed").unwrap();
        std::fs::create_dir_all(d.join("new/deep")).unwrap();
        std::fs::write(d.join("new/deep/c.txt"), "c").unwrap();
        let index_before = std::fs::read(d.join(".git/index")).unwrap();
        let s = read(d).unwrap();
        assert_eq!(s.line(), "Git: main, 2 uncommitted, 1 ahead");
        assert_eq!(s.head.as_ref().unwrap().1, "second commit");
        assert_eq!(std::fs::read(d.join(".git/index")).unwrap(), index_before);
    }
}
