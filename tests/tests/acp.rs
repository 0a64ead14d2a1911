//! `agent-lsp acp` with a real ACP client: editors/acp/test/client.mjs drives the real binary
//! with the official TypeScript SDK (`@agentclientprotocol/sdk`, installed by scripts/test
//! into editors/acp/node_modules) and checks every message against the SDK's JSON schema;
//! here the fake model's side is checked. The script's exit code is the verdict.

use std::process::{Command, Stdio};

use agent_lsp_tests::process::{FakeLlm, TestEnv, agent_lsp_bin, answer_edit_turns, repo_root};
use serde_json::json;

#[test]
fn the_official_acp_sdk_drives_a_session_through_the_binary() {
    let mut turns = answer_edit_turns();
    turns[0]["expect"] = json!({"last_message_contains": "change the answer to 42"});
    // With the edit, a todo list (a `plan` update); with the answer, reasoning (thought chunks).
    turns[0]["reply"]["tool_calls"]
        .as_array_mut()
        .unwrap()
        // First: the next turn's expect looks at the last result, the edit's.
        .insert(
            0,
            json!({"name": "todowrite", "arguments": {"todos": [
            {"content": "Change the answer", "status": "in_progress", "priority": "high"},
            {"content": "Run the tests", "status": "pending", "priority": "medium"}]}}),
        );
    turns[1]["reply"]["reasoning"] = json!("The edit went through; say so.");
    // A new file, which the client creates through fs/write_text_file.
    turns.insert(
        2,
        json!({"expect": {"last_message_contains": "make a notes file"},
        "reply": {"tool_calls": [{"name": "write", "arguments": {
            "filePath": "notes/new.txt", "content": "made by the agent\n"}}]}}),
    );
    turns.insert(3, json!({"reply": {"text": "Made it."}}));
    turns.push(
        json!({"expect": {"last_message_contains": "run the slow tests"},
        "reply": {"tool_calls": [{"name": "bash", "arguments": {
            "command": "sleep 30", "description": "the slow tests"}}]}}),
    );
    // A session with the client's MCP server.
    turns.push(json!({"expect": {"tools_include": ["everything_echo"]},
        "reply": {"tool_calls": [{"name": "everything_echo", "arguments": {"message": "via acp"}}]}}));
    turns.push(json!({"expect": {"last_message_contains": "Echo: via acp"},
        "reply": {"text": "Echoed."}}));
    turns.push(json!({"expect": {"last_message_contains": "deploy it"},
        "reply": {"tool_calls": [{"name": "bash", "arguments": {
            "command": "./deploy.sh", "description": "deploy"}}]}}));
    turns.push(
        json!({"expect": {"last_message_contains": "not on a Friday"},
        "reply": {"text": "Not deploying."}}),
    );
    turns.push(
        json!({"expect": {"last_message_contains": "something the filter stops"},
        "reply": {"text": "I can", "finish_reason": "content_filter"}}),
    );
    // Background distillation once enough is undistilled answers aside, not from the turns.
    let side = json!([{"expect": {"system_contains": "observer of a coding session"},
                       "reply": {"text": "- [10:00] [high] made the answer 42"}}]);
    let llm = FakeLlm::start(&json!({ "turns": turns, "side": side }), "openai");
    let env = TestEnv::new();
    let file = env.answer_workspace(&llm);
    std::fs::create_dir_all(env.workspace().join(".git")).unwrap();

    let acp = repo_root().join("editors/acp");
    assert!(
        acp.join("node_modules/@agentclientprotocol/sdk").exists(),
        "run scripts/test first: it installs the ACP SDK into {}",
        acp.display()
    );
    let everything = repo_root().join(
        "tests/mcp-servers/node_modules/@modelcontextprotocol/server-everything/dist/index.js",
    );
    assert!(
        everything.exists(),
        "run scripts/test first: it installs the MCP servers"
    );
    let mut cmd = Command::new("node");
    env.apply(&mut cmd);
    let status = cmd
        .arg(acp.join("test/client.mjs"))
        .env("AGENT_LSP_BIN", agent_lsp_bin())
        .env("WORKSPACE", env.workspace())
        .env("FAKE_KEY", "k")
        .env("MCP_EVERYTHING", everything)
        .current_dir(&acp)
        .stdin(Stdio::null())
        .status()
        .expect("run node");
    assert!(
        status.success(),
        "client.mjs failed ({status}); its output is above"
    );

    // The session's turns (distillation after a turn may add requests of its own).
    let requests: Vec<_> = llm
        .requests()
        .into_iter()
        .filter(|q| q.turn.is_some())
        .collect();
    let turns: Vec<_> = requests.iter().map(|q| q.turn).collect();
    assert_eq!(requests.len(), 10, "ten scripted model requests: {turns:?}");
    let first = requests[0].body.to_string();
    assert!(
        first.contains("The user attached lib.rs"),
        "the resource link went along as context: {first}"
    );
    // The edit reached the disk through the client's fs/write_text_file, and so did the
    // new file.
    assert!(std::fs::read_to_string(&file).unwrap().contains("42"));
    assert_eq!(
        std::fs::read_to_string(env.workspace().join("notes/new.txt")).unwrap(),
        "made by the agent\n"
    );
}
