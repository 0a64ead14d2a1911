//! The editor surface through the real server: a client with every `agent/*` flag, and one
//! that declares exactly what Helix declares (no flags, no showMessageRequest).

use agent_lsp_tests::lsp_client::{LspClient, file_uri, initialize_params};
use agent_lsp_tests::process::{FakeLlm, TestEnv, answer_edit_turns};
use serde_json::{Value, json};

fn configure(env: &TestEnv, llm: &FakeLlm) {
    env.answer_workspace(llm);
}

fn edit_script() -> Value {
    json!({ "turns": answer_edit_turns() })
}

async fn open(client: &LspClient, env: &TestEnv, text: &str) -> String {
    let uri = file_uri(&env.workspace().join("src/lib.rs"));
    client
        .notify(
            "textDocument/didOpen",
            json!({"textDocument": {"uri": uri, "languageId": "rust", "version": 1, "text": text}}),
        )
        .await;
    uri
}

/// The server for `env`, initialized by a client declaring `experimental` capabilities.
async fn start(env: &TestEnv, experimental: Value) -> LspClient {
    let client = LspClient::spawn(env, &[("FAKE_KEY", "k")]);
    let mut params = initialize_params(&env.workspace());
    params["capabilities"]["experimental"] = experimental;
    client.initialize(params).await;
    client
}

fn updates(client: &LspClient, kind: &str) -> Vec<Value> {
    client
        .received("agent/update")
        .into_iter()
        .filter(|u| u["params"]["update"]["kind"] == kind)
        .collect()
}

#[tokio::test]
async fn a_client_with_every_flag_streams_approves_and_gets_the_edit_in_its_buffer() {
    let llm = FakeLlm::start(&edit_script(), "openai");
    let env = TestEnv::new();
    configure(&env, &llm);
    let client = LspClient::spawn(&env, &[("FAKE_KEY", "k")]);
    let mut params = initialize_params(&env.workspace());
    params["capabilities"]["experimental"] =
        json!({"agent": {"updates": true, "permissions": true, "questions": true}});
    let init = client.initialize(params).await;
    let commands = init["capabilities"]["executeCommandProvider"]["commands"]
        .as_array()
        .unwrap()
        .clone();
    assert!(
        commands.contains(&json!("agent.run"))
            && commands.contains(&json!("agent.answerPermission"))
    );
    client.reply_to("agent/requestPermission", json!({"outcome": "once"}));
    let uri = open(&client, &env, "pub fn answer() -> u32 {\n    41\n}\n").await;

    let reply = client
        .request(
            "agent/prompt",
            json!({"text": "make the answer 42", "context": {"uri": uri}}),
        )
        .await
        .unwrap();
    let sid = reply["sessionId"].as_str().unwrap().to_string();
    assert!(reply["messageId"].is_string());

    // The permission request carries the diff; the edit arrives as workspace/applyEdit.
    let ask = client.wait_for("agent/requestPermission", |_| true).await;
    assert_eq!(ask["params"]["permission"], "edit");
    assert_eq!(ask["params"]["sessionId"], sid);
    assert!(ask["params"]["diff"].as_str().unwrap().contains("+    42"));
    // Before and after, for an editor's diff view.
    let change = &ask["params"]["changes"][0];
    assert!(change["path"].as_str().unwrap().ends_with("src/lib.rs"));
    assert!(change["oldText"].as_str().unwrap().contains("    41"));
    assert!(change["newText"].as_str().unwrap().contains("    42"));
    let edit = client.wait_for("workspace/applyEdit", |_| true).await;
    let change = &edit["params"]["edit"]["documentChanges"][0];
    assert_eq!(change["textDocument"]["uri"], uri);
    assert_eq!(change["textDocument"]["version"], 1);
    assert_eq!(change["edits"][0]["newText"], "    42\n");
    // The file on disk is the editor's to save.
    assert!(
        std::fs::read_to_string(env.workspace().join("src/lib.rs"))
            .unwrap()
            .contains("41")
    );

    client
        .wait_for("agent/update", |u| {
            u["params"]["update"]["kind"] == "status" && u["params"]["update"]["status"] == "idle"
        })
        .await;
    let text: String = updates(&client, "message_chunk")
        .iter()
        .map(|u| u["params"]["update"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(text, "Fixing it.The answer is now 42.");
    assert!(!updates(&client, "user_message").is_empty());
    let tool = updates(&client, "tool_call");
    assert_eq!(tool[0]["params"]["update"]["toolKind"], "edit");
    let done = updates(&client, "tool_call_update");
    let output = done[0]["params"]["update"]["output"].as_str().unwrap();
    assert!(
        output.contains("in its buffer, not saved yet"),
        "the model learns the edit is unsaved: {output}"
    );
    let diff = &done[0]["params"]["update"]["diff"];
    assert_eq!(diff["uri"], uri);
    assert!(
        diff["oldText"].as_str().unwrap().contains("41")
            && diff["newText"].as_str().unwrap().contains("42")
    );
    let idle = updates(&client, "status")
        .into_iter()
        .find(|u| u["params"]["update"]["status"] == "idle")
        .unwrap();
    assert_eq!(idle["params"]["update"]["stopReason"], "end_turn");
    let seqs: Vec<u64> = client
        .received("agent/update")
        .iter()
        .map(|u| u["params"]["seq"].as_u64().unwrap())
        .collect();
    assert!(
        seqs.windows(2).all(|w| w[1] == w[0] + 1),
        "seq has no gaps: {seqs:?}"
    );

    let history = client
        .request("agent/history", json!({"sessionId": sid}))
        .await
        .unwrap();
    assert_eq!(history["messages"].as_array().unwrap().len(), 3);
    let sessions = client.request("agent/sessions", json!({})).await.unwrap();
    assert_eq!(sessions[0]["sessionId"], sid);
    // The recall index, for a search box.
    let found = client
        .request("agent/search", json!({"query": "answer"}))
        .await
        .unwrap();
    assert!(
        found
            .as_array()
            .unwrap()
            .iter()
            .any(|h| h["sessionId"] == sid && h["snippet"].as_str().unwrap().contains("«answer»")),
        "{found}"
    );
    assert_eq!(sessions[0]["status"], "idle");
    // Cancelling an idle session is a no-op.
    assert_eq!(
        client
            .request("agent/cancel", json!({"sessionId": sid}))
            .await
            .unwrap(),
        json!({})
    );
    assert_eq!(client.shutdown_and_exit().await, 0);
}

#[tokio::test]
async fn a_helix_like_client_works_through_code_actions_progress_and_messages() {
    let llm = FakeLlm::start(&edit_script(), "openai");
    let env = TestEnv::new();
    configure(&env, &llm);
    let client = LspClient::spawn(&env, &[("FAKE_KEY", "k")]);
    let mut helix: Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../fixtures/clients/helix.json"
        ))
        .unwrap(),
    )
    .unwrap();
    let root = file_uri(&env.workspace());
    helix["rootUri"] = json!(root);
    helix["workspaceFolders"] = json!([{"uri": root, "name": "ws"}]);
    assert!(helix["capabilities"].get("experimental").is_none());
    assert!(
        helix["capabilities"]["window"].get("showMessage").is_none(),
        "Helix has no showMessageRequest"
    );
    client.initialize(helix).await;
    let text = "pub fn answer() -> u32 {\n    // AGENT: make the answer 42\n    41\n}\n";
    let uri = open(&client, &env, text).await;

    // The AGENT: comment offers an action; running it answers at once.
    let actions = client.code_actions(&uri, 1, 4, 4).await;
    let reply = client
        .run_action(&actions, |t| t == "Agent: do what the comment says")
        .await;
    let sid = reply["sessionId"].as_str().unwrap().to_string();

    // The permission is announced, then offered as code actions.
    client
        .wait_for("window/showMessage", |m| {
            m["params"]["message"]
                .as_str()
                .unwrap_or("")
                .contains("asks permission")
        })
        .await;
    client
        .wait_for("$/progress", |p| p["params"]["value"]["kind"] == "begin")
        .await;
    let actions = client.code_actions(&uri, 0, 0, 0).await;
    let titles: Vec<&str> = actions
        .iter()
        .map(|a| a["title"].as_str().unwrap())
        .collect();
    let allow = actions
        .iter()
        .find(|a| a["title"].as_str().unwrap().ends_with(" once"));
    assert_eq!(
        allow.unwrap_or_else(|| panic!("{titles:?}"))["kind"],
        "quickfix"
    );
    assert!(
        titles.iter().any(|t| t.starts_with("Agent: deny")),
        "{titles:?}"
    );
    client.run_action(&actions, |t| t.ends_with(" once")).await;

    let edit = client.wait_for("workspace/applyEdit", |_| true).await;
    assert_eq!(
        edit["params"]["edit"]["documentChanges"][0]["edits"][0]["newText"],
        "    42\n"
    );
    client
        .wait_for("$/progress", |p| p["params"]["value"]["kind"] == "end")
        .await;
    let done = client
        .wait_for("window/showMessage", |m| {
            m["params"]["message"]
                .as_str()
                .unwrap_or("")
                .contains("The answer is now 42.")
        })
        .await;
    assert!(
        done["params"]["message"]
            .as_str()
            .unwrap()
            .contains("transcript")
    );
    let reports: Vec<String> = client
        .received("$/progress")
        .iter()
        .filter_map(|p| p["params"]["value"]["message"].as_str().map(String::from))
        .collect();
    assert!(
        reports
            .iter()
            .any(|r| r.contains("running edit src/lib.rs")),
        "{reports:?}"
    );
    assert!(
        client.received("agent/update").is_empty(),
        "no extension notifications without the flag"
    );
    let transcript = env.data_dir().join("transcripts").join(format!("{sid}.md"));
    let body = std::fs::read_to_string(&transcript).unwrap();
    assert!(
        body.contains("AGENT: make the answer 42") || body.contains("make the answer 42"),
        "{body}"
    );
    assert!(body.contains("The answer is now 42."));
    // The request to the model carried the instruction and the file.
    assert!(
        llm.requests()[0]
            .body
            .to_string()
            .contains("remove that comment")
    );

    // Undo through the code action: the editor applied the edit, and the revert comes back
    // as another edit of the open buffer.
    client
        .change_document(
            &uri,
            2,
            "pub fn answer() -> u32 {\n    // AGENT: make the answer 42\n    42\n}\n",
        )
        .await;
    // (The turn's task winds down just after the idle status: until then "cancel" is
    // offered instead.)
    let mut actions = client.code_actions(&uri, 0, 0, 0).await;
    for _ in 0..100 {
        if actions
            .iter()
            .any(|a| a["title"] == "Agent: undo last change")
        {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        actions = client.code_actions(&uri, 0, 0, 0).await;
    }
    let undone = client
        .run_action(&actions, |t| t == "Agent: undo last change")
        .await;
    assert_eq!(undone["files"], json!(["src/lib.rs"]));
    let edits = client.received("workspace/applyEdit");
    assert_eq!(
        edits.last().unwrap()["params"]["edit"]["documentChanges"][0]["edits"][0]["newText"],
        "    41\n"
    );
    assert_eq!(client.shutdown_and_exit().await, 0);
}

#[tokio::test]
async fn cancel_while_a_permission_is_pending_rejects_it() {
    let llm = FakeLlm::start(&edit_script(), "openai");
    let env = TestEnv::new();
    configure(&env, &llm);
    let client = LspClient::spawn(&env, &[("FAKE_KEY", "k")]);
    let mut helix = initialize_params(&env.workspace());
    helix["capabilities"]["window"] = json!({"workDoneProgress": true});
    client.initialize(helix).await;
    let reply = client
        .request("agent/prompt", json!({"text": "edit it"}))
        .await
        .unwrap();
    let sid = reply["sessionId"].as_str().unwrap().to_string();
    client
        .wait_for("window/showMessage", |m| {
            m["params"]["message"]
                .as_str()
                .unwrap_or("")
                .contains("asks permission")
        })
        .await;
    let history = client
        .request("agent/history", json!({"sessionId": sid}))
        .await
        .unwrap();
    assert_eq!(history["pendingPermissions"].as_array().unwrap().len(), 1);
    let sessions = client.request("agent/sessions", json!({})).await.unwrap();
    assert_eq!(sessions[0]["status"], "waiting");
    client
        .request("agent/cancel", json!({"sessionId": sid}))
        .await
        .unwrap();
    client
        .wait_until("the session to go idle", || {
            let s = futures_idle(&client);
            s.then_some(())
        })
        .await;
    assert!(
        std::fs::read_to_string(env.workspace().join("src/lib.rs"))
            .unwrap()
            .contains("41"),
        "nothing written"
    );
    assert_eq!(client.shutdown_and_exit().await, 0);
}

/// Whether the progress of the last turn ended (the turn is over).
fn futures_idle(client: &LspClient) -> bool {
    client
        .received("$/progress")
        .iter()
        .any(|p| p["params"]["value"]["kind"] == "end")
}

#[tokio::test]
async fn requests_are_answered_promptly_while_the_agent_streams() {
    let long: String = "word ".repeat(400);
    let llm = FakeLlm::start(
        &json!({"chunk_delay_ms": 5, "chunk_chars": 4, "turns": [{"reply": {"text": long}}]}),
        "openai",
    );
    let env = TestEnv::new();
    configure(&env, &llm);
    let client = start(&env, json!({"agent": {"updates": true}})).await;
    let uri = open(&client, &env, "fn a() {}\n").await;
    client
        .request("agent/prompt", json!({"text": "talk"}))
        .await
        .unwrap();
    client
        .wait_for("agent/update", |u| {
            u["params"]["update"]["kind"] == "message_chunk"
        })
        .await;
    // While it streams: a code action and a change are served at once.
    let started = std::time::Instant::now();
    client.code_actions(&uri, 0, 0, 2).await;
    assert!(started.elapsed() < std::time::Duration::from_secs(2));
    client
        .wait_for("agent/update", |u| {
            u["params"]["update"]["kind"] == "status" && u["params"]["update"]["status"] == "idle"
        })
        .await;
    let chunks = updates(&client, "message_chunk");
    let text: String = chunks
        .iter()
        .map(|u| u["params"]["update"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(text, long, "the full text arrives intact, in order");
    assert!(
        chunks.len() < 500,
        "{} notifications for 500 chunks: coalesced",
        chunks.len()
    );
    assert_eq!(client.shutdown_and_exit().await, 0);
}

#[tokio::test]
async fn after_a_crash_mid_turn_a_new_client_reads_the_whole_history() {
    let long: String = "chunk ".repeat(300);
    let llm = FakeLlm::start(
        &json!({"chunk_delay_ms": 10, "chunk_chars": 6, "turns": [{"reply": {"text": long}}]}),
        "openai",
    );
    let env = TestEnv::new();
    configure(&env, &llm);
    let client = LspClient::spawn(&env, &[("FAKE_KEY", "k")]);
    let mut params = initialize_params(&env.workspace());
    params["capabilities"]["experimental"] = json!({"agent": {"updates": true}});
    client.initialize(params.clone()).await;
    let sid = client
        .request("agent/prompt", json!({"text": "talk for a while"}))
        .await
        .unwrap()["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    // Wait until some of the answer has been written, then the editor dies.
    client
        .wait_until("part of the answer to be stored", || {
            let store = agent_lsp::store::Store::open(&env.database()).ok()?;
            let view = store.session(&sid).ok()??;
            let text: String = view
                .messages
                .iter()
                .flat_map(|m| &m.parts)
                .filter(|p| p.kind == agent_lsp::status::PartKind::Text)
                .filter_map(|p| p.data["text"].as_str().map(String::from))
                .collect();
            (text.len() > 100).then_some(())
        })
        .await;
    let pid = client.id().unwrap();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    drop(client);

    let client = LspClient::spawn(&env, &[("FAKE_KEY", "k")]);
    client.initialize(params).await;
    // The first agent request of the new server recovers the log.
    let sessions = client.request("agent/sessions", json!({})).await.unwrap();
    assert_eq!(sessions[0]["sessionId"], sid);
    let history = client
        .request("agent/history", json!({"sessionId": sid}))
        .await
        .unwrap();
    let messages = history["messages"].as_array().unwrap();
    assert_eq!(messages[0]["parts"][0]["data"]["text"], "talk for a while");
    let answer = messages[1]["parts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["kind"] == "text")
        .unwrap();
    assert!(
        answer["data"]["text"]
            .as_str()
            .unwrap()
            .starts_with("chunk chunk")
    );
    assert_eq!(answer["status"], "interrupted");
    assert_eq!(client.shutdown_and_exit().await, 0);
}

#[tokio::test]
async fn two_sessions_run_at_once_in_one_workspace() {
    let llm = FakeLlm::start(
        &json!({"chunk_delay_ms": 5, "turns": [
        {"reply": {"text": "first answer here"}}, {"reply": {"text": "second answer here"}}]}),
        "openai",
    );
    let env = TestEnv::new();
    configure(&env, &llm);
    let client = start(&env, json!({"agent": {"updates": true}})).await;
    let a = client
        .request("agent/prompt", json!({"text": "one"}))
        .await
        .unwrap()["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    let b = client
        .request("agent/prompt", json!({"text": "two"}))
        .await
        .unwrap()["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    assert_ne!(a, b);
    for sid in [&a, &b] {
        client
            .wait_for("agent/update", |u| {
                u["params"]["sessionId"] == **sid && u["params"]["update"]["status"] == "idle"
            })
            .await;
    }
    let answers: Vec<String> = [&a, &b]
        .iter()
        .map(|sid| {
            updates(&client, "message_chunk")
                .iter()
                .filter(|u| u["params"]["sessionId"] == ***sid)
                .map(|u| u["params"]["update"]["text"].as_str().unwrap().to_string())
                .collect()
        })
        .collect();
    let mut sorted = answers.clone();
    sorted.sort();
    assert_eq!(sorted, ["first answer here", "second answer here"]);
    assert_eq!(client.shutdown_and_exit().await, 0);
}

/// A client with updates and permissions that approves everything, the answer file open,
/// and the prompt "make it 42" sent: the edit script's turn is under way.
async fn prompted_edit(env: &TestEnv) -> (LspClient, String, String) {
    let client = start(
        env,
        json!({"agent": {"updates": true, "permissions": true}}),
    )
    .await;
    client.reply_to("agent/requestPermission", json!({"outcome": "once"}));
    let uri = open(&client, env, "pub fn answer() -> u32 {\n    41\n}\n").await;
    let sid = client
        .request("agent/prompt", json!({"text": "make it 42"}))
        .await
        .unwrap()["sessionId"]
        .as_str()
        .unwrap()
        .to_string();
    (client, uri, sid)
}

#[tokio::test]
async fn undo_and_redo_of_an_edit_in_an_open_buffer_go_through_the_editor() {
    let llm = FakeLlm::start(&edit_script(), "openai");
    let env = TestEnv::new();
    configure(&env, &llm);
    let (client, uri, sid) = prompted_edit(&env).await;
    client.wait_for("workspace/applyEdit", |_| true).await;
    // The editor applies the edit to its buffer and tells the server (unsaved).
    client
        .change_document(&uri, 2, "pub fn answer() -> u32 {\n    42\n}\n")
        .await;
    client
        .wait_for("agent/update", |u| {
            u["params"]["update"]["kind"] == "status" && u["params"]["update"]["status"] == "idle"
        })
        .await;

    let undone = client
        .request("agent/undo", json!({"sessionId": sid}))
        .await
        .unwrap();
    assert_eq!(undone["text"], "make it 42");
    assert_eq!(undone["files"], json!(["src/lib.rs"]));
    let edits = client.received("workspace/applyEdit");
    assert_eq!(
        edits.len(),
        2,
        "the revert arrived as an edit of the open buffer"
    );
    let change = &edits[1]["params"]["edit"]["documentChanges"][0];
    assert_eq!(change["textDocument"]["version"], 2);
    assert_eq!(change["edits"][0]["newText"], "    41\n");
    assert!(
        std::fs::read_to_string(env.workspace().join("src/lib.rs"))
            .unwrap()
            .contains("41"),
        "disk untouched"
    );
    client
        .change_document(&uri, 3, "pub fn answer() -> u32 {\n    41\n}\n")
        .await;
    client
        .request("agent/redo", json!({"sessionId": sid}))
        .await
        .unwrap();
    let edits = client.received("workspace/applyEdit");
    assert_eq!(edits.len(), 3);
    assert_eq!(
        edits[2]["params"]["edit"]["documentChanges"][0]["edits"][0]["newText"],
        "    42\n"
    );
    assert_eq!(client.shutdown_and_exit().await, 0);
}

fn ask_script() -> Value {
    json!({"turns": [
        {"reply": {"tool_calls": [
            {"name": "question", "arguments": {"questions": [{"question": "Which greeting?", "header": "Greeting",
                "options": [{"label": "hello", "description": ""}, {"label": "hi", "description": ""}]}]}},
            {"name": "todowrite", "arguments": {"todos": [{"content": "greet", "status": "in_progress"}]}},
            {"name": "bash", "arguments": {"command": "echo asked"}}
        ]}},
        {"expect": {"request_contains": "A: hi"}, "reply": {"text": "Greeting chosen."}}
    ]})
}

#[tokio::test]
async fn questions_and_plans_with_the_flags() {
    let llm = FakeLlm::start(&ask_script(), "openai");
    let env = TestEnv::new();
    configure(&env, &llm);
    let client = start(
        &env,
        json!({"agent": {"updates": true, "permissions": true, "questions": true}}),
    )
    .await;
    client.reply_to("agent/question", json!({"answers": [["hi"]]}));
    client.reply_to("agent/requestPermission", json!({"outcome": "always"}));
    client
        .request("agent/prompt", json!({"text": "greet"}))
        .await
        .unwrap();
    client
        .wait_for("agent/update", |u| {
            u["params"]["update"]["status"] == "idle"
        })
        .await;
    let q = client.received("agent/question");
    assert_eq!(
        q[0]["params"]["questions"][0]["question"],
        "Which greeting?"
    );
    let plan = updates(&client, "plan");
    assert_eq!(plan[0]["params"]["update"]["todos"][0]["content"], "greet");
    assert!(
        llm.requests().iter().all(|r| r.error.is_none()),
        "{:?}",
        llm.requests()
    );
    assert_eq!(client.shutdown_and_exit().await, 0);
}

#[tokio::test]
async fn show_message_request_carries_permissions_and_questions_without_the_flags() {
    let llm = FakeLlm::start(&ask_script(), "openai");
    let env = TestEnv::new();
    configure(&env, &llm);
    let client = LspClient::spawn(&env, &[("FAKE_KEY", "k")]);
    let mut params = initialize_params(&env.workspace());
    params["capabilities"]["window"] = json!({"showMessage": {"messageActionItem": {"additionalPropertiesSupport": false}}, "workDoneProgress": true});
    client.initialize(params).await;
    // The test client answers every showMessageRequest with "hi"; then with "Allow once".
    client.reply_to("window/showMessageRequest", json!({"title": "hi"}));
    client
        .request("agent/prompt", json!({"text": "greet"}))
        .await
        .unwrap();
    client
        .wait_for("window/showMessageRequest", |m| {
            m["params"]["message"]
                .as_str()
                .unwrap_or("")
                .contains("echo asked")
        })
        .await;
    // "hi" is no permission answer: the bash call was refused, and the turn stopped there.
    client
        .wait_for("$/progress", |p| p["params"]["value"]["kind"] == "end")
        .await;
    let asks = client.received("window/showMessageRequest");
    assert_eq!(asks[0]["params"]["message"], "Which greeting?");
    assert_eq!(asks[0]["params"]["actions"][1]["title"], "hi");
    let titles: Vec<&str> = asks[1]["params"]["actions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["title"].as_str().unwrap())
        .collect();
    assert_eq!(titles, ["Allow once", "Always allow", "Deny"]);
    assert_eq!(client.shutdown_and_exit().await, 0);
}

#[tokio::test]
async fn deletes_and_renames_go_through_the_editor_when_it_supports_resource_operations() {
    let script = json!({"turns": [
        {"reply": {"tool_calls": [{"name": "apply_patch", "arguments": {"patchText":
            "*** Begin Patch\n*** Delete File: gone.txt\n*** Update File: old.txt\n*** Move to: new.txt\n@@\n-old\n+new\n*** Add File: added.txt\n+fresh\n*** End Patch"}}]}},
        {"reply": {"text": "done"}}
    ]});
    let llm = FakeLlm::start(&script, "openai");
    let env = TestEnv::new();
    configure(&env, &llm);
    std::fs::write(env.workspace().join("gone.txt"), "bye\n").unwrap();
    std::fs::write(env.workspace().join("old.txt"), "old\n").unwrap();
    let client = LspClient::spawn(&env, &[("FAKE_KEY", "k")]);
    let mut params = initialize_params(&env.workspace());
    params["capabilities"]["workspace"]["workspaceEdit"]["resourceOperations"] =
        json!(["create", "rename", "delete"]);
    params["capabilities"]["experimental"] = json!({"agent": {"updates": true}});
    client.initialize(params).await;
    client
        .request("agent/prompt", json!({"text": "tidy", "mode": "auto"}))
        .await
        .unwrap();
    client
        .wait_for("agent/update", |u| {
            u["params"]["update"]["status"] == "idle"
        })
        .await;
    let ops: Vec<Value> = client
        .received("workspace/applyEdit")
        .iter()
        .map(|e| e["params"]["edit"]["documentChanges"][0].clone())
        .collect();
    assert_eq!(ops[0]["kind"], "delete");
    assert!(ops[0]["uri"].as_str().unwrap().ends_with("/gone.txt"));
    assert_eq!(ops[1]["kind"], "rename");
    assert!(ops[1]["newUri"].as_str().unwrap().ends_with("/new.txt"));
    // (This test client does not carry the rename out, so new.txt is created too.)
    assert!(
        ops.iter()
            .any(|o| o["kind"] == "create" && o["uri"].as_str().unwrap().ends_with("/added.txt")),
        "{ops:?}"
    );
    // The new file and its text are one edit (one undo step in the editor): the creation,
    // then the text inserted into it; the server leaves the writing to the editor.
    let created = client
        .received("workspace/applyEdit")
        .into_iter()
        .map(|e| e["params"]["edit"]["documentChanges"].clone())
        .find(|c| c[0]["kind"] == "create" && c[0]["uri"].as_str().unwrap().ends_with("/added.txt"))
        .unwrap();
    assert_eq!(
        created[1]["textDocument"]["uri"], created[0]["uri"],
        "{created}"
    );
    assert_eq!(created[1]["edits"][0]["newText"], "fresh\n", "{created}");
    assert!(
        !env.workspace().join("added.txt").exists(),
        "the server did not write it (this client takes the edit without carrying it out)"
    );
    assert_eq!(client.shutdown_and_exit().await, 0);
}

#[tokio::test]
async fn undo_and_redo_after_an_edit_the_editor_applied_but_never_reported() {
    // Some clients apply workspace/applyEdit and batch or drop the didChange: the server's
    // copy must follow its own edit, and undo/redo must still send the edits they report.
    let llm = FakeLlm::start(&edit_script(), "openai");
    let env = TestEnv::new();
    configure(&env, &llm);
    let (client, uri, sid) = prompted_edit(&env).await;
    client
        .wait_for("agent/update", |u| {
            u["params"]["update"]["kind"] == "status" && u["params"]["update"]["status"] == "idle"
        })
        .await;
    let text = client
        .request("agent/documentText", json!({"uri": uri}))
        .await
        .unwrap();
    assert_eq!(text["version"], 1, "no didChange came");

    let undone = client
        .request("agent/undo", json!({"sessionId": sid}))
        .await
        .unwrap();
    assert_eq!(undone["files"], json!(["src/lib.rs"]));
    let edits = client.received("workspace/applyEdit");
    assert_eq!(
        edits.len(),
        2,
        "the undo sent the edit it reports: {edits:?}"
    );
    let change = &edits[1]["params"]["edit"]["documentChanges"][0];
    assert_eq!(change["edits"][0]["newText"], "    41\n");
    assert!(
        change["textDocument"]["version"].is_null(),
        "the editor's version moved on unreported: {change}"
    );
    client
        .request("agent/redo", json!({"sessionId": sid}))
        .await
        .unwrap();
    let edits = client.received("workspace/applyEdit");
    assert_eq!(edits.len(), 3, "the redo sent its edit too");
    assert_eq!(
        edits[2]["params"]["edit"]["documentChanges"][0]["edits"][0]["newText"],
        "    42\n"
    );
    // The editor's late didChange (with its own version) is the truth from then on.
    client
        .change_document(&uri, 5, "pub fn answer() -> u32 {\n    42\n}\n")
        .await;
    client
        .request("agent/undo", json!({"sessionId": sid}))
        .await
        .unwrap();
    let edits = client.received("workspace/applyEdit");
    assert_eq!(edits.len(), 4);
    assert_eq!(
        edits[3]["params"]["edit"]["documentChanges"][0]["textDocument"]["version"],
        5
    );
    assert_eq!(client.shutdown_and_exit().await, 0);
}

#[tokio::test]
async fn an_always_answer_is_saved_listed_and_revoked_from_the_command_line() {
    let call = |n: u32| json!({"reply": {"tool_calls": [{"name": "bash", "arguments": {"command": format!("echo saved {n}")}}]}});
    let done = json!({"expect": {"last_message_contains": "saved"}, "reply": {"text": "Done."}});
    let turns = [call(1), done.clone(), call(2), done.clone(), call(3), done];
    let llm = FakeLlm::start(&json!({ "turns": turns }), "openai");
    let env = TestEnv::new();
    configure(&env, &llm);
    let client = start(
        &env,
        json!({"agent": {"updates": true, "permissions": true}}),
    )
    .await;
    client.reply_to("agent/requestPermission", json!({"outcome": "always"}));
    let turn = |n: usize| {
        let client = &client;
        async move {
            client
                .request("agent/prompt", json!({"text": "echo"}))
                .await
                .unwrap();
            client
                .wait_until("the turn's end", || {
                    let idle = updates(client, "status")
                        .into_iter()
                        .filter(|u| u["params"]["update"]["status"] == "idle")
                        .count();
                    (idle >= n).then_some(())
                })
                .await;
        }
    };
    let asks = || client.received("agent/requestPermission").len();
    let workspace = env.workspace().display().to_string();
    let permission = |args: &[&str]| {
        let mut all = vec!["permission", "--cwd", &workspace];
        all.extend_from_slice(args);
        env.run(&all)
    };

    turn(1).await;
    assert_eq!(asks(), 1);
    let (code, out, err) = permission(&["list", "--json"]);
    assert_eq!(code, 0, "{err}");
    let saved: Value = serde_json::from_str(&out).unwrap();
    let saved = saved.as_array().unwrap().clone();
    assert_eq!(saved.len(), 1, "{saved:?}");
    assert_eq!(saved[0]["permission"], "bash");
    let pattern = saved[0]["pattern"].as_str().unwrap().to_string();
    assert!(pattern.starts_with("echo"), "{pattern}");

    turn(2).await;
    assert_eq!(asks(), 1, "the saved answer holds: no second ask");

    let (code, _, err) = permission(&["revoke", "bash", "no such pattern"]);
    assert_eq!(code, 1);
    assert!(err.contains("no such saved permission"), "{err}");
    let (code, out, err) = permission(&["revoke", "bash", &pattern]);
    assert_eq!(
        (code, out.trim()),
        (0, "revoked 1 saved permission(s)"),
        "{err}"
    );
    let (_, out, _) = permission(&["list"]);
    assert!(out.contains("no saved permissions"), "{out}");

    turn(3).await;
    assert_eq!(asks(), 2, "revoked: the agent asks again");
    assert!(llm.requests().iter().all(|r| r.error.is_none()));
    assert_eq!(client.shutdown_and_exit().await, 0);
}
