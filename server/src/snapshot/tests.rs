use std::collections::BTreeMap;
use std::os::unix::fs::symlink;
use std::process::Command;

use super::*;

pub(super) fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .args([
            "-c",
            "user.email=t@t",
            "-c",
            "user.name=t",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Every file under `dir` with its bytes (for byte-for-byte comparisons of `.git`).
fn tree_bytes(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    ignore::WalkBuilder::new(dir)
        .standard_filters(false)
        .build()
        .flatten()
        .filter(|e| e.file_type().is_some_and(|t| t.is_file()))
        .map(|e| (e.path().to_path_buf(), std::fs::read(e.path()).unwrap()))
        .collect()
}

struct Ws {
    _dir: tempfile::TempDir,
    data: PathBuf,
    root: PathBuf,
}

fn workspace(with_git: bool) -> Ws {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("ws");
    std::fs::create_dir_all(root.join("src")).unwrap();
    std::fs::write(root.join("src/lib.rs"), "pub fn a() {}\n").unwrap();
    std::fs::write(root.join("README.md"), "readme\n").unwrap();
    if with_git {
        std::fs::write(root.join(".gitignore"), "target/\n").unwrap();
        git(&root, &["init", "-q"]);
        git(&root, &["add", "."]);
        git(&root, &["commit", "-qm", "init"]);
    }
    Ws {
        data: dir.path().join("data"),
        root,
        _dir: dir,
    }
}

fn write(root: &Path, rel: &str, text: &str) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

#[test]
fn track_is_stable_and_changes_are_listed() {
    for with_git in [false, true] {
        let ws = workspace(with_git);
        let s = Snapshots::open(&ws.data, &ws.root).unwrap();
        let a = s.track().unwrap();
        assert_eq!(
            s.track().unwrap(),
            a,
            "tracking twice without change gives the same id"
        );
        write(&ws.root, "src/lib.rs", "pub fn a() { 1 }\n");
        write(&ws.root, "new/deep/file.txt", "hello\n");
        std::fs::remove_file(ws.root.join("README.md")).unwrap();
        let b = s.track().unwrap();
        let mut changes = s.changed(&a, Some(&b)).unwrap();
        changes.sort_by(|x, y| x.path.cmp(&y.path));
        let summary: Vec<(&str, &str)> = changes
            .iter()
            .map(|c| (c.path.as_str(), c.status.as_str()))
            .collect();
        assert_eq!(
            summary,
            [
                ("README.md", "deleted"),
                ("new/deep/file.txt", "added"),
                ("src/lib.rs", "modified")
            ]
        );
        assert_eq!(changes[2].additions, 1);
        assert!(s.diff(&a, Some(&b)).unwrap().contains("+pub fn a() { 1 }"));
    }
}

#[test]
fn revert_and_restore_touch_only_the_agents_files() {
    for with_git in [false, true] {
        let ws = workspace(with_git);
        let s = Snapshots::open(&ws.data, &ws.root).unwrap();
        let before = s.track().unwrap();
        // The agent's step.
        write(&ws.root, "src/lib.rs", "changed by the agent\n");
        write(&ws.root, "created/by/agent.txt", "new\n");
        std::fs::remove_file(ws.root.join("README.md")).unwrap();
        std::fs::set_permissions(
            ws.root.join("src/lib.rs"),
            std::fs::Permissions::from_mode(0o755),
        )
        .unwrap();
        let after = s.track().unwrap();
        let files: Vec<String> = s
            .changed(&before, Some(&after))
            .unwrap()
            .into_iter()
            .map(|c| c.path)
            .collect();
        // The user edits an unrelated file meanwhile.
        write(&ws.root, "user.txt", "mine\n");
        // Staging a revert saves the state first, for redo.
        let saved = s.track().unwrap();

        let (plan, left) = s
            .revert(&[Patch {
                to: None,
                from: before.clone(),
                files,
            }])
            .unwrap();
        assert!(left.is_empty(), "{left:?}");
        let reverted: Vec<String> = plan.targets.iter().map(FileTarget::display).collect();
        assert_eq!(
            reverted,
            [
                "README.md",
                "created",
                "created/by",
                "created/by/agent.txt",
                "src/lib.rs"
            ],
            "the files and the folders the step created"
        );
        assert_eq!(
            std::fs::read_to_string(ws.root.join("src/lib.rs")).unwrap(),
            "pub fn a() {}\n"
        );
        assert_eq!(
            std::fs::metadata(ws.root.join("src/lib.rs"))
                .unwrap()
                .permissions()
                .mode()
                & 0o777,
            0o644
        );
        assert!(ws.root.join("README.md").exists());
        assert!(
            !ws.root.join("created").exists(),
            "empty folders the agent created are gone"
        );
        assert_eq!(
            std::fs::read_to_string(ws.root.join("user.txt")).unwrap(),
            "mine\n",
            "the user's edit survives"
        );

        // Redo: back to the agent's state, the user's file untouched.
        let restored = s.restore(&saved).unwrap();
        assert_ne!(saved, after);
        assert!(!restored.contains(&"user.txt".to_string()), "{restored:?}");
        assert_eq!(
            std::fs::read_to_string(ws.root.join("src/lib.rs")).unwrap(),
            "changed by the agent\n"
        );
        assert!(ws.root.join("created/by/agent.txt").exists());
        assert!(!ws.root.join("README.md").exists());
        assert!(ws.root.join("user.txt").exists());
    }
}

#[test]
fn the_users_git_folder_is_never_written() {
    let ws = workspace(true);
    let before = tree_bytes(&ws.root.join(".git"));
    let s = Snapshots::open(&ws.data, &ws.root).unwrap();
    let a = s.track().unwrap();
    write(&ws.root, "src/lib.rs", "x\n");
    write(&ws.root, "n.txt", "y\n");
    let b = s.track().unwrap();
    s.revert(&[Patch {
        to: None,
        from: a.clone(),
        files: vec!["src/lib.rs".into(), "n.txt".into()],
    }])
    .unwrap();
    s.restore(&b).unwrap();
    s.revert(&[Patch {
        to: None,
        from: a,
        files: vec!["src/lib.rs".into(), "n.txt".into()],
    }])
    .unwrap();
    assert_eq!(
        tree_bytes(&ws.root.join(".git")),
        before,
        "the user's .git is byte-for-byte unchanged"
    );
    // The hidden repository borrows the project's objects.
    let alternates = std::fs::read_to_string(s.git_dir().join("objects/info/alternates")).unwrap();
    assert!(alternates.trim().ends_with(".git/objects"), "{alternates}");
}

#[test]
fn ignored_large_unicode_symlink_and_nested_repository_files() {
    let ws = workspace(true);
    std::fs::create_dir_all(ws.root.join("target")).unwrap();
    write(&ws.root, "target/build.o", "ignored\n");
    std::fs::write(ws.root.join(".git/info/exclude"), "secret.local\n").unwrap();
    write(&ws.root, "secret.local", "excluded\n");
    std::fs::write(ws.root.join("big.bin"), vec![7u8; 3 * 1024 * 1024]).unwrap();
    write(&ws.root, "dossier/résumé 日本 🦀.txt", "unicode\n");
    let long = "l".repeat(200);
    write(&ws.root, &format!("{long}.txt"), "long\n");
    symlink("src/lib.rs", ws.root.join("link")).unwrap();
    let nested = ws.root.join("vendor/nested");
    std::fs::create_dir_all(&nested).unwrap();
    std::fs::write(nested.join("code.c"), "int x;\n").unwrap();
    git(&nested, &["init", "-q"]);
    let s = Snapshots::open(&ws.data, &ws.root).unwrap();
    let id = s.track().unwrap();
    assert!(
        s.file_at(&id, "target/build.o").unwrap().is_none(),
        "skipped folders are not entered"
    );
    assert!(
        s.file_at(
            &id,
            &String::from_utf8(meta::lost_entry(b"target")).unwrap()
        )
        .unwrap()
        .is_some(),
        "but named"
    );
    assert_eq!(
        s.file_at(&id, "secret.local").unwrap().unwrap(),
        b"excluded\n",
        "ignored and excluded files are snapshotted: a revert must bring back `.env`"
    );
    assert!(
        s.file_at(&id, "big.bin").unwrap().is_none(),
        "untracked files over 2 MiB skipped"
    );
    assert!(
        s.file_at(
            &id,
            &String::from_utf8(meta::lost_entry(b"big.bin")).unwrap()
        )
        .unwrap()
        .is_some(),
        "and named"
    );
    assert_eq!(
        s.file_at(&id, "dossier/résumé 日本 🦀.txt")
            .unwrap()
            .unwrap(),
        b"unicode\n"
    );
    assert!(s.file_at(&id, &format!("{long}.txt")).unwrap().is_some());
    assert_eq!(
        s.file_at(&id, "link").unwrap().unwrap(),
        b"src/lib.rs",
        "symlinks as symlinks"
    );
    assert!(
        s.file_at(&id, "vendor/nested/code.c").unwrap().is_some(),
        "nested repositories as plain files"
    );
    assert!(
        s.file_at(&id, "vendor/nested/.git/HEAD").unwrap().is_none(),
        "never their .git"
    );
    // A symlink is restored as a symlink.
    std::fs::remove_file(ws.root.join("link")).unwrap();
    s.revert(&[Patch {
        to: None,
        from: id,
        files: vec!["link".into()],
    }])
    .unwrap();
    assert_eq!(
        std::fs::read_link(ws.root.join("link")).unwrap(),
        PathBuf::from("src/lib.rs")
    );
}

#[test]
fn a_linked_worktree_borrows_the_common_object_store() {
    let ws = workspace(true);
    let linked = ws.root.parent().unwrap().join("linked");
    git(
        &ws.root,
        &["worktree", "add", "-q", linked.to_str().unwrap()],
    );
    let s = Snapshots::open(&ws.data, &linked).unwrap();
    let id = s.track().unwrap();
    assert_eq!(
        s.file_at(&id, "src/lib.rs").unwrap().unwrap(),
        b"pub fn a() {}\n"
    );
    let alternates = std::fs::read_to_string(s.git_dir().join("objects/info/alternates")).unwrap();
    assert!(alternates.contains("ws/.git/objects"), "{alternates}");
    // Its own hidden repository, apart from the main worktree's.
    let main = Snapshots::open(&ws.data, &ws.root).unwrap();
    assert_ne!(main.git_dir(), s.git_dir());
    assert_eq!(
        main.git_dir().parent(),
        s.git_dir().parent(),
        "same project"
    );
}

#[test]
fn only_the_touched_paths_are_restaged_on_the_fast_path() {
    let ws = workspace(false);
    let s = Snapshots::open(&ws.data, &ws.root).unwrap();
    s.track().unwrap();
    write(&ws.root, "src/lib.rs", "fast\n");
    write(&ws.root, "other.txt", "not reported\n");
    let fast = s.track_paths(&[PathBuf::from("src/lib.rs")]).unwrap();
    assert_eq!(s.file_at(&fast, "src/lib.rs").unwrap().unwrap(), b"fast\n");
    assert!(
        s.file_at(&fast, "other.txt").unwrap().is_none(),
        "only the given paths"
    );
    let full = s.track().unwrap();
    assert!(s.file_at(&full, "other.txt").unwrap().is_some());
    // The fast path edits the last tree; its result must equal a full rebuild.
    write(&ws.root, "src/lib.rs", "again\n");
    std::fs::remove_file(ws.root.join("README.md")).unwrap();
    write(&ws.root, "new/dir/n.txt", "n\n");
    let paths = [
        PathBuf::from("src/lib.rs"),
        PathBuf::from("README.md"),
        PathBuf::from("new/dir/n.txt"),
        PathBuf::from("never/existed.txt"),
    ];
    let fast = s.track_paths(&paths).unwrap();
    assert_eq!(s.track().unwrap(), fast, "same tree as a full scan");
}

#[test]
fn a_stale_lock_is_taken_over_and_a_live_one_waited_for() {
    let dir = tempfile::tempdir().unwrap();
    // A pid that does not exist.
    std::fs::write(dir.path().join("agent-lsp.lock"), "999999999").unwrap();
    let lock = Lock::acquire_within(dir.path(), std::time::Duration::from_millis(200)).unwrap();
    let err = Lock::acquire_within(dir.path(), std::time::Duration::from_millis(100))
        .err()
        .unwrap();
    assert!(
        err.to_string()
            .contains(&format!("locked by process {}", std::process::id())),
        "{err}"
    );
    drop(lock);
    assert!(!dir.path().join("agent-lsp.lock").exists());
    Lock::acquire_within(dir.path(), std::time::Duration::from_millis(100)).unwrap();
}

#[test]
fn many_new_objects_are_packed_and_unreachable_ones_collected() {
    let ws = workspace(false);
    for i in 0..300 {
        write(&ws.root, &format!("many/f{i}.txt"), &format!("file {i}\n"));
    }
    let s = Snapshots::open(&ws.data, &ws.root).unwrap();
    let first = s.track().unwrap();
    let (_, loose, packs) = s.stats().unwrap();
    assert_eq!((loose, packs), (0, 1), "a big snapshot goes into one pack");
    assert_eq!(
        s.file_at(&first, "many/f7.txt").unwrap().unwrap(),
        b"file 7\n",
        "readable from the pack"
    );

    // An object no snapshot keeps is collected (age 0 for the test); kept ones stay.
    write(&ws.root, "many/f7.txt", "changed\n");
    let second = s.track().unwrap();
    write(&ws.root, "many/f7.txt", "changed again\n");
    let third = s.track().unwrap();
    let keep: BTreeSet<String> = [first.clone(), third.clone()].into_iter().collect();
    let removed = s.gc(&keep, std::time::Duration::ZERO).unwrap();
    assert!(removed >= 1, "the blob and tree only `second` had");
    assert!(s.file_at(&third, "many/f7.txt").unwrap().is_some());
    // A fresh handle (libgit2 caches objects it has read) no longer finds `second`.
    let fresh = Snapshots::open(&ws.data, &ws.root).unwrap();
    assert!(fresh.tree(&second).is_err());
    assert!(fresh.file_at(&third, "many/f7.txt").unwrap().is_some());

    // Small snapshots write loose objects; once there are many they are packed too.
    let (_, loose, _) = fresh.stats().unwrap();
    assert!(loose >= 2, "{loose}");
    assert_eq!(fresh.pack_if_many(2).unwrap(), loose);
    let (_, loose, packs) = fresh.stats().unwrap();
    assert_eq!((loose, packs), (0, 2));
    let fresh = Snapshots::open(&ws.data, &ws.root).unwrap();
    assert_eq!(
        fresh.file_at(&third, "many/f7.txt").unwrap().unwrap(),
        b"changed again\n"
    );
}

/// The trees a big snapshot builds itself are the trees git would write.
#[test]
fn trees_built_from_the_index_match_libgit2() {
    let ws = workspace(false);
    // Names that sort differently as files and folders (`a-b`, `a.b`, `a/`, `a0`), modes,
    // a symlink, unicode and deep folders.
    for rel in [
        "a-b",
        "a.b",
        "a/x",
        "a/b/c/d.txt",
        "a0",
        "b/ü.txt",
        "b/z",
        "z/y/x/w",
        "é",
    ] {
        write(&ws.root, rel, rel);
    }
    std::fs::set_permissions(ws.root.join("a0"), std::fs::Permissions::from_mode(0o755)).unwrap();
    symlink("a/x", ws.root.join("b/link")).unwrap();
    for i in 0..300 {
        write(&ws.root, &format!("m/{}/f{i}", i % 7), &i.to_string());
    }
    let s = Snapshots::open(&ws.data, &ws.root).unwrap();
    let ours = s.track().unwrap();
    let mut index = s.index().unwrap();
    let libgit2 = index.write_tree_to(&s.repo).unwrap();
    assert_eq!(ours, libgit2.to_string());
}

#[test]
fn tracked_files_stay_in_snapshots_although_ignored() {
    let ws = workspace(true);
    // Committed first, ignored afterwards: git keeps tracking it, and so do snapshots.
    write(&ws.root, "generated.txt", "tracked\n");
    git(&ws.root, &["add", "generated.txt"]);
    git(&ws.root, &["commit", "-qm", "generated"]);
    std::fs::write(ws.root.join(".gitignore"), "target/\ngenerated.txt\n").unwrap();
    let s = Snapshots::open(&ws.data, &ws.root).unwrap();
    let first = s.track().unwrap();
    assert_eq!(
        s.file_at(&first, "generated.txt").unwrap().unwrap(),
        b"tracked\n"
    );
    write(&ws.root, "generated.txt", "changed\n");
    let second = s.track().unwrap();
    assert_eq!(
        s.file_at(&second, "generated.txt").unwrap().unwrap(),
        b"changed\n"
    );
    std::fs::remove_file(ws.root.join("generated.txt")).unwrap();
    let third = s.track().unwrap();
    assert!(s.file_at(&third, "generated.txt").unwrap().is_none());
}

#[test]
fn unsaved_buffers_are_snapshotted_instead_of_the_disk() {
    let ws = workspace(false);
    let mut s = Snapshots::open(&ws.data, &ws.root).unwrap();
    let disk = s.track().unwrap();
    s.set_overlay(vec![(ws.root.join("src/lib.rs"), "unsaved\n".into())]);
    let buffered = s.track().unwrap();
    assert_ne!(disk, buffered);
    assert_eq!(
        s.file_at(&buffered, "src/lib.rs").unwrap().unwrap(),
        b"unsaved\n"
    );
    assert_eq!(
        std::fs::read_to_string(ws.root.join("src/lib.rs")).unwrap(),
        "pub fn a() {}\n"
    );
    s.set_overlay(Vec::new());
    assert_eq!(
        s.track().unwrap(),
        disk,
        "without the buffer, the disk again"
    );
}
