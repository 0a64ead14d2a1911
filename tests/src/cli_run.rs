//! `agent-lsp run --json` driven from tests: a workspace pointed at fake-llm, the run's
//! JSON lines, and the stored session.

use std::io::Read;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::process::{FakeLlm, ModelServer, TestEnv};

pub const FORMATS: [&str; 2] = ["openai", "anthropic"];

/// A test workspace pointed at `llm` in `format`.
pub fn setup(llm: &FakeLlm, format: &str, extra: &str) -> TestEnv {
    let env = TestEnv::new();
    env.write_user_config(&format!(
        "{}{extra}",
        ModelServer::fake(llm, format).config()
    ));
    std::fs::create_dir_all(env.workspace().join("src")).unwrap();
    std::fs::write(
        env.workspace().join("src/lib.rs"),
        "pub fn answer() -> u32 {\n    41\n}\n",
    )
    .unwrap();
    env
}

/// Points the workspace's user configuration at another fake-llm (OpenAI format), as for
/// the isolated calls of a dream or a curation after the session's own turns; `extra` is
/// more of the configuration.
pub fn point_at(env: &TestEnv, llm: &FakeLlm, extra: &str) {
    env.write_user_config(&format!(
        "{}{extra}",
        ModelServer::fake(llm, "openai").config()
    ));
}

pub struct Run {
    pub code: i32,
    pub lines: Vec<Value>,
    pub stderr: String,
}

impl Run {
    pub fn of_type(&self, t: &str) -> Vec<&Value> {
        self.lines.iter().filter(|l| l["type"] == t).collect()
    }
    pub fn text(&self) -> String {
        self.of_type("text")
            .iter()
            .map(|l| l["text"].as_str().unwrap())
            .collect()
    }
    pub fn done(&self) -> &Value {
        let last = self.lines.last().expect("some output");
        assert_eq!(last["type"], "done", "the last line is done: {last}");
        last
    }
    /// The message of the run's first error line.
    pub fn error(&self) -> String {
        let errors = self.of_type("error");
        let first = errors
            .first()
            .unwrap_or_else(|| panic!("no error line: {:?}", self.lines));
        first["message"].as_str().unwrap_or_default().to_string()
    }

    pub fn session(&self) -> String {
        self.lines[0]["session_id"].as_str().unwrap().to_string()
    }
}

/// `agent-lsp run --json --cwd WORKSPACE ARGS`, its output piped, `$FAKE_KEY` set.
pub fn command(env: &TestEnv, args: &[&str]) -> Command {
    let mut cmd = env.command(&["run", "--json", "--cwd", env.workspace().to_str().unwrap()]);
    cmd.args(args)
        .env("FAKE_KEY", "test-key")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

pub fn spawn(env: &TestEnv, args: &[&str]) -> Child {
    command(env, args).spawn().expect("spawn agent-lsp run")
}

pub fn finish(child: Child) -> Run {
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    Run {
        code: out.status.code().unwrap_or(-1),
        lines,
        stderr: String::from_utf8_lossy(&out.stderr).into(),
    }
}

pub fn run(env: &TestEnv, args: &[&str]) -> Run {
    finish(spawn(env, args))
}

/// Runs `cmd` (from [`command`]) for at most `timeout`: the run, and why it failed when it
/// timed out (it is killed), did not start or exited non-zero.
pub fn run_within(mut cmd: Command, timeout: Duration) -> (Run, Option<String>) {
    let mut child = match cmd.spawn() {
        Ok(child) => child,
        Err(e) => {
            let run = Run {
                code: -1,
                lines: Vec::new(),
                stderr: String::new(),
            };
            return (run, Some(format!("agent-lsp did not start: {e}")));
        }
    };
    let stdout = drain(child.stdout.take());
    let stderr = drain(child.stderr.take());
    let deadline = Instant::now() + timeout;
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
        }
    };
    let run = Run {
        code: status.and_then(|s| s.code()).unwrap_or(-1),
        lines: stdout
            .join()
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect(),
        stderr: stderr.join().unwrap_or_default(),
    };
    let failure = match status {
        None => Some(format!("timed out after {} s", timeout.as_secs())),
        Some(_) if run.code == 0 => None,
        Some(_) => {
            let error = run
                .of_type("error")
                .last()
                .and_then(|l| l["message"].as_str().map(str::to_string));
            // Exit 3 has no error line: the done line's stop reason says why.
            let stopped = || {
                let done = run.of_type("done");
                let reason = done.last()?["stop_reason"].as_str()?;
                Some(match reason {
                    "max_tokens" => "the answer hit the output limit (max_tokens)".to_string(),
                    other => format!("stopped: {other}"),
                })
            };
            let why = error
                .or_else(stopped)
                .unwrap_or_else(|| run.stderr.lines().last().unwrap_or_default().to_string());
            Some(format!("agent-lsp exited {}: {why}", run.code))
        }
    };
    (run, failure)
}

/// Reads a pipe to its end on a thread of its own, so neither pipe can fill and stall.
pub fn drain(pipe: Option<impl Read + Send + 'static>) -> std::thread::JoinHandle<String> {
    std::thread::spawn(move || {
        let mut s = String::new();
        if let Some(mut pipe) = pipe {
            let _ = pipe.read_to_string(&mut s);
        }
        s
    })
}

pub fn show(env: &TestEnv, session: &str) -> Value {
    let (code, out, err) = env.run(&["session", "show", session, "--json"]);
    assert_eq!(code, 0, "{err}");
    serde_json::from_str(&out).unwrap()
}

pub fn parts<'a>(view: &'a Value, kind: &str) -> Vec<&'a Value> {
    view["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["parts"].as_array().unwrap())
        .filter(|p| p["kind"] == kind)
        .collect()
}

/// `s` on one line, at most `max` characters: run output in a report's table.
pub fn one_line(s: &str, max: usize) -> String {
    let s = s.trim().replace('\n', " ");
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s,
    }
}
