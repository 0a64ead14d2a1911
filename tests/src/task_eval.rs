//! The task evaluation: small real tasks on fixture repositories (`tests/eval/TASK/`), each
//! run through `agent-lsp run --json --yes` and judged by the task's own check.
//!
//! A task folder holds `task.toml`, `repo/` (copied into a fresh git workspace) and
//! `oracle.json` (a fake-llm script that does the task right, so the harness itself is
//! tested without a model). `task.toml`:
//!
//! - `prompt`: what the user asks;
//! - `check`: a `sh -c` script run in the workspace afterwards (`$EVAL_TASK` is the task
//!   folder, `$EVAL_ANSWER` a file with the agent's answer, `$EVAL_SCRATCH` an empty
//!   folder of its own); exit 0 is a pass;
//! - `answer` / `answer_not`: regexes the answer must / must not match;
//! - `unchanged`: the workspace must be left as it was (a question, not a change).
//!
//! Every task also fails when the agent commits. Before the agent runs, each task must fail
//! its grading on the untouched repository with an empty answer: a task that passes
//! without the work proves nothing.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::{Value, json};

use crate::cli_run::{self, Run, one_line};
use crate::process::{FakeLlm, ModelServer, TestEnv, git, repo_root};

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Spec {
    pub prompt: String,
    #[serde(default)]
    pub check: Option<String>,
    #[serde(default)]
    pub answer: Vec<String>,
    #[serde(default)]
    pub answer_not: Vec<String>,
    #[serde(default)]
    pub unchanged: bool,
}

#[derive(Debug, Clone)]
pub struct Task {
    pub name: String,
    pub dir: PathBuf,
    pub spec: Spec,
}

/// The tasks under `tests/eval`, by name.
pub fn tasks() -> Result<Vec<Task>, String> {
    let root = repo_root().join("tests/eval");
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(&root)
        .map_err(|e| format!("{}: {e}", root.display()))?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.join("task.toml").is_file())
        .collect();
    dirs.sort();
    dirs.into_iter()
        .map(|dir| {
            let file = dir.join("task.toml");
            let text = std::fs::read_to_string(&file).map_err(|e| e.to_string())?;
            let spec: Spec =
                toml::from_str(&text).map_err(|e| format!("{}: {e}", file.display()))?;
            if spec.check.is_none() && spec.answer.is_empty() {
                return Err(format!("{}: neither a check nor an answer", file.display()));
            }
            for re in spec.answer.iter().chain(&spec.answer_not) {
                regex::Regex::new(re).map_err(|e| format!("{}: {e}", file.display()))?;
            }
            let name = dir.file_name().unwrap_or_default().to_string_lossy().into();
            Ok(Task { name, dir, spec })
        })
        .collect()
}

/// The model the tasks run against.
#[derive(Debug, Clone)]
pub enum Model {
    /// fake-llm replaying each task's `oracle.json`: every task passes unless the harness,
    /// the agent or a check is broken.
    Oracle,
    /// fake-llm answering "I have finished." without doing anything: every task fails
    /// unless its check cannot fail.
    Idle,
    /// A real server.
    Server(ModelServer),
}

#[derive(Debug, Clone)]
pub struct Options {
    pub model: Model,
    /// Per task; a run still going is killed and fails.
    pub timeout: Duration,
    /// Only the tasks whose names contain this.
    pub only: Option<String>,
    /// More of the agent's user configuration (TOML), after the model server's lines.
    pub config: String,
}

#[derive(Debug, Clone)]
pub struct Outcome {
    pub task: String,
    /// None is a pass; else why it failed.
    pub failure: Option<String>,
    /// The model's answers (assistant messages) in the session.
    pub steps: usize,
    /// Input + output tokens the provider reported.
    pub tokens: u64,
    pub seconds: f64,
}

#[derive(Debug, Clone)]
pub struct Report {
    pub outcomes: Vec<Outcome>,
}

impl Report {
    pub fn passed(&self) -> usize {
        self.outcomes.iter().filter(|o| o.failure.is_none()).count()
    }

    /// One markdown row per task and a total.
    pub fn table(&self) -> String {
        let mut out =
            String::from("| task | result | steps | tokens | seconds |\n|---|---|---|---|---|\n");
        for o in &self.outcomes {
            let result = match &o.failure {
                None => "pass".to_string(),
                Some(why) => format!("FAIL: {}", one_line(why, 160).replace('|', "/")),
            };
            let _ = writeln!(
                out,
                "| {} | {result} | {} | {} | {:.1} |",
                o.task, o.steps, o.tokens, o.seconds
            );
        }
        let _ = writeln!(
            out,
            "| **total** | **{}/{} passed** | {} | {} | {:.1} |",
            self.passed(),
            self.outcomes.len(),
            self.outcomes.iter().map(|o| o.steps).sum::<usize>(),
            self.outcomes.iter().map(|o| o.tokens).sum::<u64>(),
            self.outcomes.iter().map(|o| o.seconds).sum::<f64>()
        );
        out
    }
}

/// Runs the tasks; Err when the tasks cannot be loaded or one is broken (its check passes
/// before any work).
pub fn run(opts: &Options) -> Result<Report, String> {
    let tasks: Vec<Task> = tasks()?
        .into_iter()
        .filter(|t| {
            opts.only
                .as_ref()
                .is_none_or(|o| t.name.contains(o.as_str()))
        })
        .collect();
    if tasks.is_empty() {
        return Err("no task matches".into());
    }
    let mut outcomes = Vec::new();
    for (i, task) in tasks.iter().enumerate() {
        let outcome = run_task(task, opts)?;
        // Progress on stderr: a real model takes minutes per task.
        eprintln!(
            "[{}/{}] {}: {} ({:.1} s)",
            i + 1,
            tasks.len(),
            task.name,
            if outcome.failure.is_none() {
                "pass"
            } else {
                "fail"
            },
            outcome.seconds
        );
        outcomes.push(outcome);
    }
    Ok(Report { outcomes })
}

fn run_task(task: &Task, opts: &Options) -> Result<Outcome, String> {
    let env = TestEnv::new();
    let ws = env.workspace();
    copy_dir(&task.dir.join("repo"), &ws).map_err(|e| format!("{}: {e}", task.name))?;
    git(&ws, &["init", "-q", "-b", "main"]);
    std::fs::write(ws.join(".git/info/exclude"), "__pycache__/\ntarget/\n")
        .map_err(|e| e.to_string())?;
    git(&ws, &["add", "-A"]);
    git(&ws, &["commit", "-qm", "the task's repository"]);
    let head = git(&ws, &["rev-parse", "HEAD"]);
    if grade(task, &env, "", &head, false).is_none() {
        return Err(format!(
            "{}: the task passes before the agent did anything",
            task.name
        ));
    }

    let fake = match &opts.model {
        Model::Oracle => Some(FakeLlm::start(&oracle(task)?, "openai")),
        Model::Idle => Some(FakeLlm::start(
            &json!({"turns": [{"reply": {"text": "I have finished."}}]}),
            "openai",
        )),
        Model::Server(_) => None,
    };
    let server = match (&opts.model, &fake) {
        (Model::Server(s), _) => s.clone(),
        (_, Some(llm)) => ModelServer::fake(llm, "openai"),
        _ => unreachable!("a fake runs for the oracle and the idle model"),
    };
    env.write_user_config(&format!("{}{}", server.config(), opts.config));

    let started = Instant::now();
    let mut cmd = cli_run::command(&env, &["--yes", &task.spec.prompt]);
    cmd.envs(server.key());
    let (run, failed) = cli_run::run_within(cmd, opts.timeout);
    let seconds = started.elapsed().as_secs_f64();
    let failure = failed.or_else(|| grade(task, &env, &run.text(), &head, true));
    Ok(Outcome {
        task: task.name.clone(),
        failure,
        steps: steps(&env, &run),
        tokens: run
            .of_type("usage")
            .iter()
            .map(|l| {
                l["input_tokens"].as_u64().unwrap_or(0) + l["output_tokens"].as_u64().unwrap_or(0)
            })
            .sum(),
        seconds,
    })
}

fn oracle(task: &Task) -> Result<Value, String> {
    let file = task.dir.join("oracle.json");
    let text = std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", file.display()))
}

/// The model's answers in the stored session.
fn steps(env: &TestEnv, run: &Run) -> usize {
    let Some(sid) = run.lines.first().and_then(|l| l["session_id"].as_str()) else {
        return 0;
    };
    let (code, out, _) = env.run(&["session", "show", sid, "--json"]);
    let view: Value = if code == 0 {
        serde_json::from_str(&out).unwrap_or_default()
    } else {
        Value::Null
    };
    view["messages"]
        .as_array()
        .map_or(0, |m| m.iter().filter(|m| m["role"] == "assistant").count())
}

/// None when the task is done; else why not. `show` prints a failed check's output.
fn grade(task: &Task, env: &TestEnv, answer: &str, head: &str, show: bool) -> Option<String> {
    let ws = env.workspace();
    let spec = &task.spec;
    let first_line = |s: &str| one_line(s.lines().next().unwrap_or_default(), 80);
    for re in &spec.answer {
        if !regex::Regex::new(re).is_ok_and(|r| r.is_match(answer)) {
            return Some(format!("the answer lacks /{re}/: {}", first_line(answer)));
        }
    }
    for re in &spec.answer_not {
        if regex::Regex::new(re).is_ok_and(|r| r.is_match(answer)) {
            return Some(format!("the answer has /{re}/"));
        }
    }
    if git(&ws, &["rev-parse", "HEAD"]) != head {
        return Some("the agent committed".into());
    }
    if spec.unchanged {
        let status = git(&ws, &["status", "--porcelain"]);
        if !status.is_empty() {
            return Some(format!("files changed: {}", first_line(&status)));
        }
    }
    let check = spec.check.as_deref()?;
    let scratch = env.dir.path().join("check");
    let _ = std::fs::remove_dir_all(&scratch);
    let _ = std::fs::create_dir_all(scratch.join("tmp"));
    let answer_file = scratch.join("answer.txt");
    let _ = std::fs::write(&answer_file, answer);
    // -x: the trace's last command is the one that failed.
    let out = Command::new("sh")
        .args(["-xc", check])
        .current_dir(&ws)
        .env("EVAL_TASK", &task.dir)
        .env("EVAL_ANSWER", &answer_file)
        .env("EVAL_SCRATCH", scratch.join("tmp"))
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .env("CARGO_TARGET_DIR", check_target_dir())
        .output();
    match out {
        Ok(o) if o.status.success() => None,
        Ok(o) => {
            let trace = String::from_utf8_lossy(&o.stderr);
            let failed = trace.lines().rev().find_map(|l| l.strip_prefix("+ "));
            // The table has room for the command only; what it said goes to stderr.
            let said = String::from_utf8_lossy(&o.stdout);
            let tail: Vec<&str> = said.lines().chain(trace.lines()).collect();
            if show {
                eprintln!(
                    "{}: the check's last output:\n{}",
                    task.name,
                    tail[tail.len().saturating_sub(15)..].join("\n")
                );
            }
            Some(format!(
                "the check fails at `{}`",
                failed.unwrap_or(check).trim()
            ))
        }
        Err(e) => Some(format!("the check did not run: {e}")),
    }
}

/// Where a check's `cargo` builds: beside the project's own build, not in the temporary
/// workspace, so it is reused across tasks and runs where the machine lets binaries run
/// (a temporary folder may be mounted noexec).
fn check_target_dir() -> PathBuf {
    let dir = std::env::var_os("CARGO_TARGET_DIR")
        .map_or_else(|| repo_root().join("target"), PathBuf::from);
    // A relative one would be read from the task's workspace.
    std::path::absolute(dir)
        .unwrap_or_default()
        .join("eval-tasks")
}

fn copy_dir(from: &Path, to: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(to)?;
    for entry in std::fs::read_dir(from)? {
        let entry = entry?;
        let target = to.join(entry.file_name());
        if entry.file_type()?.is_dir() {
            copy_dir(&entry.path(), &target)?;
        } else {
            std::fs::copy(entry.path(), &target)?;
        }
    }
    Ok(())
}
