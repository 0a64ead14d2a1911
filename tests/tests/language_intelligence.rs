//! The editor's language intelligence through the real server (issue 19): a client with the
//! `diagnostics` and `lsp` flags is asked for its language servers' diagnostics around an
//! edit and runs the `lsp` tool's requests; a client without them sees none of it. The
//! position arithmetic (utf-16 on the wire, 1-based characters for the model) is checked on a
//! line with characters outside the BMP. Neovim with pyright: tests/neovim.rs.

use agent_lsp_tests::lsp_client::{LspClient, file_uri, initialize_params, prompted};
use agent_lsp_tests::process::{FakeLlm, TestEnv};
use serde_json::{Value, json};

/// The file the model works on: its second line starts with an emoji (two utf-16 units).
const LIB: &str = "pub fn answer() -> u32 {\n    /* 🦀 */ 41\n}\n";

fn tool_names(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|t| t["function"]["name"].as_str().map(String::from))
        .collect()
}

fn script() -> Value {
    json!({"turns": [
        {"reply": {"tool_calls": [{"name": "edit", "arguments": {
            "filePath": "src/lib.rs", "oldString": "41", "newString": "\"42\""}}]}},
        // `41` (then `"42"`) is the 13th character of its line as the model counts, utf-16
        // unit 13 (0-based) since the emoji takes two.
        {"reply": {"tool_calls": [{"name": "lsp", "arguments": {
            "operation": "goToDefinition", "filePath": "src/lib.rs", "line": 2, "character": 13}}]}},
        {"reply": {"tool_calls": [{"name": "lsp", "arguments": {
            "operation": "documentSymbol", "filePath": "src/lib.rs"}}]}},
        {"reply": {"text": "Done."}},
    ]})
}

#[tokio::test]
async fn a_client_with_the_flags_gives_diagnostics_around_an_edit_and_answers_lsp_requests() {
    let llm = FakeLlm::start(&script(), "openai");
    let env = TestEnv::new();
    let file = env.answer_workspace(&llm);
    std::fs::write(&file, LIB).unwrap();
    let config = env.config_home().join("agent-lsp/config.toml");
    let toml = std::fs::read_to_string(&config).unwrap();
    std::fs::write(&config, format!("{toml}[permission]\nedit = \"allow\"\n")).unwrap();

    let client = LspClient::spawn(&env, &[("FAKE_KEY", "k")]);
    let mut params = initialize_params(&env.workspace());
    params["capabilities"]["experimental"] =
        json!({"agent": {"updates": true, "diagnostics": true, "lsp": true}});
    client.initialize(params).await;
    let uri = file_uri(&file);
    client
        .notify(
            "textDocument/didOpen",
            json!({"textDocument": {"uri": uri, "languageId": "rust", "version": 1, "text": LIB}}),
        )
        .await;
    let unused = json!({"range": {"start": {"line": 0, "character": 7}, "end": {"line": 0, "character": 13}},
                        "severity": 2, "message": "function `answer` is never used", "source": "rustc"});
    // Before the edit: a warning already there; after: the same warning and a new error.
    let mismatch = json!({"range": {"start": {"line": 1, "character": 13}, "end": {"line": 1, "character": 17}},
                          "severity": 1, "message": "mismatched types\nexpected `u32`, found `&str`",
                          "source": "rustc", "code": "E0308"});
    client.reply_in_turn(
        "agent/diagnostics",
        vec![
            json!({"items": [{"uri": uri, "diagnostics": [unused]}]}),
            json!({"items": [{"uri": uri, "diagnostics": [unused, mismatch, {"bogus": true}]}]}),
        ],
    );
    client.reply_in_turn(
        "agent/lsp",
        vec![
            json!([{"targetUri": uri,
                    "targetRange": {"start": {"line": 0, "character": 0}, "end": {"line": 2, "character": 1}},
                    "targetSelectionRange": {"start": {"line": 0, "character": 7}, "end": {"line": 0, "character": 13}}}]),
            json!([{"name": "answer", "kind": 12,
                    "range": {"start": {"line": 0, "character": 0}, "end": {"line": 2, "character": 1}},
                    "selectionRange": {"start": {"line": 0, "character": 7}, "end": {"line": 0, "character": 13}},
                    "children": [{"name": "inner", "kind": 13,
                        "range": {"start": {"line": 1, "character": 13}, "end": {"line": 1, "character": 17}},
                        "selectionRange": {"start": {"line": 1, "character": 13}, "end": {"line": 1, "character": 17}}}]}]),
        ],
    );
    client
        .request("agent/prompt", json!({"text": "make the answer a string"}))
        .await
        .unwrap();
    client
        .wait_until("the turn's last request", || {
            (llm.requests().len() >= 4).then_some(())
        })
        .await;

    let asked = client.received("agent/diagnostics");
    assert_eq!(
        asked.len(),
        2,
        "once before the edit, once after: {asked:?}"
    );
    assert_eq!(asked[0]["params"], json!({"uris": [uri], "waitMs": 0}));
    assert_eq!(asked[1]["params"], json!({"uris": [uri], "waitMs": 1500}));

    let requests = llm.requests();
    assert!(tool_names(&requests[0].body).contains(&"lsp".to_string()));
    let after_edit = requests[1].body.to_string();
    assert!(
        after_edit.contains(
            "report 1 new error after this change:\\nsrc/lib.rs:2:13: error: mismatched types / \
             expected `u32`, found `&str` [rustc E0308]"
        ),
        "only the new error, at the model's column: {after_edit}"
    );
    assert!(
        !after_edit.contains("never used"),
        "the old warning is not new"
    );

    let lsp = client.received("agent/lsp");
    assert_eq!(lsp[0]["params"]["method"], "textDocument/definition");
    assert_eq!(
        lsp[0]["params"]["params"],
        json!({"textDocument": {"uri": uri}, "position": {"line": 1, "character": 13}}),
        "the model's 13th character is utf-16 unit 13 after the two-unit emoji"
    );
    assert!(
        requests[2]
            .body
            .to_string()
            .contains("src/lib.rs:1:8: pub fn answer() -> u32 {"),
        "the definition with its line: {}",
        requests[2].body
    );
    assert_eq!(lsp[1]["params"]["method"], "textDocument/documentSymbol");
    assert!(
        requests[3]
            .body
            .to_string()
            .contains("function answer src/lib.rs:1:8\\n  variable inner src/lib.rs:2:13"),
        "the outline, nested: {}",
        requests[3].body
    );
    client.shutdown_and_exit().await;
}

#[tokio::test]
async fn a_client_without_the_flags_is_never_asked_and_the_model_gets_no_lsp_tool() {
    let llm = FakeLlm::start(
        &json!({"turns": [
            {"reply": {"tool_calls": [{"name": "lsp", "arguments": {
                "operation": "workspaceSymbol", "query": "answer"}}]}},
            {"reply": {"text": "Done."}},
        ]}),
        "openai",
    );
    let env = TestEnv::new();
    let (client, _sid) = prompted(&env, &llm, "", "where is answer defined?").await;
    client
        .wait_until("the second request", || {
            (llm.requests().len() >= 2).then_some(())
        })
        .await;
    let requests = llm.requests();
    assert!(!tool_names(&requests[0].body).contains(&"lsp".to_string()));
    assert!(
        requests[1]
            .body
            .to_string()
            .contains("there is no tool named \\\"lsp\\\""),
        "{}",
        requests[1].body
    );
    assert!(client.received("agent/diagnostics").is_empty());
    assert!(client.received("agent/lsp").is_empty());
    client.shutdown_and_exit().await;
}
