//! The LSP lifecycle, robustness against bad input, and document sync, through the real binary.

use agent_lsp_tests::lsp_client::{LspClient, file_uri, initialize_params};
use agent_lsp_tests::process::TestEnv;
use serde_json::{Value, json};

#[tokio::test]
async fn initialize_advertises_capabilities_and_negotiates_utf16_by_default() {
    let env = TestEnv::new();
    let client = LspClient::spawn(&env, &[]);
    let result = client.initialize(initialize_params(&env.workspace())).await;
    let caps = &result["capabilities"];
    assert_eq!(caps["positionEncoding"], "utf-16");
    assert_eq!(caps["textDocumentSync"]["change"], 2, "incremental sync");
    assert_eq!(caps["textDocumentSync"]["openClose"], true);
    assert_eq!(caps["codeActionProvider"]["resolveProvider"], true);
    assert!(caps["executeCommandProvider"]["commands"].is_array());
    assert_eq!(caps["workspace"]["workspaceFolders"]["supported"], true);
    assert_eq!(result["serverInfo"]["name"], "agent-lsp");
    assert_eq!(client.shutdown_and_exit().await, 0);
}

#[tokio::test]
async fn utf8_is_chosen_when_the_client_offers_it() {
    let env = TestEnv::new();
    let client = LspClient::spawn(&env, &[]);
    let mut params = initialize_params(&env.workspace());
    params["capabilities"]["general"]["positionEncodings"] = json!(["utf-32", "utf-8", "utf-16"]);
    let result = client.initialize(params).await;
    assert_eq!(result["capabilities"]["positionEncoding"], "utf-8");
    assert_eq!(client.shutdown_and_exit().await, 0);
}

#[tokio::test]
async fn exit_without_shutdown_is_code_1_and_end_of_input_too() {
    let env = TestEnv::new();
    let client = LspClient::spawn(&env, &[]);
    client.initialize(initialize_params(&env.workspace())).await;
    client.notify("exit", Value::Null).await;
    let mut client = client;
    assert_eq!(client.wait_for_exit_code().await, 1);

    let client = LspClient::spawn(&env, &[]);
    client.initialize(initialize_params(&env.workspace())).await;
    assert_eq!(client.wait_exit().await, 1, "stdin closed without shutdown");
}

#[tokio::test]
async fn garbage_never_stops_the_server() {
    let env = TestEnv::new();
    let client = LspClient::spawn(&env, &[]);
    client.initialize(initialize_params(&env.workspace())).await;

    let good = json!({"jsonrpc": "2.0", "method": "$/noop"}).to_string();
    let framed = |body: &str| format!("Content-Length: {}\r\n\r\n{body}", body.len());
    let garbage: Vec<Vec<u8>> = vec![
        b"this is not a header\r\n\r\n".to_vec(),
        framed("{not json").into_bytes(),
        framed("[1, 2]").into_bytes(),
        framed(r#"{"id": 99, "what": "no method"}"#).into_bytes(),
        b"Content-Length: twelve\r\n\r\n{}".to_vec(),
        // Declared length too short, then too long: both must not swallow what follows.
        format!("Content-Length: 5\r\n\r\n{good}").into_bytes(),
        format!("Content-Length: 4000\r\n\r\n{good}").into_bytes(),
        vec![0xff, 0xfe, 0x00, 0x01],
        framed("\u{1F980}").into_bytes(),
    ];
    for bytes in &garbage {
        client.send_raw(bytes).await;
        // After each piece of garbage a good request is still answered.
        let r = client
            .request("agent/config", json!({}))
            .await
            .unwrap_or_else(|e| panic!("after {:?}: {e:?}", String::from_utf8_lossy(bytes)));
        assert!(r["effective"].is_object());
    }
    // Parse errors are answered with id null.
    let orphans = client.orphan_replies();
    assert!(
        orphans
            .iter()
            .any(|r| r["error"]["code"] == -32700 && r["id"].is_null()),
        "{orphans:?}"
    );
    assert!(
        orphans
            .iter()
            .any(|r| r["id"] == 99 && r["error"]["code"] == -32600)
    );

    // Unknown methods and wrong parameter types get JSON-RPC errors.
    let e = client
        .request("no/such/method", json!({}))
        .await
        .unwrap_err();
    assert_eq!(e.code, -32601);
    let e = client
        .request("textDocument/codeAction", json!({"textDocument": 5}))
        .await
        .unwrap_err();
    assert_eq!(e.code, -32602, "{e:?}");
    let e = client
        .request("agent/documentText", json!({"uri": "file:///never/opened"}))
        .await
        .unwrap_err();
    assert_eq!(e.code, -32602);
    // A notification with wrong parameters is logged and dropped.
    client
        .notify("textDocument/didChange", json!({"textDocument": "nope"}))
        .await;
    client.notify("textDocument/didOpen", json!(42)).await;
    assert!(client.request("agent/config", json!({})).await.is_ok());
    assert_eq!(client.shutdown_and_exit().await, 0);
}

async fn open(client: &LspClient, uri: &str, text: &str) {
    client
        .notify(
            "textDocument/didOpen",
            json!({"textDocument": {"uri": uri, "languageId": "rust", "version": 1, "text": text}}),
        )
        .await;
}

async fn change(client: &LspClient, uri: &str, version: i32, changes: Value) {
    client
        .notify(
            "textDocument/didChange",
            json!({"textDocument": {"uri": uri, "version": version}, "contentChanges": changes}),
        )
        .await;
}

async fn text_of(client: &LspClient, uri: &str) -> Value {
    client
        .request("agent/documentText", json!({"uri": uri}))
        .await
        .expect("document is open")
}

fn range(sl: u32, sc: u32, el: u32, ec: u32) -> Value {
    json!({"start": {"line": sl, "character": sc}, "end": {"line": el, "character": ec}})
}

#[tokio::test]
async fn incremental_changes_with_multibyte_text_in_both_encodings() {
    for (encoding, emoji_end, cjk_col) in [("utf-16", 3, 2), ("utf-8", 5, 6)] {
        let env = TestEnv::new();
        let client = LspClient::spawn(&env, &[]);
        let mut params = initialize_params(&env.workspace());
        params["capabilities"]["general"]["positionEncodings"] = json!([encoding]);
        client.initialize(params).await;
        let uri = file_uri(&env.workspace().join("a.rs"));
        open(&client, &uri, "a😀b\r\n日本語\ne\u{301}x\n").await;
        change(
            &client,
            &uri,
            2,
            json!([
                // Replace "b" after the emoji (column counted in the negotiated unit).
                {"range": range(0, emoji_end, 0, emoji_end + 1), "text": "B"},
                // Insert after the second CJK character.
                {"range": range(1, cjk_col, 1, cjk_col), "text": "!"},
                // Past the end of a line: clamped to the end of that line.
                {"range": range(2, 99, 2, 99), "text": "?"},
                // Past the end of the document: appended.
                {"range": range(40, 0, 41, 3), "text": "end"}
            ]),
        )
        .await;
        let doc = text_of(&client, &uri).await;
        assert_eq!(
            doc["text"], "a😀B\r\n日本!語\ne\u{301}x?\nend",
            "{encoding}"
        );
        assert_eq!(doc["version"], 2);
        // A full replacement.
        change(&client, &uri, 3, json!([{"text": "fresh"}])).await;
        assert_eq!(text_of(&client, &uri).await["text"], "fresh");
        client
            .notify(
                "textDocument/didClose",
                json!({"textDocument": {"uri": uri}}),
            )
            .await;
        assert!(
            client
                .request("agent/documentText", json!({"uri": uri}))
                .await
                .is_err()
        );
        assert_eq!(client.shutdown_and_exit().await, 0);
    }
}

#[tokio::test]
async fn many_changes_sent_at_once_apply_in_order() {
    let env = TestEnv::new();
    let client = LspClient::spawn(&env, &[]);
    client.initialize(initialize_params(&env.workspace())).await;
    let uri = file_uri(&env.workspace().join("n.txt"));
    open(&client, &uri, "").await;
    // 500 notifications written in one go: each appends its number at the end.
    let mut bytes = Vec::new();
    let mut expected = String::new();
    for i in 0..500 {
        let text = format!("{i},");
        let body = json!({"jsonrpc": "2.0", "method": "textDocument/didChange", "params": {
            "textDocument": {"uri": uri, "version": i + 2},
            "contentChanges": [{"range": range(0, expected.len() as u32, 0, expected.len() as u32), "text": text}]
        }})
        .to_string();
        expected.push_str(&text);
        bytes.extend(format!("Content-Length: {}\r\n\r\n{body}", body.len()).into_bytes());
    }
    client.send_raw(&bytes).await;
    let doc = text_of(&client, &uri).await;
    assert_eq!(doc["text"], expected);
    assert_eq!(doc["version"], 501);
    assert_eq!(client.shutdown_and_exit().await, 0);
}

#[tokio::test]
async fn stdout_carries_only_lsp_and_logs_go_to_the_log_file() {
    let env = TestEnv::new();
    let log = env.dir.path().join("logs/agent-lsp.log");
    // The client panics on any non-LSP byte on stdout, so a clean run proves the first half.
    let client = LspClient::spawn_with_args(
        &env,
        &["--log-file", log.to_str().unwrap()],
        &[("AGENT_LSP_LOG", "debug")],
    );
    client.initialize(initialize_params(&env.workspace())).await;
    client.send_raw(b"junk\r\n\r\n").await;
    client.request("agent/config", json!({})).await.unwrap();
    let stderr_before_exit = client.stderr();
    assert_eq!(client.shutdown_and_exit().await, 0);
    let logged = std::fs::read_to_string(&log).unwrap();
    assert!(logged.contains("rejected a malformed message"), "{logged}");
    assert!(logged.contains("DEBUG"), "AGENT_LSP_LOG=debug takes effect");
    assert!(
        !stderr_before_exit.contains("rejected"),
        "with --log-file nothing is logged to stderr: {stderr_before_exit}"
    );
}

#[tokio::test]
async fn old_tool_outputs_are_removed_at_start_up() {
    let env = TestEnv::new();
    let dir = env.data_dir().join("tool-output");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("old.txt"), "x").unwrap();
    std::fs::write(dir.join("fresh.txt"), "x").unwrap();
    let eight_days = std::time::Duration::from_secs(8 * 24 * 3600);
    std::fs::File::options()
        .write(true)
        .open(dir.join("old.txt"))
        .unwrap()
        .set_modified(std::time::SystemTime::now() - eight_days)
        .unwrap();
    let client = LspClient::spawn(&env, &[]);
    client.initialize(initialize_params(&env.workspace())).await;
    client
        .wait_until("the old output to be removed", || {
            (!dir.join("old.txt").exists()).then_some(())
        })
        .await;
    assert!(dir.join("fresh.txt").exists());
    assert_eq!(client.shutdown_and_exit().await, 0);
}
