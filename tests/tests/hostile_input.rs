//! Hostile input through the real binary: malformed framing, wrong parameter types for
//! every `agent/*` method, positions past the end, a 50 MB document, FIFOs and device files
//! in the workspace, and provider garbage. Every case: a clear error, the next request
//! served, nothing lost, no panic.

use std::process::Stdio;

use agent_lsp_tests::cli_run::point_at;
use agent_lsp_tests::lsp_client::{LspClient, file_uri, initialize_params};
use agent_lsp_tests::process::{FakeLlm, TestEnv};
use serde_json::{Value, json};

/// Every `agent/*` request the server answers.
const AGENT_METHODS: &[&str] = &[
    "agent/documentText",
    "agent/config",
    "agent/prompt",
    "agent/cancel",
    "agent/sessions",
    "agent/history",
    "agent/revert",
    "agent/unrevert",
    "agent/undo",
    "agent/redo",
    "agent/setMode",
    "agent/search",
    "agent/compact",
    "agent/state",
    "agent/memory/list",
    "agent/memory/why",
    "agent/memory/update",
    "agent/memory/forget",
    "agent/journal/search",
    "agent/knowledge/export",
];

async fn served(client: &LspClient, after: &str) {
    let r = client
        .request("agent/config", json!({}))
        .await
        .unwrap_or_else(|e| panic!("after {after}: {e:?}"));
    assert!(r["effective"].is_object(), "after {after}");
}

#[tokio::test]
async fn malformed_framing_is_answered_and_the_next_request_served() {
    let env = TestEnv::new();
    let client = LspClient::spawn(&env, &[]);
    client.initialize(initialize_params(&env.workspace())).await;
    let good = json!({"jsonrpc": "2.0", "method": "$/noop"}).to_string();
    let framed = |body: &[u8]| {
        let mut out = format!("Content-Length: {}\r\n\r\n", body.len()).into_bytes();
        out.extend_from_slice(body);
        out
    };
    let deep = format!("{}{}", "[".repeat(100_000), "]".repeat(100_000));
    let cases: Vec<(&str, Vec<u8>)> = vec![
        (
            "a header block without Content-Length",
            format!("Content-Type: x\r\n\r\n{good}").into_bytes(),
        ),
        (
            "a negative Content-Length",
            format!("Content-Length: -5\r\n\r\n{good}").into_bytes(),
        ),
        (
            "a huge Content-Length",
            format!("Content-Length: 99999999999999\r\n\r\n{good}").into_bytes(),
        ),
        (
            "a length past usize",
            format!("Content-Length: 999999999999999999999999\r\n\r\n{good}").into_bytes(),
        ),
        (
            "invalid UTF-8 in the body",
            framed(b"{\"jsonrpc\":\"2.0\",\"id\":7,\"method\":\"\xff\xfe\"}"),
        ),
        (
            "a JSON batch",
            framed(format!("[{good},{good}]").as_bytes()),
        ),
        ("100,000 levels of nesting", framed(deep.as_bytes())),
        (
            "deep nesting inside params",
            framed(
                format!(
                    "{{\"jsonrpc\":\"2.0\",\"id\":8,\"method\":\"agent/config\",\"params\":{deep}}}"
                )
                .as_bytes(),
            ),
        ),
        ("an empty body", framed(b"")),
        ("a lone header line", b"Content-Length: 3\r\n".to_vec()),
    ];
    for (what, bytes) in &cases {
        client.send_raw(bytes).await;
        // A lone header waits for its body: give it one so the stream moves on.
        if what.starts_with("a lone") {
            client.send_raw(b"\r\n{}\r\n").await;
        }
        served(&client, what).await;
    }
    let orphans = client.orphan_replies();
    assert!(
        orphans.iter().any(|r| r["error"]["code"] == -32700),
        "parse errors are answered: {orphans:?}"
    );
    assert_eq!(client.shutdown_and_exit().await, 0);
}

#[tokio::test]
async fn wrong_parameter_types_for_every_agent_method_get_invalid_params() {
    let env = TestEnv::new();
    let client = LspClient::spawn(&env, &[]);
    client.initialize(initialize_params(&env.workspace())).await;
    // The list above is every request the schema has the client send.
    let schema: Value = serde_json::from_str(
        &std::fs::read_to_string(
            agent_lsp_tests::process::repo_root()
                .join("editors/protocol/agent-protocol.schema.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let mut sent: Vec<&str> = schema["methods"]
        .as_object()
        .unwrap()
        .iter()
        .filter(|(_, m)| m["direction"] == "clientToServer")
        .map(|(name, _)| name.as_str())
        .collect();
    let mut listed = AGENT_METHODS.to_vec();
    sent.sort();
    listed.sort();
    assert_eq!(listed, sent);
    let wrong = [
        json!(42),
        json!("text"),
        json!([1, 2]),
        json!({"sessionId": 5, "text": ["x"], "messageId": {}, "uri": 7, "mode": 3, "query": false}),
    ];
    for method in AGENT_METHODS {
        for params in &wrong {
            match client.request(method, params.clone()).await {
                Err(e) => {
                    assert!(
                        [-32602, -32600, -32603, -32803].contains(&e.code),
                        "{method} {params}: {e:?}"
                    );
                    assert!(!e.message.is_empty());
                }
                // Methods without parameters may ignore what they were sent.
                Ok(_) => assert!(
                    [
                        "agent/config",
                        "agent/sessions",
                        "agent/state",
                        "agent/memory/list",
                        "agent/knowledge/export"
                    ]
                    .contains(method),
                    "{method} accepted {params}"
                ),
            }
            served(&client, method).await;
        }
    }
    assert_eq!(client.shutdown_and_exit().await, 0);
}

#[tokio::test]
async fn positions_past_the_end_and_a_50_mb_document() {
    let env = TestEnv::new();
    let client = LspClient::spawn(&env, &[]);
    client.initialize(initialize_params(&env.workspace())).await;
    let uri = file_uri(&env.workspace().join("a.rs"));
    client
        .notify("textDocument/didOpen", json!({"textDocument": {"uri": uri, "languageId": "rust", "version": 1, "text": "fn a() {}\n"}}))
        .await;
    let past = json!({"start": {"line": 900, "character": 5}, "end": {"line": 1_000_000, "character": 4_000_000_000u64}});
    client
        .notify(
            "textDocument/didChange",
            json!({"textDocument": {"uri": uri, "version": 2},
            "contentChanges": [{"range": past, "text": "// tail\n"}]}),
        )
        .await;
    let reversed =
        json!({"start": {"line": 0, "character": 8}, "end": {"line": 0, "character": 2}});
    client
        .notify(
            "textDocument/didChange",
            json!({"textDocument": {"uri": uri, "version": 3},
            "contentChanges": [{"range": reversed, "text": "X"}]}),
        )
        .await;
    let actions = client
        .request(
            "textDocument/codeAction",
            json!({"textDocument": {"uri": uri}, "range": past, "context": {"diagnostics": []}}),
        )
        .await;
    assert!(actions.is_ok(), "{actions:?}");
    let text = client
        .request("agent/documentText", json!({"uri": uri}))
        .await
        .unwrap();
    assert_eq!(text["version"], 3);
    assert!(text["text"].as_str().unwrap().contains("// tail"), "{text}");

    // 50 MB in one didOpen: stored, and the server still answers at once.
    let big_uri = file_uri(&env.workspace().join("big.txt"));
    let line = "0123456789abcdefghijklmnopqrstuvwxyz 日本語 🦀\n";
    let big = line.repeat(50 * 1024 * 1024 / line.len());
    client
        .notify("textDocument/didOpen", json!({"textDocument": {"uri": big_uri, "languageId": "text", "version": 1, "text": big}}))
        .await;
    served(&client, "a 50 MB didOpen").await;
    let actions = client
        .request("textDocument/codeAction", json!({"textDocument": {"uri": big_uri},
            "range": {"start": {"line": 900_000, "character": 0}, "end": {"line": 900_000, "character": 3}}, "context": {"diagnostics": []}}))
        .await;
    assert!(actions.is_ok(), "{actions:?}");
    assert_eq!(client.shutdown_and_exit().await, 0);
}

fn configure(env: &TestEnv, llm: &FakeLlm) {
    point_at(env, llm, "");
}

/// `agent-lsp run --json` in `env`; its exit code and JSON lines.
fn run(env: &TestEnv, args: &[&str]) -> (i32, Vec<Value>, String) {
    let out = env
        .command(
            &[
                &[
                    "run",
                    "--json",
                    "--yes",
                    "--cwd",
                    env.workspace().to_str().unwrap(),
                ],
                args,
            ]
            .concat(),
        )
        .env("FAKE_KEY", "k")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let lines = String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect();
    (
        out.status.code().unwrap_or(-1),
        lines,
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn results(lines: &[Value]) -> Vec<String> {
    lines
        .iter()
        .filter(|l| l["type"] == "tool_result")
        .map(|l| l["output"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[test]
fn fifos_and_device_files_in_the_workspace_neither_hang_nor_fill_memory() {
    let script = json!({"turns": [
        {"reply": {"tool_calls": [
            {"name": "read", "arguments": {"filePath": "pipe"}},
            {"name": "read", "arguments": {"filePath": "zero"}},
            {"name": "write", "arguments": {"filePath": "pipe", "content": "x"}},
            {"name": "grep", "arguments": {"pattern": "needle"}},
            {"name": "glob", "arguments": {"pattern": "**/*"}},
            {"name": "read", "arguments": {"filePath": "notes.txt"}}]}},
        {"reply": {"text": "survived"}}
    ]});
    let llm = FakeLlm::start(&script, "openai");
    let env = TestEnv::new();
    configure(&env, &llm);
    let ws = env.workspace();
    std::fs::write(ws.join("notes.txt"), "a needle here\n").unwrap();
    assert!(
        std::process::Command::new("mkfifo")
            .arg(ws.join("pipe"))
            .status()
            .unwrap()
            .success()
    );
    std::os::unix::fs::symlink("/dev/zero", ws.join("zero")).unwrap();
    let (code, lines, err) = run(&env, &["look around"]);
    assert_eq!(code, 0, "{err}");
    let out = results(&lines);
    assert_eq!(out.len(), 6, "{out:?}");
    assert!(out[0].contains("not a regular file"), "{}", out[0]);
    assert!(!out[1].is_empty() && out[1].len() < 10_000, "{}", out[1]);
    assert!(out[2].contains("not a regular file"), "{}", out[2]);
    assert!(out[3].contains("notes.txt"), "{}", out[3]);
    assert!(out[5].contains("a needle here"), "{}", out[5]);
    assert!(
        lines
            .iter()
            .any(|l| l["type"] == "text" && l["text"] == "survived")
    );
}

#[test]
fn provider_garbage_ends_the_turn_clearly_and_the_next_prompt_runs() {
    // 10,000 tool calls in one answer: 64 run, one says why the rest did not.
    let calls: Vec<Value> = (0..10_000)
        .map(|i| json!({"name": "glob", "arguments": {"pattern": format!("none-{i}")}}))
        .collect();
    let big = "x".repeat(20 * 1024 * 1024);
    let script = json!({"turns": [
        {"reply": {"tool_calls": calls}},
        {"reply": {"text": "after many calls"}},
        // A 20 MB chunk (one SSE event: chunks are up to 32 MB here).
        {"reply": {"text": big}},
        // A stream that never ends.
        {"reply": {"text": "again and again ".repeat(4096)}, "fault": {"endless": true}},
        // Invalid JSON in tool arguments.
        {"reply": {"tool_calls": [{"name": "read", "arguments": "{\"filePath\": \"a.txt"}]}},
        {"reply": {"text": "still here"}}
    ], "chunk_chars": 32 * 1024 * 1024});
    let llm = FakeLlm::start(&script, "openai");
    let env = TestEnv::new();
    configure(&env, &llm);
    std::fs::write(env.workspace().join("a.txt"), "a\n").unwrap();

    let (code, lines, err) = run(&env, &["many calls"]);
    assert_eq!(code, 0, "{err}");
    let out = results(&lines);
    assert_eq!(out.len(), 65, "64 ran and one error");
    assert!(
        out.iter().any(|o| o.contains("asked for 10000 tool calls")),
        "{:?}",
        &out[..2]
    );
    let session = lines[0]["session_id"].as_str().unwrap().to_string();

    // Each in a session of its own (a cut answer stays in its session's log).
    for (what, prompt, says) in [
        ("a 20 MB chunk", "big", "passed 8 MB"),
        ("an endless stream", "endless", "passed 4 MB"),
    ] {
        let (code, lines, err) = run(&env, &[prompt]);
        assert_eq!(code, 1, "{what}: {err}");
        let done = lines.iter().find(|l| l["type"] == "done").unwrap();
        assert!(
            done["error"].as_str().unwrap_or_default().contains(says),
            "{what}: {done}"
        );
    }
    let (code, lines, err) = run(&env, &["--session", &session, "bad arguments"]);
    assert_eq!(code, 0, "{err}");
    let out = results(&lines);
    assert!(
        out[0].contains("invalid arguments") || out[0].contains("not valid JSON"),
        "{out:?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l["type"] == "text" && l["text"] == "still here")
    );
    // Nothing was lost: the store is whole and its projections rebuild to the same.
    let live = env.run(&["session", "show", &session, "--json"]).1;
    let (code, out, err) = env.run(&["session", "rebuild"]);
    assert_eq!(code, 0, "{out}{err}");
    assert!(out.contains("integrity: ok"), "{out}");
    assert_eq!(env.run(&["session", "show", &session, "--json"]).1, live);
}
