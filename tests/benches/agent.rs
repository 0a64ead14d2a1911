//! Whole-process figures of the agent loop (build first: `cargo build --release --bins`):
//!
//! 1. loop overhead: a 2,000-chunk answer streamed by fake-llm with no delay — time from the
//!    first delta `agent-lsp run --json` emits to the end of the turn (every delta persisted
//!    and emitted), and the process's peak RSS;
//! 2. a whole headless session: a three-request script (write a file, read it, answer) in a
//!    10-file git repository, through fake-llm — wall time and peak RSS of `agent-lsp run`,
//!    and the time from spawning the process to fake-llm receiving the first model request
//!    (a fresh data directory each run, as a first run in a new project has);
//! 3. per-step cost and undo/redo of a turn in workspaces of 1k, 20k and 100k files.
//!
//! Run with `cargo bench -p agent-lsp-tests --bench agent`.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use agent_lsp_tests::cli_run::point_at;
use agent_lsp_tests::process::{FakeLlm, TestEnv};
use serde_json::json;

/// Waits for `pid` and returns its peak RSS in KiB (from the kernel's rusage).
fn wait_rss(pid: u32) -> (i32, u64) {
    let mut status = 0;
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: wait4 on our own child with valid pointers.
    let r = unsafe { libc::wait4(pid as i32, &mut status, 0, &mut usage) };
    assert_eq!(r, pid as i32, "wait4");
    (libc::WEXITSTATUS(status), usage.ru_maxrss as u64)
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn configure(env: &TestEnv, llm: &FakeLlm) {
    point_at(env, llm, "");
}

// The children are reaped by `wait_rss` (wait4), which clippy cannot see.
#[allow(clippy::zombie_processes)]
fn main() {
    // 1. Loop overhead.
    let text: String = (0..2000)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect();
    let mut spans = Vec::new();
    let mut rss = 0;
    for _ in 0..5 {
        let llm = FakeLlm::start(
            &json!({"chunk_chars": 1, "turns": [{"reply": {"text": text}}]}),
            "openai",
        );
        let env = TestEnv::new();
        configure(&env, &llm);
        let mut child = env
            .command(&[
                "run",
                "--json",
                "--cwd",
                env.workspace().to_str().unwrap(),
                "stream",
            ])
            .env("FAKE_KEY", "k")
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let mut first = None;
        let mut deltas = 0;
        let mut end = None;
        for line in BufReader::new(child.stdout.take().unwrap()).lines() {
            let line = line.unwrap();
            if line.contains("\"type\":\"text\"") {
                first.get_or_insert_with(Instant::now);
                deltas += 1;
            }
            if line.contains("\"status\":\"idle\"") {
                end = Some(Instant::now());
            }
        }
        let (code, kib) = wait_rss(child.id());
        assert_eq!(code, 0);
        assert_eq!(deltas, 2000);
        spans.push(end.unwrap() - first.unwrap());
        rss = rss.max(kib);
    }
    println!(
        "2,000-chunk answer: first delta → turn done {:.1} ms (median of 5), peak RSS {:.1} MB",
        median(spans).as_secs_f64() * 1e3,
        rss as f64 / 1024.0
    );

    // 2. A whole headless session in a 10-file git repository: the first in a new data
    // directory (database and snapshot repository created), then the next one.
    let mut walls = [Vec::new(), Vec::new()];
    let mut firsts = [Vec::new(), Vec::new()];
    let mut rss = 0;
    for _ in 0..5 {
        let session = json!([
            {"reply": {"text": "Writing the file.", "tool_calls": [{"name": "write", "arguments": {"filePath": "notes/summary.md", "content": "# Summary\n\nTen files.\n"}}]}},
            {"reply": {"tool_calls": [{"name": "read", "arguments": {"filePath": "notes/summary.md"}}]}},
            {"reply": {"text": "Done: notes/summary.md written."}}
        ]);
        let turns: Vec<_> = [session.clone(), session]
            .iter()
            .flat_map(|s| s.as_array().unwrap().clone())
            .collect();
        let llm = FakeLlm::start(&json!({ "turns": turns }), "openai");
        let env = TestEnv::new();
        configure(&env, &llm);
        let ws = env.workspace();
        for i in 0..10 {
            std::fs::write(
                ws.join(format!("file{i}.rs")),
                format!("pub fn f{i}() {{}}\n"),
            )
            .unwrap();
        }
        let git = |args: &[&str]| {
            assert!(
                Command::new("git")
                    .args(args)
                    .current_dir(&ws)
                    .output()
                    .unwrap()
                    .status
                    .success()
            );
        };
        git(&["init", "-q"]);
        git(&["add", "."]);
        git(&[
            "-c",
            "user.email=b@b",
            "-c",
            "user.name=b",
            "commit",
            "-qm",
            "init",
        ]);
        for run in 0..2 {
            let started = Instant::now();
            let spawned_us = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .as_micros() as u64;
            let child = env
                .command(&["run", "--yes", "--cwd", ws.to_str().unwrap(), "summarise"])
                .env("FAKE_KEY", "k")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .unwrap();
            let (code, kib) = wait_rss(child.id());
            walls[run].push(started.elapsed());
            assert_eq!(code, 0);
            assert!(ws.join("notes/summary.md").exists());
            let first = llm.requests()[run * 3].received_unix_us;
            firsts[run].push(Duration::from_micros(first.saturating_sub(spawned_us)));
            rss = rss.max(kib);
        }
    }
    for (run, name) in ["first in a new data directory", "the next one"]
        .iter()
        .enumerate()
    {
        println!(
            "headless session (3 requests, write + read + answer, 10-file git repo), {name}: \
             {:.1} ms wall, process spawned → first model request received {:.1} ms (medians of 5)",
            median(walls[run].clone()).as_secs_f64() * 1e3,
            median(firsts[run].clone()).as_secs_f64() * 1e3,
        );
    }
    println!("headless sessions: peak RSS {:.1} MB", rss as f64 / 1024.0);

    steps_and_undo();
}

/// A workspace of `n` untracked files in folders of 100 (no commit: the worst case for a
/// scan, nothing is borrowed from the user's object store).
fn big_workspace(env: &TestEnv, n: usize) {
    let ws = env.workspace();
    for i in 0..n {
        let dir = ws.join(format!("d{:04}", i / 100));
        if i % 100 == 0 {
            std::fs::create_dir_all(&dir).unwrap();
        }
        std::fs::write(dir.join(format!("f{i}.txt")), format!("file {i}\n")).unwrap();
    }
    assert!(
        Command::new("git")
            .args(["init", "-q"])
            .current_dir(&ws)
            .status()
            .unwrap()
            .success()
    );
}

/// 3. Per-step cost and undo at 1k / 20k / 100k files: a turn of 10 steps that each write
///    one file (the time between two model requests, median over the steps after the
///    first), then `session undo` and `session redo` of that turn.
fn steps_and_undo() {
    for n in [1_000, 20_000, 100_000] {
        let mut turns: Vec<_> = (0..10)
            .map(|i| {
                json!({"reply": {"tool_calls": [{"name": "write", "arguments": {
                    "filePath": format!("out/w{i}.txt"), "content": format!("written {i}\n")}}]}})
            })
            .collect();
        turns.push(json!({"reply": {"text": "ten files written"}}));
        let llm = FakeLlm::start(&json!({ "turns": turns }), "openai");
        let env = TestEnv::new();
        configure(&env, &llm);
        big_workspace(&env, n);
        let ws = env.workspace();
        let out = env
            .command(&[
                "run",
                "--yes",
                "--json",
                "--cwd",
                ws.to_str().unwrap(),
                "write ten",
            ])
            .env("FAKE_KEY", "k")
            .stderr(Stdio::null())
            .output()
            .unwrap();
        assert!(out.status.success());
        let sid = String::from_utf8_lossy(&out.stdout)
            .lines()
            .find_map(|l| {
                serde_json::from_str::<serde_json::Value>(l).ok()?["session_id"]
                    .as_str()
                    .map(String::from)
            })
            .unwrap();
        let times: Vec<u64> = llm.requests().iter().map(|r| r.received_unix_us).collect();
        let gaps: Vec<Duration> = times
            .windows(2)
            .skip(1)
            .map(|w| Duration::from_micros(w[1] - w[0]))
            .collect();
        let timed = |args: &[&str]| {
            let started = Instant::now();
            let (code, _, err) = env.run(args);
            assert_eq!(code, 0, "{err}");
            started.elapsed()
        };
        let undo = timed(&["session", "undo", &sid]);
        assert!(!ws.join("out/w9.txt").exists());
        let redo = timed(&["session", "redo", &sid]);
        assert!(ws.join("out/w9.txt").exists());
        println!(
            "{n} untracked files: between two model requests {:.1} ms (median of 9 steps), \
             undo of the 10-write turn {:.0} ms, redo {:.0} ms",
            median(gaps).as_secs_f64() * 1e3,
            undo.as_secs_f64() * 1e3,
            redo.as_secs_f64() * 1e3
        );
    }
}
