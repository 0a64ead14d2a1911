//! The real-model smoke checks: what a user does first with a local model, against a
//! running server (`scripts/real-model-smoke` starts llama.cpp's). Each check runs the real
//! binary in a fresh environment and says what it saw; none judges the model's wisdom, only
//! that the path works: an answer arrives, a tool runs, an overflow is reported as one, a
//! cancel stops the run, the editor gets the streamed answer.

use std::fmt::Write as _;
use std::io::{BufRead, BufReader};
use std::process::Command;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::cli_run::{self, Run, one_line};
use crate::lsp_client::{LspClient, initialize_params};
use crate::process::{ModelServer, TestEnv};

/// The configuration beyond the server: answers short enough for a slow CPU, and the core
/// tools only, as a small model's window wants (the README's advice).
const LIMITS: &str = "max_output_tokens = 200\nsnapshot = false\n\
    [tools]\n\"*\" = false\nread = true\nwrite = true\nedit = true\nbash = true\n\
    grep = true\nglob = true\n";

#[derive(Debug, Clone)]
pub struct Check {
    pub name: &'static str,
    /// None is a pass; else what went wrong.
    pub failure: Option<String>,
    /// What the check saw.
    pub detail: String,
    pub seconds: f64,
}

pub struct Report {
    pub checks: Vec<Check>,
}

impl Report {
    pub fn passed(&self) -> bool {
        self.checks.iter().all(|c| c.failure.is_none())
    }

    pub fn table(&self) -> String {
        let mut out = String::from("| check | result | seconds | seen |\n|---|---|---|---|\n");
        for c in &self.checks {
            let result = c
                .failure
                .as_deref()
                .map_or("pass".to_string(), |f| format!("FAIL: {f}"));
            let _ = writeln!(
                out,
                "| {} | {} | {:.1} | {} |",
                c.name,
                result.replace(['|', '\n'], " "),
                c.seconds,
                c.detail.replace(['|', '\n'], " ")
            );
        }
        out
    }
}

/// What a check saw, or (what went wrong, what it saw).
type Outcome = Result<String, (String, String)>;
type CheckFn = fn(&ModelServer, Duration) -> Outcome;

/// Runs every check against `server`; `timeout` bounds each.
pub fn run(server: &ModelServer, timeout: Duration) -> Report {
    let checks: [(&'static str, CheckFn); 6] = [
        ("window", window),
        ("plain answer", plain_answer),
        ("tool call", tool_call),
        ("overflow", overflow),
        ("cancel", cancel),
        ("editor (LSP)", editor),
    ];
    let checks = checks
        .into_iter()
        .map(|(name, check)| {
            let started = Instant::now();
            // A check that panics (a client wait that timed out) fails alone.
            let outcome = std::panic::catch_unwind(|| check(server, timeout));
            let (failure, detail) = match outcome {
                Ok(Ok(detail)) => (None, detail),
                Ok(Err((why, detail))) => (Some(why), detail),
                Err(panic) => (Some(panic_message(&panic)), String::new()),
            };
            Check {
                name,
                failure,
                detail,
                seconds: started.elapsed().as_secs_f64(),
            }
        })
        .collect();
    Report { checks }
}

fn env_for(server: &ModelServer) -> TestEnv {
    let env = TestEnv::new();
    env.write_user_config(&format!("{}{LIMITS}", server.config()));
    env
}

fn agent(env: &TestEnv, server: &ModelServer, args: &[&str]) -> Command {
    let mut cmd = cli_run::command(env, args);
    cmd.envs(server.key());
    cmd
}

/// `doctor` finds the window on the server, not in a guess.
fn window(server: &ModelServer, _: Duration) -> Outcome {
    let env = env_for(server);
    let mut cmd = env.command(&["doctor"]);
    cmd.envs(server.key()).current_dir(env.workspace());
    let out = cmd
        .output()
        .map_err(|e| (format!("doctor: {e}"), String::new()))?;
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let line = text
        .lines()
        .find(|l| l.contains("window"))
        .unwrap_or_default()
        .to_string();
    if line.is_empty() || line.contains("unknown") {
        return Err((
            "doctor does not know the window".into(),
            one_line(&line, 120),
        ));
    }
    Ok(one_line(&line, 120))
}

/// A prompt without work gets text back, and the run ends normally (or at the output cap).
fn plain_answer(server: &ModelServer, timeout: Duration) -> Outcome {
    let env = env_for(server);
    let cmd = agent(&env, server, &["Say hello in one short sentence."]);
    let (run, failed) = cli_run::run_within(cmd, timeout);
    let text = run.text();
    let stop = stop_reason(&run);
    let detail = format!("{stop}: {}", one_line(&text, 120));
    match failed {
        Some(why) if run.code != 3 => Err((why, detail)),
        _ if text.trim().is_empty() => Err(("no text".into(), detail)),
        _ => Ok(detail),
    }
}

/// The model asks for a tool, the agent runs it and returns its output to the model. A
/// small model does not call one every time: three tries.
fn tool_call(server: &ModelServer, timeout: Duration) -> Outcome {
    let mut last = Err(("no try".to_string(), String::new()));
    for attempt in 1..=3 {
        last = tool_call_once(server, timeout)
            .map(|seen| format!("try {attempt}: {seen}"))
            .map_err(|(why, seen)| (why, format!("try {attempt}: {seen}")));
        if last.is_ok() {
            break;
        }
    }
    last
}

fn tool_call_once(server: &ModelServer, timeout: Duration) -> Outcome {
    let env = env_for(server);
    std::fs::write(
        env.workspace().join("notes.txt"),
        "The code word is PELICAN.\n",
    )
    .map_err(|e| (e.to_string(), String::new()))?;
    let cmd = agent(
        &env,
        server,
        &[
            "--yes",
            "Use the read tool to read notes.txt, then tell me the code word in it.",
        ],
    );
    let (run, failed) = cli_run::run_within(cmd, timeout);
    // A call is announced pending, then running: one entry per id.
    let mut calls: Vec<(String, String)> = Vec::new();
    for c in run.of_type("tool_call") {
        let id = c["id"].as_str().unwrap_or_default().to_string();
        if !calls.iter().any(|(seen, _)| *seen == id) {
            calls.push((id, c["name"].as_str().unwrap_or("?").to_string()));
        }
    }
    let calls: Vec<String> = calls.into_iter().map(|(_, name)| name).collect();
    let results = run.of_type("tool_result").len();
    let detail = format!(
        "calls: [{}], {results} results; {}: {}",
        calls.join(", "),
        stop_reason(&run),
        one_line(&run.text(), 120)
    );
    match failed {
        Some(why) if run.code != 3 => Err((why, detail)),
        _ if calls.is_empty() => Err(("the model called no tool".into(), detail)),
        _ if results == 0 => Err(("no tool result".into(), detail)),
        _ => Ok(detail),
    }
}

/// A prompt far bigger than the window is reported as too big for it, not as a generic
/// failure.
fn overflow(server: &ModelServer, timeout: Duration) -> Outcome {
    let env = env_for(server);
    // ~25k tokens: past the small windows local servers run with, and under the 128 KiB a
    // single command-line argument may have.
    let filler = "The quick brown fox jumps over the lazy dog. ".repeat(2_500);
    let prompt = format!("Summarise this text:\n{filler}");
    let cmd = agent(&env, server, &[&prompt]);
    let (run, _) = cli_run::run_within(cmd, timeout);
    let error = run
        .of_type("error")
        .last()
        .and_then(|e| e["message"].as_str())
        .unwrap_or_default()
        .to_string();
    let detail = format!("exit {}: {}", run.code, one_line(&error, 120));
    let named = ["window", "context"]
        .iter()
        .any(|w| error.to_lowercase().contains(w));
    if run.code == 1 && named {
        Ok(detail)
    } else {
        Err(("not reported as an overflow".into(), detail))
    }
}

/// SIGINT while the answer streams stops the run with exit 130.
fn cancel(server: &ModelServer, timeout: Duration) -> Outcome {
    let env = env_for(server);
    let mut cmd = agent(
        &env,
        server,
        &["Write a long story about a lighthouse keeper, at least 500 words."],
    );
    let mut child = cmd.spawn().map_err(|e| (e.to_string(), String::new()))?;
    let stdout = child.stdout.take().expect("piped");
    let stderr = cli_run::drain(child.stderr.take());
    let (tx, rx) = mpsc::channel::<Value>();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Ok(v) = serde_json::from_str::<Value>(&line) {
                let _ = tx.send(v);
            }
        }
    });
    // Wait for the answer to start streaming (or the run to end).
    let deadline = Instant::now() + timeout;
    let mut lines = Vec::new();
    while Instant::now() < deadline {
        match rx.recv_timeout(Duration::from_millis(100)) {
            Ok(v) => {
                let streaming = v["type"] == "text";
                lines.push(v);
                if streaming {
                    break;
                }
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
            Err(mpsc::RecvTimeoutError::Timeout) => {}
        }
    }
    let streamed = lines.iter().any(|l| l["type"] == "text");
    let sent = Instant::now();
    let _ = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break Some(status),
            Ok(None) if sent.elapsed() < Duration::from_secs(30) => {
                std::thread::sleep(Duration::from_millis(50))
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
        }
    };
    let _ = reader.join();
    lines.extend(rx.try_iter());
    let run = Run {
        code: status.and_then(|s| s.code()).unwrap_or(-1),
        lines,
        stderr: stderr.join().unwrap_or_default(),
    };
    let detail = format!(
        "exit {} {:.1} s after SIGINT; stop: {}",
        run.code,
        sent.elapsed().as_secs_f64(),
        stop_reason(&run)
    );
    match (streamed, status) {
        (false, _) => Err(("no text streamed before the cancel".into(), detail)),
        (_, None) => Err(("still running 30 s after SIGINT".into(), detail)),
        _ if run.code != 130 => Err(("not ended as cancelled".into(), detail)),
        _ => Ok(detail),
    }
}

/// Through the LSP server, as an editor: `agent/prompt`, streamed chunks, then idle.
fn editor(server: &ModelServer, timeout: Duration) -> Outcome {
    let env = env_for(server);
    let key: Vec<(String, String)> = server.key().into_iter().collect();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| (e.to_string(), String::new()))?;
    runtime.block_on(async {
        let extra: Vec<(&str, &str)> = key.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        let client = LspClient::spawn(&env, &extra);
        let mut params = initialize_params(&env.workspace());
        params["capabilities"]["experimental"] = json!({"agent": {"updates": true}});
        client.initialize(params).await;
        let reply = client
            .request(
                "agent/prompt",
                json!({"text": "Say hello in one short sentence."}),
            )
            .await
            .map_err(|e| (format!("agent/prompt: {e:?}"), String::new()))?;
        if !reply["sessionId"].is_string() {
            return Err(("agent/prompt answered no session".into(), reply.to_string()));
        }
        let updates = || {
            client
                .received("agent/update")
                .into_iter()
                .map(|u| u["params"]["update"].clone())
                .collect::<Vec<Value>>()
        };
        let idle = client
            .wait_until_within("the turn's end", timeout, || {
                updates()
                    .into_iter()
                    .find(|u| u["kind"] == "status" && u["status"] == "idle")
            })
            .await;
        let text: String = updates()
            .iter()
            .filter(|u| u["kind"] == "message_chunk")
            .filter_map(|u| u["text"].as_str())
            .collect();
        let stop = idle["stopReason"].as_str().unwrap_or("?").to_string();
        let detail = format!("{stop}: {}", one_line(&text, 120));
        match stop.as_str() {
            "end_turn" | "max_tokens" if !text.trim().is_empty() => Ok(detail),
            _ => Err(("no streamed answer".into(), detail)),
        }
    })
}

fn stop_reason(run: &Run) -> String {
    run.of_type("done")
        .last()
        .and_then(|d| d["stop_reason"].as_str())
        .unwrap_or("no done line")
        .to_string()
}

fn panic_message(panic: &Box<dyn std::any::Any + Send>) -> String {
    let text = panic
        .downcast_ref::<String>()
        .map(String::as_str)
        .or_else(|| panic.downcast_ref::<&str>().copied())
        .unwrap_or("panicked");
    one_line(text, 120)
}
