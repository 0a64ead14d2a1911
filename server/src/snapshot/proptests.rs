//! Undo, redo and revert restore the work tree exactly, for random sequences of every kind of
//! change a turn can make. The calls are the ones the agent's session revert makes
//! (`agent/revert.rs`): `track` at a step's start, `track` or `track_paths` after it, the
//! patch from `changed`; to stage, `restore_plan_of` the previous staged state, `capture`,
//! `revert_plan` and `apply`; to redo, `restore_plan_of` the captured state.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use proptest::prelude::*;

use super::*;

/// What a path is, for comparing trees: everything `exactly` covers.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Node {
    Dir,
    File(Vec<u8>, bool),
    Link(PathBuf),
}

/// The work tree without `.git` and the agent's own folder, and in a git repository what
/// `git status` says (the staging area included).
fn tree(root: &Path) -> BTreeMap<PathBuf, Node> {
    let mut out = BTreeMap::new();
    if root.join(".git").exists() {
        let status = std::process::Command::new("git")
            .args([
                "status",
                "--porcelain",
                "--ignored",
                "--untracked-files=all",
            ])
            .current_dir(root)
            .output()
            .unwrap();
        out.insert(
            PathBuf::from("(git status)"),
            Node::File(status.stdout, false),
        );
    }
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for e in std::fs::read_dir(&dir).unwrap().flatten() {
            let p = e.path();
            let rel = p.strip_prefix(root).unwrap().to_path_buf();
            if rel == Path::new(".git") || rel == Path::new(".agent-lsp") {
                continue;
            }
            let md = std::fs::symlink_metadata(&p).unwrap();
            let node = if md.file_type().is_symlink() {
                Node::Link(std::fs::read_link(&p).unwrap())
            } else if md.is_dir() {
                stack.push(p.clone());
                Node::Dir
            } else {
                let exec = md.permissions().mode() & 0o111 != 0;
                Node::File(std::fs::read(&p).unwrap(), exec)
            };
            out.insert(rel, node);
        }
    }
    out
}

const NAMES: &[&str] = &["a", "b c", "日本", "x.env"];

/// A path of depth one or two from the name table.
fn path(i: usize, j: usize) -> PathBuf {
    let first = NAMES[i % NAMES.len()];
    match j % 3 {
        0 => PathBuf::from(first),
        _ => Path::new(first).join(NAMES[j % NAMES.len()]),
    }
}

#[derive(Debug, Clone)]
enum Op {
    Write(usize, usize, u8),
    Delete(usize, usize),
    Rename(usize, usize, usize, usize),
    Mkdir(usize, usize),
    RemoveTree(usize),
    Chmod(usize, usize),
    Symlink(usize, usize, usize),
    FileToDir(usize, usize, u8),
    /// `git add -A` of a path (in a git repository).
    Stage(usize, usize),
    /// `git mv` (in a git repository, of a tracked file).
    GitMv(usize, usize, usize, usize),
}

fn op() -> impl Strategy<Value = Op> {
    let ix = 0..12usize;
    prop_oneof![
        3 => (ix.clone(), ix.clone(), any::<u8>()).prop_map(|(i, j, c)| Op::Write(i, j, c)),
        2 => (ix.clone(), ix.clone()).prop_map(|(i, j)| Op::Delete(i, j)),
        3 => (ix.clone(), ix.clone(), ix.clone(), ix.clone())
            .prop_map(|(a, b, c, d)| Op::Rename(a, b, c, d)),
        1 => (ix.clone(), ix.clone()).prop_map(|(i, j)| Op::Mkdir(i, j)),
        1 => ix.clone().prop_map(Op::RemoveTree),
        1 => (ix.clone(), ix.clone()).prop_map(|(i, j)| Op::Chmod(i, j)),
        1 => (ix.clone(), ix.clone(), ix.clone()).prop_map(|(i, j, k)| Op::Symlink(i, j, k)),
        1 => (ix.clone(), ix.clone(), any::<u8>()).prop_map(|(i, j, c)| Op::FileToDir(i, j, c)),
        1 => (ix.clone(), ix.clone()).prop_map(|(i, j)| Op::Stage(i, j)),
        1 => (ix.clone(), ix.clone(), ix.clone(), ix).prop_map(|(a, b, c, d)| Op::GitMv(a, b, c, d)),
    ]
}

/// Carries out `op` where it makes sense in the tree as it is (else nothing); returns the
/// paths a tool would report, or `None` when only a full scan can see the change.
fn apply_op(root: &Path, op: &Op) -> Option<Vec<PathBuf>> {
    let md = |p: &Path| std::fs::symlink_metadata(root.join(p)).ok();
    let is_file = |p: &Path| md(p).is_some_and(|m| m.is_file());
    let parent_ok = |p: &Path| {
        p.parent()
            .is_none_or(|d| d.as_os_str().is_empty() || md(d).is_none_or(|m| m.is_dir()))
    };
    match *op {
        Op::Write(i, j, c) => {
            let p = path(i, j);
            if md(&p).is_some_and(|m| !m.is_file()) || !parent_ok(&p) {
                return Some(vec![]);
            }
            std::fs::create_dir_all(root.join(&p).parent().unwrap()).unwrap();
            std::fs::write(root.join(&p), [b'v', c, b'\n']).unwrap();
            Some(vec![p])
        }
        Op::Delete(i, j) => {
            let p = path(i, j);
            if md(&p).is_some_and(|m| !m.is_dir()) {
                std::fs::remove_file(root.join(&p)).unwrap();
                return Some(vec![p]);
            }
            Some(vec![])
        }
        Op::Rename(a, b, c, d) => {
            let (from, to) = (path(a, b), path(c, d));
            if !is_file(&from) || md(&to).is_some() || !parent_ok(&to) || to.starts_with(&from) {
                return Some(vec![]);
            }
            std::fs::create_dir_all(root.join(&to).parent().unwrap()).unwrap();
            std::fs::rename(root.join(&from), root.join(&to)).unwrap();
            Some(vec![from, to])
        }
        Op::Mkdir(i, j) => {
            let p = path(i, j);
            if md(&p).is_none() && parent_ok(&p) {
                std::fs::create_dir_all(root.join(&p)).unwrap();
            }
            None
        }
        Op::RemoveTree(i) => {
            let p = PathBuf::from(NAMES[i % NAMES.len()]);
            if md(&p).is_some_and(|m| m.is_dir()) {
                std::fs::remove_dir_all(root.join(&p)).unwrap();
            }
            None
        }
        Op::Chmod(i, j) => {
            let p = path(i, j);
            if is_file(&p) {
                let mode = std::fs::metadata(root.join(&p))
                    .unwrap()
                    .permissions()
                    .mode();
                let new = if mode & 0o111 != 0 { 0o644 } else { 0o755 };
                std::fs::set_permissions(root.join(&p), std::fs::Permissions::from_mode(new))
                    .unwrap();
            }
            None
        }
        Op::Symlink(i, j, k) => {
            let p = path(i, j);
            if md(&p).is_none() && parent_ok(&p) {
                std::fs::create_dir_all(root.join(&p).parent().unwrap()).unwrap();
                std::os::unix::fs::symlink(NAMES[k % NAMES.len()], root.join(&p)).unwrap();
            }
            None
        }
        Op::FileToDir(i, j, c) => {
            // A file (or symlink) replaced by a folder of the same name, or the reverse.
            let p = path(i, j);
            match md(&p) {
                Some(m) if m.is_dir() => {
                    std::fs::remove_dir_all(root.join(&p)).unwrap();
                    std::fs::write(root.join(&p), [b'f', c]).unwrap();
                }
                Some(_) => {
                    std::fs::remove_file(root.join(&p)).unwrap();
                    std::fs::create_dir(root.join(&p)).unwrap();
                    std::fs::write(root.join(&p).join("inner"), [b'i', c]).unwrap();
                }
                None => {}
            }
            None
        }
        Op::Stage(i, j) => {
            let p = path(i, j);
            if root.join(".git").exists() {
                git_quiet(root, &["add", "-A", "--", p.to_str().unwrap()]);
            }
            None
        }
        Op::GitMv(a, b, c, d) => {
            let (from, to) = (path(a, b), path(c, d));
            if root.join(".git").exists() && parent_ok(&to) && md(&to).is_none() {
                std::fs::create_dir_all(root.join(&to).parent().unwrap()).unwrap();
                git_quiet(root, &["mv", from.to_str().unwrap(), to.to_str().unwrap()]);
            }
            None
        }
    }
}

/// Runs git where failing is fine (an untracked source, a path that is not there).
fn git_quiet(root: &Path, args: &[&str]) {
    let _ = std::process::Command::new("git")
        .args(args)
        .current_dir(root)
        .output();
}

/// A revert staged as the agent stages one: the state saved for redo, and the paths changed.
struct Staged {
    saved: String,
    files: Vec<PathBuf>,
}

fn stage(s: &Snapshots, patches: &[Patch], previous: Option<&Staged>) -> Staged {
    let mut touched: std::collections::BTreeSet<PathBuf> =
        real_paths(patches.iter().flat_map(|p| &p.files).map(String::as_str))
            .into_iter()
            .collect();
    if let Some(prev) = previous {
        touched.extend(prev.files.iter().cloned());
        let plan = s.restore_plan_of(&prev.saved, &prev.files).unwrap();
        let left = s.apply(&plan).unwrap();
        assert!(left.is_empty(), "{left:?} of {plan:?}");
    }
    let paths: Vec<PathBuf> = touched.into_iter().collect();
    let saved = s.capture(&paths).unwrap();
    let plan = s.revert_plan(patches).unwrap();
    assert!(plan.conflicts.is_empty(), "{:?}", plan.conflicts);
    assert!(plan.not_restorable.is_empty(), "{:?}", plan.not_restorable);
    let left = s.apply(&plan.targets).unwrap();
    assert!(left.is_empty(), "{left:?} of {:?}", plan.targets);
    Staged {
        saved,
        files: plan.targets.into_iter().map(|t| t.path).collect(),
    }
}

fn redo(s: &Snapshots, staged: &Staged) {
    let plan = s.restore_plan_of(&staged.saved, &staged.files).unwrap();
    let left = s.apply(&plan).unwrap();
    assert!(left.is_empty(), "{left:?} of {plan:?}");
}

/// Turns of steps of operations.
type Session = Vec<Vec<(Vec<Op>, bool)>>;

fn session() -> impl Strategy<Value = Session> {
    let step = (prop::collection::vec(op(), 1..6), any::<bool>());
    prop::collection::vec(prop::collection::vec(step, 1..4), 1..4)
}

fn initial() -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec(op(), 0..8)
}

fn check(with_git: bool, start: &[Op], turns: &Session) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("ws");
    std::fs::create_dir_all(&root).unwrap();
    for o in start {
        apply_op(&root, o);
    }
    if with_git {
        std::fs::write(root.join(".gitignore"), "*.env\n").unwrap();
        super::tests::git(&root, &["init", "-q"]);
        super::tests::git(&root, &["add", "-A"]);
        super::tests::git(&root, &["commit", "-qm", "init", "--allow-empty"]);
    }
    let s = Snapshots::open(&dir.path().join("data"), &root).unwrap();
    let mut before_turn = Vec::new();
    let mut turn_patches: Vec<Vec<Patch>> = Vec::new();
    for steps in turns {
        before_turn.push(tree(&root));
        let mut patches = Vec::new();
        for (n, (ops, reported)) in steps.iter().enumerate() {
            // As the agent: a full snapshot at a turn's first step, the last one after.
            let from = if n == 0 {
                s.track().unwrap()
            } else {
                s.track_paths(&[]).unwrap()
            };
            let mut written = Some(Vec::new());
            for o in ops {
                match (apply_op(&root, o), written.as_mut()) {
                    (Some(paths), Some(w)) => w.extend(paths),
                    _ => written = None,
                }
            }
            let to = match written.filter(|_| *reported) {
                Some(paths) => s.track_paths(&paths).unwrap(),
                None => s.track().unwrap(),
            };
            let files: Vec<String> = s
                .changed(&from, Some(&to))
                .unwrap()
                .into_iter()
                .map(|c| c.path)
                .collect();
            if !files.is_empty() {
                patches.push(Patch {
                    from,
                    to: Some(to),
                    files,
                });
            }
        }
        turn_patches.push(patches);
    }
    let last = tree(&root);

    // Undo every turn, last first, as `undo` does.
    let mut staged: Option<Staged> = None;
    for k in (0..turns.len()).rev() {
        let patches: Vec<Patch> = turn_patches[k..].concat();
        staged = Some(stage(&s, &patches, staged.as_ref()));
        assert_eq!(tree(&root), before_turn[k], "after undoing turn {k}");
    }
    // Redo every turn.
    redo(&s, staged.as_ref().unwrap());
    assert_eq!(tree(&root), last, "after redo");
    // Revert to the middle turn's message, then redo.
    let mid = turns.len() / 2;
    let staged = stage(&s, &turn_patches[mid..].concat(), None);
    assert_eq!(
        tree(&root),
        before_turn[mid],
        "after reverting to turn {mid}"
    );
    redo(&s, &staged);
    assert_eq!(tree(&root), last, "after redo of the revert to turn {mid}");
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn undo_redo_and_revert_restore_the_tree_exactly(
        with_git in any::<bool>(),
        start in initial(),
        turns in session(),
    ) {
        check(with_git, &start, &turns);
    }
}

/// The cases of the issue: a rename by a command, and a delete plus an add of the same
/// content (which git's rename detection pairs).
#[test]
fn renames_come_back() {
    for with_git in [false, true] {
        let start = [Op::Write(0, 0, 1), Op::Write(1, 1, 2)];
        let turns = vec![vec![
            (vec![Op::Rename(0, 0, 2, 0)], false),
            (vec![Op::Rename(1, 1, 3, 1)], true),
        ]];
        check(with_git, &start, &turns);
    }
}
