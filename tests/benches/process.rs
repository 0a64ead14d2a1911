//! Whole-process figures for the real binary (build it first: `cargo build --release --bins`):
//! spawn → `initialize` reply, idle RSS 2 s after `initialized`, and 1,000 incremental edits
//! to a 20,000-line document followed by one request.
//!
//! Run with `cargo bench -p agent-lsp-tests --bench process`. Prints one line per figure.

use std::io::{BufRead, BufReader, Read, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use agent_lsp_tests::lsp_client::{file_uri, initialize_params};
use agent_lsp_tests::process::{TestEnv, agent_lsp_bin};
use serde_json::{Value, json};

struct Server {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl Server {
    fn spawn(env: &TestEnv) -> Self {
        let mut cmd = Command::new(agent_lsp_bin());
        env.apply(&mut cmd);
        let mut child = cmd
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn agent-lsp");
        let stdin = child.stdin.take().unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Self {
            child,
            stdin,
            stdout,
        }
    }

    fn send(&mut self, msg: &Value) {
        let body = msg.to_string();
        write!(self.stdin, "Content-Length: {}\r\n\r\n{body}", body.len()).unwrap();
    }

    fn read(&mut self) -> Value {
        let mut len = 0;
        loop {
            let mut line = String::new();
            self.stdout.read_line(&mut line).unwrap();
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            if let Some(v) = line.strip_prefix("Content-Length:") {
                len = v.trim().parse().unwrap();
            }
        }
        let mut body = vec![0; len];
        self.stdout.read_exact(&mut body).unwrap();
        serde_json::from_slice(&body).unwrap()
    }

    /// Sends a request and reads until its reply.
    fn request(&mut self, id: i64, method: &str, params: Value) -> Value {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        self.stdin.flush().unwrap();
        loop {
            let msg = self.read();
            if msg["id"] == id && msg.get("method").is_none() {
                return msg;
            }
        }
    }

    fn rss_kb(&self) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id())).unwrap();
        status
            .lines()
            .find_map(|l| l.strip_prefix("VmRSS:"))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or(0)
    }

    fn stop(mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn main() {
    let env = TestEnv::new();
    let params = initialize_params(&env.workspace());

    // 1. spawn → initialize reply.
    let mut times = Vec::new();
    for _ in 0..30 {
        let started = Instant::now();
        let mut s = Server::spawn(&env);
        let reply = s.request(1, "initialize", params.clone());
        times.push(started.elapsed());
        assert!(reply["result"]["capabilities"].is_object());
        s.stop();
    }
    let startup = median(times);
    println!(
        "spawn → initialize reply: median {:.2} ms over 30 runs",
        startup.as_secs_f64() * 1e3
    );

    // 2. idle RSS 2 s after initialized.
    let mut s = Server::spawn(&env);
    s.request(1, "initialize", params.clone());
    s.send(&json!({"jsonrpc": "2.0", "method": "initialized", "params": {}}));
    s.stdin.flush().unwrap();
    std::thread::sleep(Duration::from_secs(2));
    let rss = s.rss_kb();
    println!(
        "idle RSS 2 s after initialized: {:.1} MB",
        rss as f64 / 1024.0
    );

    // 3. 1,000 incremental edits to a 20,000-line document, then one request.
    let uri = file_uri(&env.workspace().join("big.rs"));
    let text: String = (0..20_000)
        .map(|i| format!("fn function_{i}() -> u32 {{ {i} }} // 日本 🦀\n"))
        .collect();
    s.send(
        &json!({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {
        "textDocument": {"uri": uri, "languageId": "rust", "version": 0, "text": text}}}),
    );
    let mut baseline = Vec::new();
    for id in 0..5 {
        let started = Instant::now();
        s.request(100 + id, "agent/documentText", json!({"uri": uri}));
        baseline.push(started.elapsed());
    }
    let mut runs = Vec::new();
    let mut version = 0;
    for round in 0..5 {
        let mut batch = Vec::new();
        for i in 0..1000u32 {
            version += 1;
            let line = (i * 19 + round * 7) % 20_000;
            let body = json!({"jsonrpc": "2.0", "method": "textDocument/didChange", "params": {
                "textDocument": {"uri": uri, "version": version},
                "contentChanges": [{"range": {"start": {"line": line, "character": 3},
                                              "end": {"line": line, "character": 4}}, "text": "N"}]}})
            .to_string();
            batch.extend(format!("Content-Length: {}\r\n\r\n{body}", body.len()).into_bytes());
        }
        let started = Instant::now();
        s.stdin.write_all(&batch).unwrap();
        let reply = s.request(10 + round as i64, "agent/documentText", json!({"uri": uri}));
        runs.push(started.elapsed());
        assert_eq!(reply["result"]["version"], version);
    }
    println!(
        "1,000 incremental edits to a 20,000-line document, then a request: median {:.2} ms over 5 runs \
         (the request alone, which returns the whole 0.9 MB text: {:.2} ms)",
        median(runs).as_secs_f64() * 1e3,
        median(baseline).as_secs_f64() * 1e3
    );
    s.stop();
}
