//! An LSP client for tests: spawns the real `agent-lsp`, frames messages, matches replies to
//! requests, collects notifications, answers the server's requests with scripted replies, and
//! fails with a clear message (including the server's stderr) instead of hanging.

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::{Notify, oneshot};

use crate::process::TestEnv;

pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(20);

/// A JSON-RPC error reply.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    pub code: i64,
    pub message: String,
}

#[derive(Default)]
struct Inbox {
    /// Every message from the server that is not a reply to us, in order.
    messages: Vec<Value>,
    /// Replies that arrived without anyone waiting (e.g. errors with a null id).
    orphan_replies: Vec<Value>,
    /// Scripted answers to server→client requests, by method: each request takes the next,
    /// and the last one stays.
    replies: HashMap<String, std::collections::VecDeque<Value>>,
    stderr: String,
    closed: bool,
}

pub struct LspClient {
    child: Child,
    stdin: Arc<tokio::sync::Mutex<Option<ChildStdin>>>,
    pending: Arc<Mutex<HashMap<i64, oneshot::Sender<Value>>>>,
    inbox: Arc<Mutex<Inbox>>,
    changed: Arc<Notify>,
    next_id: AtomicI64,
}

fn frame(body: &[u8]) -> Vec<u8> {
    let mut out = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
    out.extend_from_slice(body);
    out
}

/// Default answers for server→client requests a real editor would accept.
fn default_reply(method: &str) -> Option<Value> {
    match method {
        "workspace/applyEdit" => Some(json!({"applied": true})),
        "window/workDoneProgress/create"
        | "client/registerCapability"
        | "client/unregisterCapability"
        | "window/showMessageRequest" => Some(Value::Null),
        "window/showDocument" => Some(json!({"success": true})),
        "workspace/configuration" => Some(json!([])),
        _ => None,
    }
}

impl LspClient {
    /// Spawns `agent-lsp` (no arguments: the stdio server) in `env`, with `cwd` as its
    /// working directory.
    pub fn spawn(env: &TestEnv, extra_env: &[(&str, &str)]) -> Self {
        Self::spawn_with_args(env, &[], extra_env)
    }

    /// Like [`spawn`](Self::spawn), with command-line arguments.
    pub fn spawn_with_args(env: &TestEnv, args: &[&str], extra_env: &[(&str, &str)]) -> Self {
        let mut cmd = std::process::Command::new(crate::process::agent_lsp_bin());
        cmd.args(args);
        env.apply(&mut cmd);
        cmd.current_dir(env.workspace());
        for (k, v) in extra_env {
            cmd.env(k, v);
        }
        let mut cmd = Command::from(cmd);
        cmd.stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = cmd.spawn().expect("spawn agent-lsp");
        let stdin = child.stdin.take().unwrap();
        let stdout = child.stdout.take().unwrap();
        let stderr = child.stderr.take().unwrap();
        let client = Self {
            child,
            stdin: Arc::new(tokio::sync::Mutex::new(Some(stdin))),
            pending: Arc::default(),
            inbox: Arc::default(),
            changed: Arc::default(),
            next_id: AtomicI64::new(1),
        };
        client.read_stdout(stdout);
        let inbox = client.inbox.clone();
        tokio::spawn(async move {
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                inbox.lock().unwrap().stderr.push_str(&(line + "\n"));
            }
        });
        client
    }

    fn read_stdout(&self, stdout: tokio::process::ChildStdout) {
        let pending = self.pending.clone();
        let inbox = self.inbox.clone();
        let changed = self.changed.clone();
        let stdin = self.stdin.clone();
        tokio::spawn(async move {
            let mut reader = BufReader::new(stdout);
            loop {
                let Some(body) = read_message(&mut reader).await else {
                    break;
                };
                let Ok(msg) = serde_json::from_slice::<Value>(&body) else {
                    panic!(
                        "agent-lsp wrote something that is not JSON on stdout: {:?}",
                        String::from_utf8_lossy(&body)
                    );
                };
                let is_reply = msg.get("method").is_none();
                if is_reply {
                    let id = msg["id"].as_i64();
                    let waiter = id.and_then(|id| pending.lock().unwrap().remove(&id));
                    match waiter {
                        Some(tx) => {
                            let _ = tx.send(msg);
                        }
                        None => inbox.lock().unwrap().orphan_replies.push(msg),
                    }
                } else {
                    if msg.get("id").is_some() {
                        let method = msg["method"].as_str().unwrap_or_default().to_string();
                        let scripted =
                            inbox
                                .lock()
                                .unwrap()
                                .replies
                                .get_mut(&method)
                                .and_then(|queue| match queue.len() {
                                    0 | 1 => queue.front().cloned(),
                                    _ => queue.pop_front(),
                                });
                        let reply = match scripted.or_else(|| default_reply(&method)) {
                            Some(result) => {
                                json!({"jsonrpc": "2.0", "id": msg["id"], "result": result})
                            }
                            None => json!({"jsonrpc": "2.0", "id": msg["id"],
                                           "error": {"code": -32601, "message": "not handled by the test client"}}),
                        };
                        write_to(&stdin, &frame(reply.to_string().as_bytes())).await;
                    }
                    inbox.lock().unwrap().messages.push(msg);
                }
                changed.notify_waiters();
            }
            inbox.lock().unwrap().closed = true;
            changed.notify_waiters();
        });
    }

    /// Sends raw bytes (for malformed input tests).
    pub async fn send_raw(&self, bytes: &[u8]) {
        assert!(
            write_to(&self.stdin, bytes).await,
            "cannot write to agent-lsp; stderr:\n{}",
            self.stderr()
        );
    }

    pub async fn notify(&self, method: &str, params: Value) {
        let msg = json!({"jsonrpc": "2.0", "method": method, "params": params});
        self.send_raw(&frame(msg.to_string().as_bytes())).await;
    }

    /// Sends a request and waits for its reply (at most [`DEFAULT_TIMEOUT`]).
    pub async fn request(&self, method: &str, params: Value) -> Result<Value, RpcError> {
        self.request_within(method, params, DEFAULT_TIMEOUT).await
    }

    pub async fn request_within(
        &self,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Value, RpcError> {
        let id = self.next_id.fetch_add(1, Ordering::SeqCst);
        let (tx, rx) = oneshot::channel();
        self.pending.lock().unwrap().insert(id, tx);
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send_raw(&frame(msg.to_string().as_bytes())).await;
        let reply = match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(reply)) => reply,
            Ok(Err(_)) => panic!(
                "agent-lsp closed its output before replying to {method}; stderr:\n{}",
                self.stderr()
            ),
            Err(_) => panic!(
                "timed out after {timeout:?} waiting for the reply to {method}; stderr:\n{}",
                self.stderr()
            ),
        };
        match reply.get("error") {
            Some(e) => Err(RpcError {
                code: e["code"].as_i64().unwrap_or(0),
                message: e["message"].as_str().unwrap_or_default().to_string(),
            }),
            None => Ok(reply["result"].clone()),
        }
    }

    /// `initialize` with `params`, then `initialized`. Returns the initialize result.
    pub async fn initialize(&self, params: Value) -> Value {
        let result = self
            .request("initialize", params)
            .await
            .expect("initialize succeeds");
        self.notify("initialized", json!({})).await;
        result
    }

    /// Makes the client answer server requests of `method` with `result`.
    pub fn reply_to(&self, method: &str, result: Value) {
        self.reply_in_turn(method, vec![result]);
    }

    /// Makes the client answer the server's requests of `method` with `results` in order,
    /// the last one to every later request.
    pub fn reply_in_turn(&self, method: &str, results: Vec<Value>) {
        self.inbox
            .lock()
            .unwrap()
            .replies
            .insert(method.to_string(), results.into());
    }

    /// Server→client messages (notifications and requests) with this method, so far.
    pub fn received(&self, method: &str) -> Vec<Value> {
        self.inbox
            .lock()
            .unwrap()
            .messages
            .iter()
            .filter(|m| m["method"] == method)
            .cloned()
            .collect()
    }

    /// Tells the server the document's whole new text (`textDocument/didChange`).
    pub async fn change_document(&self, uri: &str, version: i32, text: &str) {
        let params = serde_json::json!({"textDocument": {"uri": uri, "version": version},
            "contentChanges": [{"text": text}]});
        self.notify("textDocument/didChange", params).await;
    }

    /// The code actions on `line`, columns `start..end`, of `uri` (no diagnostics).
    pub async fn code_actions(&self, uri: &str, line: u32, start: u32, end: u32) -> Vec<Value> {
        let range = serde_json::json!({"start": {"line": line, "character": start},
            "end": {"line": line, "character": end}});
        let params = serde_json::json!({"textDocument": {"uri": uri}, "range": range,
            "context": {"diagnostics": []}});
        let actions = self
            .request("textDocument/codeAction", params)
            .await
            .unwrap();
        actions.as_array().cloned().unwrap_or_default()
    }

    /// Runs the command of the first action whose title `pick` accepts (panics with the
    /// titles offered when none does); returns the command's result.
    pub async fn run_action(&self, actions: &[Value], pick: impl Fn(&str) -> bool) -> Value {
        let titles: Vec<&str> = actions.iter().filter_map(|a| a["title"].as_str()).collect();
        let action = actions
            .iter()
            .find(|a| a["title"].as_str().is_some_and(&pick))
            .unwrap_or_else(|| panic!("no such action among {titles:?}"));
        self.request("workspace/executeCommand", action["command"].clone())
            .await
            .unwrap()
    }

    /// Replies that matched no request (e.g. parse errors, which carry a null id).
    pub fn orphan_replies(&self) -> Vec<Value> {
        self.inbox.lock().unwrap().orphan_replies.clone()
    }

    /// Waits until a server→client message with `method` satisfies `pred`.
    pub async fn wait_for(&self, method: &str, pred: impl Fn(&Value) -> bool) -> Value {
        self.wait_until(&format!("a {method} message"), || {
            self.received(method).into_iter().find(|m| pred(m))
        })
        .await
    }

    /// Waits (at most [`DEFAULT_TIMEOUT`]) until `probe` returns something.
    pub async fn wait_until<T>(&self, what: &str, probe: impl Fn() -> Option<T>) -> T {
        self.wait_until_within(what, DEFAULT_TIMEOUT, probe).await
    }

    /// Waits at most `timeout` until `probe` returns something; panics after.
    pub async fn wait_until_within<T>(
        &self,
        what: &str,
        timeout: Duration,
        probe: impl Fn() -> Option<T>,
    ) -> T {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let notified = self.changed.notified();
            if let Some(v) = probe() {
                return v;
            }
            // Wake on a new message, or every 50 ms for conditions outside the protocol.
            let wake = deadline.min(tokio::time::Instant::now() + Duration::from_millis(50));
            if tokio::time::timeout_at(wake, notified).await.is_err()
                && tokio::time::Instant::now() >= deadline
            {
                panic!(
                    "timed out after {timeout:?} waiting for {what}; stderr:\n{}",
                    self.stderr()
                );
            }
        }
    }

    pub fn stderr(&self) -> String {
        self.inbox.lock().unwrap().stderr.clone()
    }

    /// Closes stdin and waits for the process to end; returns its exit code.
    pub async fn wait_exit(mut self) -> i32 {
        self.stdin.lock().await.take();
        let status = tokio::time::timeout(DEFAULT_TIMEOUT, self.child.wait())
            .await
            .expect("agent-lsp exits")
            .expect("wait for agent-lsp");
        status.code().unwrap_or(-1)
    }

    /// `shutdown`, `exit`, and the exit code.
    pub async fn shutdown_and_exit(self) -> i32 {
        self.request("shutdown", Value::Null)
            .await
            .expect("shutdown succeeds");
        self.notify("exit", Value::Null).await;
        self.wait_exit().await
    }

    /// Waits for the process to end on its own (without closing stdin).
    pub async fn wait_for_exit_code(&mut self) -> i32 {
        let status = tokio::time::timeout(DEFAULT_TIMEOUT, self.child.wait())
            .await
            .expect("agent-lsp exits")
            .expect("wait for agent-lsp");
        status.code().unwrap_or(-1)
    }

    pub fn id(&self) -> Option<u32> {
        self.child.id()
    }
}

/// Writes to the server's stdin; false once it is closed.
async fn write_to(stdin: &tokio::sync::Mutex<Option<ChildStdin>>, bytes: &[u8]) -> bool {
    let mut guard = stdin.lock().await;
    let Some(w) = guard.as_mut() else {
        return false;
    };
    w.write_all(bytes).await.is_ok() && w.flush().await.is_ok()
}

/// Reads one framed message body; `None` at end of stream.
async fn read_message<R: AsyncBufReadExt + AsyncReadExt + Unpin>(
    reader: &mut R,
) -> Option<Vec<u8>> {
    let mut length = None;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).await.ok()? == 0 {
            return None;
        }
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some(v) = line.strip_prefix("Content-Length:") {
            length = v.trim().parse::<usize>().ok();
        }
    }
    let mut body = vec![0; length.expect("agent-lsp sent a message without Content-Length")];
    reader.read_exact(&mut body).await.ok()?;
    Some(body)
}

/// Well-formed initialize params of a capable client (utf-16, with workspace folders).
pub fn initialize_params(root: &std::path::Path) -> Value {
    let uri = file_uri(root);
    json!({
        "processId": null,
        "rootUri": uri,
        "workspaceFolders": [{"uri": uri, "name": "workspace"}],
        "capabilities": {
            "general": {"positionEncodings": ["utf-16"]},
            "window": {"workDoneProgress": true, "showMessage": {}},
            "workspace": {"applyEdit": true, "workspaceEdit": {"documentChanges": true}}
        }
    })
}

/// `file://` URI of an absolute path, as the server forms them.
pub fn file_uri(path: &std::path::Path) -> String {
    agent_lsp::lsp::bridge::file_uri(path)
        .map(|u| u.as_str().to_string())
        .unwrap_or_default()
}

/// The server in `env`'s answer workspace pointed at `llm` (the user configuration extended
/// by `extra_config`), initialized, with `prompt` sent: the client and the new session's id.
pub async fn prompted(
    env: &TestEnv,
    llm: &crate::process::FakeLlm,
    extra_config: &str,
    prompt: &str,
) -> (LspClient, String) {
    env.answer_workspace(llm);
    let file = env.config_home().join("agent-lsp/config.toml");
    let config = std::fs::read_to_string(&file).unwrap();
    std::fs::write(&file, format!("{config}{extra_config}")).unwrap();
    let client = LspClient::spawn(env, &[("FAKE_KEY", "k")]);
    client.initialize(initialize_params(&env.workspace())).await;
    let started = client
        .request("agent/prompt", serde_json::json!({ "text": prompt }))
        .await
        .unwrap();
    let sid = started["sessionId"].as_str().unwrap().to_string();
    (client, sid)
}
