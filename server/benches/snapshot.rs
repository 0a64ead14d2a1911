//! Snapshot figures on a generated git repository (100,000 files of ~2 KB, committed), each
//! against the git command line doing the same job the way opencode does it (a hidden git
//! dir with alternates: `add -A && write-tree`; `checkout TREE -- files` for revert), and
//! against `git status` in the same repository. Prints one table.
//!
//! Run with `cargo bench -p agent-lsp --bench snapshot` (SNAPSHOT_BENCH_FILES=N for another
//! size). Needs `git`.

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use agent_lsp::snapshot::{Patch, Snapshots};

fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args([
            // No background `gc --auto` after the commit: it would run during the timings.
            "-c",
            "gc.auto=0",
            "-c",
            "user.email=b@b",
            "-c",
            "user.name=b",
            "-c",
            "init.defaultBranch=main",
        ])
        .args(args)
        .current_dir(dir)
        .output()
        .expect("git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

fn time<T>(f: impl FnOnce() -> T) -> (Duration, T) {
    let t = Instant::now();
    let v = f();
    (t.elapsed(), v)
}

/// The median of `RUNS` timings of `f`, each after `setup` (untimed): one-shot timings of a
/// 100,000-file scan vary by a third from run to run on this machine.
const RUNS: usize = 5;
fn median<T>(mut setup: impl FnMut(usize), mut f: impl FnMut() -> T) -> (Duration, T) {
    let mut times = Vec::new();
    let mut last = None;
    for run in 0..RUNS {
        setup(run);
        let (t, v) = time(&mut f);
        times.push(t);
        last = Some(v);
    }
    times.sort();
    (times[RUNS / 2], last.expect("RUNS > 0"))
}

fn generate(root: &Path, n: usize) {
    let body: String = (0..40)
        .map(|i| format!("line {i} of a generated source file\n"))
        .collect();
    for i in 0..n {
        let dir = root.join(format!("d{:03}/e{:02}", i % 500, (i / 500) % 50));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("f{i}.txt")), format!("{i}\n{body}")).unwrap();
    }
}

/// opencode's method: a hidden git dir borrowing the project's objects.
fn cli_hidden(root: &Path, hidden: &Path) {
    git(root, &["init", "-q", "--bare", hidden.to_str().unwrap()]);
    std::fs::write(
        hidden.join("objects/info/alternates"),
        format!("{}\n", root.join(".git/objects").display()),
    )
    .unwrap();
}

fn cli_snapshot(root: &Path, hidden: &Path) -> String {
    let gd = format!("--git-dir={}", hidden.display());
    let wt = format!("--work-tree={}", root.display());
    git(root, &[&gd, &wt, "add", "-A"]);
    git(root, &[&gd, &wt, "write-tree"])
}

fn row(name: &str, ours: Duration, cli: Option<Duration>, status: Duration) {
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    match cli {
        Some(c) => println!(
            "| {name} | {:.0} ms | {:.0} ms | {:.2} | {:.2} |",
            ms(ours),
            ms(c),
            ms(ours) / ms(c),
            ms(ours) / ms(status)
        ),
        None => println!(
            "| {name} | {:.0} ms | | | {:.2} |",
            ms(ours),
            ms(ours) / ms(status)
        ),
    }
}

fn main() {
    let n: usize = std::env::var("SNAPSHOT_BENCH_FILES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("repo");
    std::fs::create_dir_all(&root).unwrap();
    eprintln!("generating {n} files…");
    generate(&root, n);
    git(&root, &["init", "-q"]);
    git(&root, &["add", "-A"]);
    git(&root, &["commit", "-qm", "generated"]);
    let (status, _) = median(|_| {}, || git(&root, &["status", "--porcelain"]));
    let data = dir.path().join("data");

    println!(
        "{n} committed files, {} cores",
        std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1)
    );
    println!(
        "| operation | agent-lsp | git CLI (opencode's way) | ratio to CLI | ratio to `git status` ({:.0} ms) |",
        status.as_secs_f64() * 1e3
    );
    println!("|---|---|---|---|---|");

    let (ours, (snap, first)) = time(|| {
        let s = Snapshots::open(&data, &root).unwrap();
        let id = s.track().unwrap();
        (s, id)
    });
    let hidden = dir.path().join("hidden.git");
    let (cli, _) = time(|| {
        cli_hidden(&root, &hidden);
        cli_snapshot(&root, &hidden)
    });
    row("first snapshot", ours, Some(cli), status);

    let (ours, again) = median(|_| {}, || snap.track().unwrap());
    assert_eq!(again, first);
    let (cli, _) = median(|_| {}, || cli_snapshot(&root, &hidden));
    row("snapshot, nothing changed", ours, Some(cli), status);

    // After a step that ran a command: a full scan finds 10 changed files.
    let touch10 = |round: usize| {
        for i in 0..10 {
            let p = format!("d{:03}/e01/f{}.txt", i % 500, 500 + i);
            std::fs::write(root.join(p), format!("round {round} changed {i}\n")).unwrap();
        }
    };
    let (ours, _) = median(touch10, || snap.track().unwrap());
    let (cli, _) = median(
        |round| touch10(round + RUNS),
        || cli_snapshot(&root, &hidden),
    );
    row(
        "snapshot after 10 changed files, full scan",
        ours,
        Some(cli),
        status,
    );

    snap.track().unwrap(); // takes in the files the git CLI's rounds changed

    let ten_paths: Vec<std::path::PathBuf> = (0..10)
        .map(|i| std::path::PathBuf::from(format!("d{:03}/e00/f{i}.txt", i % 500)))
        .collect();
    for (i, p) in ten_paths.iter().enumerate() {
        std::fs::write(root.join(p), format!("changed {i}\n")).unwrap();
    }
    // After a step whose tools wrote those 10 files, the agent re-stages just them.
    let (ours, fast) = time(|| snap.track_paths(&ten_paths).unwrap());
    let (cli, _) = time(|| cli_snapshot(&root, &hidden));
    row(
        "snapshot after 10 files the tools wrote",
        ours,
        Some(cli),
        status,
    );
    // The full scan finds what the fast path recorded.
    let ten = snap.track().unwrap();
    assert_eq!(ten, fast);

    // Redo of a turn that changed those 10 files: restore `ten` after reverting them.
    let files10: Vec<String> = (0..10)
        .map(|i| format!("d{:03}/e00/f{i}.txt", i % 500))
        .collect();
    snap.revert(&[Patch {
        to: None,
        from: first.clone(),
        files: files10,
    }])
    .unwrap();
    let (ours, _) = time(|| snap.restore(&ten).unwrap());
    row("redo of a turn that changed 10 files", ours, None, status);

    // Revert of 1,000 changed files.
    let files: Vec<String> = (0..1000)
        .map(|i| format!("d{:03}/e{:02}/f{i}.txt", i % 500, (i / 500) % 50))
        .collect();
    for f in &files {
        std::fs::write(root.join(f), "changed by the agent\n").unwrap();
    }
    let after = snap.track().unwrap();
    let (ours, _) = time(|| {
        snap.revert(&[Patch {
            to: None,
            from: first.clone(),
            files: files.clone(),
        }])
        .unwrap()
    });
    snap.restore(&after).unwrap();
    let cli_tree = cli_snapshot(&root, &hidden);
    let _ = cli_tree;
    let gd = format!("--git-dir={}", hidden.display());
    let wt = format!("--work-tree={}", root.display());
    let mut args: Vec<&str> = vec![&gd, &wt, "checkout", &first, "--"];
    args.extend(files.iter().map(String::as_str));
    let (cli, _) = time(|| git(&root, &args));
    row("revert of 1,000 changed files", ours, Some(cli), status);

    // First snapshot of 100,000 untracked files (no git repository).
    let plain = dir.path().join("plain");
    std::fs::create_dir_all(&plain).unwrap();
    generate(&plain, n);
    let (ours, _) = time(|| {
        let s = Snapshots::open(&data, &plain).unwrap();
        let id = s.track().unwrap();
        s.pack_if_many(1024).unwrap();
        id
    });
    let plain_hidden = dir.path().join("plain-hidden.git");
    let (cli, _) = time(|| {
        git(
            &plain,
            &["init", "-q", "--bare", plain_hidden.to_str().unwrap()],
        );
        cli_snapshot(&plain, &plain_hidden)
    });
    row(
        &format!("first snapshot, {n} untracked files (packed)"),
        ours,
        Some(cli),
        status,
    );
}
