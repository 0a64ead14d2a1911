//! Every `agent/*` message of a real session — the client's requests and the server's
//! results, `agent/update` notifications, permission asks and questions with the client's
//! answers — validates against `editors/protocol/agent-protocol.schema.json`.

use agent_lsp_tests::lsp_client::{LspClient, file_uri, initialize_params};
use agent_lsp_tests::process::{FakeLlm, TestEnv, repo_root};
use serde_json::{Value, json};

struct Protocol {
    schema: Value,
    checked: std::cell::RefCell<Vec<String>>,
}

impl Protocol {
    fn load() -> Self {
        let path = repo_root().join("editors/protocol/agent-protocol.schema.json");
        let schema = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        Self {
            schema,
            checked: Default::default(),
        }
    }

    /// Validates `value` against the `part` ("params" or "result") of `method`.
    fn check(&self, method: &str, part: &str, value: &Value) {
        let entry = &self.schema["methods"][method][part];
        assert!(entry.is_object(), "the schema has no {part} for {method}");
        let mut schema = entry.clone();
        schema["$defs"] = self.schema["$defs"].clone();
        let validator = jsonschema::validator_for(&schema).unwrap();
        let errors: Vec<String> = validator
            .iter_errors(value)
            .map(|e| format!("{} at {}", e, e.instance_path))
            .collect();
        assert!(
            errors.is_empty(),
            "{method} {part} does not match the schema:\n{}\n{value:#}",
            errors.join("\n")
        );
        self.checked.borrow_mut().push(format!("{method} {part}"));
    }

    /// Sends a request, checking its params and its result.
    async fn request(&self, client: &LspClient, method: &str, params: Value) -> Value {
        self.check(method, "params", &params);
        let result = client.request(method, params).await.unwrap();
        self.check(method, "result", &result);
        result
    }
}

fn script() -> Value {
    json!({"side": [{"expect": {"system_contains": "observer of a coding session"},
                      "reply": {"text": "- [10:00] [high] asked for a name; OBSERVED-9"}}],
           "turns": [
        {"reply": {"reasoning": "Let me look.", "text": "Asking first.", "tool_calls": [
            {"name": "question", "arguments": {"questions": [{"question": "Which name?", "header": "Name",
                "options": [{"label": "answer", "description": "the usual"}]}]}},
            {"name": "todowrite", "arguments": {"todos": [{"content": "rename", "status": "in_progress"}]}},
            {"name": "read", "arguments": {"filePath": "src/lib.rs"}},
            {"name": "lsp", "arguments": {"operation": "hover", "filePath": "src/lib.rs",
                "line": 1, "character": 8}}
        ]}, "fault": null},
        {"reply": {"text": "Editing.", "tool_calls": [{"name": "edit", "arguments": {
            "filePath": "src/lib.rs", "oldString": "41", "newString": "42"}}],
            "usage": {"input_tokens": 900, "output_tokens": 20}}},
        {"fault": {"status": 429, "retry_after_ms": 1}},
        {"reply": {"text": "Done: it returns 42 now."}},
        {"reply": {"text": "A second prompt."}}
    ]})
}

#[tokio::test]
async fn every_message_of_a_real_session_matches_the_schema() {
    let protocol = Protocol::load();
    let llm = FakeLlm::start(&script(), "openai");
    let env = TestEnv::new();
    env.answer_workspace(&llm);
    std::fs::create_dir_all(env.workspace().join("src")).unwrap();
    std::fs::write(
        env.workspace().join("src/lib.rs"),
        "pub fn answer() -> u32 {\n    41\n}\n",
    )
    .unwrap();
    let client = LspClient::spawn(&env, &[("FAKE_KEY", "k")]);
    let mut params = initialize_params(&env.workspace());
    params["capabilities"]["experimental"] = json!({"agent": {"updates": true, "permissions": true, "questions": true,
                         "diagnostics": {"unopenedFiles": true}, "lsp": true}});
    client.initialize(params).await;
    let question_answer = json!({"answers": [["answer"]]});
    let permission_answer = json!({"outcome": "once"});
    protocol.check("agent/question", "result", &question_answer);
    protocol.check("agent/requestPermission", "result", &permission_answer);
    let diagnostics_answer = json!({"items": [{"uri": file_uri(&env.workspace().join("src/lib.rs")),
        "diagnostics": [{"range": {"start": {"line": 0, "character": 7}, "end": {"line": 0, "character": 13}},
                         "severity": 2, "message": "never used", "source": "rustc"}]}]});
    let hover_answer = json!({"contents": {"kind": "markdown", "value": "fn answer() -> u32"}});
    protocol.check("agent/diagnostics", "result", &diagnostics_answer);
    protocol.check("agent/lsp", "result", &hover_answer);
    client.reply_to("agent/diagnostics", diagnostics_answer);
    client.reply_to("agent/lsp", hover_answer);
    client.reply_to("agent/question", question_answer);
    client.reply_to("agent/requestPermission", permission_answer);

    let uri = file_uri(&env.workspace().join("src/lib.rs"));
    let started = protocol
        .request(&client, "agent/prompt", json!({"text": "make it 42",
            "context": {"uri": uri, "range": {"start": {"line": 1, "character": 0}, "end": {"line": 1, "character": 6}}}}))
        .await;
    let sid = started["sessionId"].as_str().unwrap().to_string();
    let idle = |u: &Value| {
        u["params"]["update"]["kind"] == "status" && u["params"]["update"]["status"] == "idle"
    };
    client.wait_for("agent/update", idle).await;
    protocol
        .request(
            &client,
            "agent/prompt",
            json!({"sessionId": sid, "text": "again", "mode": "build"}),
        )
        .await;
    client
        .wait_until("the second turn", || {
            (client
                .received("agent/update")
                .into_iter()
                .filter(idle)
                .count()
                >= 2)
                .then_some(())
        })
        .await;

    let session = json!({"sessionId": sid});
    protocol.request(&client, "agent/sessions", json!({})).await;
    let history = protocol
        .request(&client, "agent/history", session.clone())
        .await;
    protocol
        .request(
            &client,
            "agent/search",
            json!({"query": "answer", "scope": "all", "limit": 5}),
        )
        .await;
    protocol.request(&client, "agent/config", json!(null)).await;
    protocol
        .request(
            &client,
            "agent/setMode",
            json!({"sessionId": sid, "mode": "plan"}),
        )
        .await;
    protocol
        .request(&client, "agent/undo", session.clone())
        .await;
    protocol
        .request(&client, "agent/redo", session.clone())
        .await;
    let first = history["messages"][0]["messageId"]
        .as_str()
        .unwrap()
        .to_string();
    protocol
        .request(
            &client,
            "agent/revert",
            json!({"sessionId": sid, "messageId": first}),
        )
        .await;
    protocol
        .request(&client, "agent/unrevert", session.clone())
        .await;
    protocol
        .request(&client, "agent/cancel", session.clone())
        .await;
    client
        .notify(
            "textDocument/didOpen",
            json!({"textDocument": {"uri": uri, "languageId": "rust", "version": 1, "text": "x"}}),
        )
        .await;
    protocol
        .request(&client, "agent/documentText", json!({"uri": uri}))
        .await;
    let state = protocol.request(&client, "agent/state", json!({})).await;
    assert!(
        state["path"]
            .as_str()
            .unwrap()
            .ends_with(".agent-lsp/STATE.md")
    );
    // The memory inspector's methods, on a fact the user wrote from the command line.
    let (code, _, err) = env.run(&[
        "memory",
        "add",
        "the release branch is cut on Thursdays",
        "--cwd",
        env.workspace().to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{err}");
    let listed = protocol
        .request(&client, "agent/memory/list", json!({}))
        .await;
    let fact = listed["facts"][0]["id"].as_str().unwrap().to_string();
    assert_eq!(listed["facts"][0]["source"], "user");
    let why = protocol
        .request(
            &client,
            "agent/memory/why",
            json!({"id": fact, "query": "when is the release branch cut"}),
        )
        .await;
    assert_eq!(why["verdict"], "passed the gate", "{why}");
    protocol
        .request(
            &client,
            "agent/memory/update",
            json!({"id": fact, "content": "the release branch is cut on Fridays"}),
        )
        .await;
    let listed = protocol
        .request(&client, "agent/memory/list", json!({}))
        .await;
    assert_eq!(
        listed["facts"][0]["content"],
        "the release branch is cut on Fridays"
    );
    protocol
        .request(&client, "agent/memory/forget", json!({"id": fact}))
        .await;
    let gone = client
        .request("agent/memory/forget", json!({"id": fact}))
        .await
        .unwrap_err();
    assert!(gone.message.contains(&fact), "{gone:?}");
    // The journal, with an entry a person wrote.
    let journal = env.config_home().join("agent-lsp/journal");
    std::fs::create_dir_all(&journal).unwrap();
    std::fs::write(
        journal.join("mine.md"),
        "# Release day

Thursdays, after standup
",
    )
    .unwrap();
    let found = protocol
        .request(&client, "agent/journal/search", json!({"query": "release"}))
        .await;
    assert_eq!(found["hits"][0]["title"], "Release day", "{found}");
    // Long-term knowledge into the agents file (created, as there is none).
    let exported = protocol
        .request(&client, "agent/knowledge/export", json!({}))
        .await;
    assert_eq!(exported["written"], true, "{exported}");
    assert!(env.workspace().join("AGENTS.md").is_file());
    // Distil now: the result and the history carry the distillations.
    let distilled = protocol
        .request(&client, "agent/compact", session.clone())
        .await;
    assert!(
        distilled["distillations"][0]["text"]
            .as_str()
            .is_some_and(|t| t.contains("OBSERVED-9"))
    );
    let history = protocol
        .request(&client, "agent/history", session.clone())
        .await;
    assert_eq!(history["distillations"][0]["generation"], 0);

    for update in client.received("agent/update") {
        protocol.check("agent/update", "params", &update["params"]);
    }
    assert!(
        !client.received("agent/requestPermission").is_empty(),
        "no permission ask"
    );
    assert!(!client.received("agent/question").is_empty(), "no question");
    for ask in client.received("agent/requestPermission") {
        protocol.check("agent/requestPermission", "params", &ask["params"]);
    }
    for ask in client.received("agent/question") {
        protocol.check("agent/question", "params", &ask["params"]);
    }
    for method in ["agent/diagnostics", "agent/lsp"] {
        let asked = client.received(method);
        assert!(!asked.is_empty(), "no {method} request");
        for ask in asked {
            protocol.check(method, "params", &ask["params"]);
        }
    }
    // The session showed every kind of update it can.
    let kinds: std::collections::BTreeSet<String> = client
        .received("agent/update")
        .iter()
        .filter_map(|u| u["params"]["update"]["kind"].as_str().map(String::from))
        .collect();
    for kind in [
        "user_message",
        "message_chunk",
        "reasoning_chunk",
        "tool_call",
        "tool_call_update",
        "status",
        "usage",
        "plan",
        "retry",
        "revert",
    ] {
        assert!(kinds.contains(kind), "no {kind} update in {kinds:?}");
    }
    let methods = protocol.schema["methods"].as_object().unwrap();
    {
        let checked = protocol.checked.borrow();
        for method in methods.keys() {
            assert!(
                checked.iter().any(|c| c.starts_with(&format!("{method} "))),
                "{method} was never checked"
            );
        }
    }
    assert_eq!(client.shutdown_and_exit().await, 0);
}

#[test]
fn the_schema_refuses_what_the_protocol_does_not_say() {
    let protocol = Protocol::load();
    let mut schema = protocol.schema["methods"]["agent/update"]["params"].clone();
    schema["$defs"] = protocol.schema["$defs"].clone();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let good = json!({"sessionId": "s", "seq": 1, "update": {"kind": "status", "status": "idle"}});
    assert!(validator.is_valid(&good));
    for bad in [
        json!({"sessionId": "s", "seq": 1, "update": {"kind": "status", "status": "sleeping"}}),
        json!({"sessionId": "s", "seq": 1, "update": {"kind": "teleport"}}),
        json!({"sessionId": "s", "update": {"kind": "status", "status": "idle"}}),
        json!({"sessionId": "s", "seq": 1, "update": {"kind": "message_chunk", "text": "no id"}}),
    ] {
        assert!(!validator.is_valid(&bad), "{bad}");
    }
}

/// The README's section between `start` and the next `### ` heading.
fn readme_section(start: &str) -> String {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).unwrap();
    let from = readme
        .find(start)
        .unwrap_or_else(|| panic!("README has no {start:?}"));
    let rest = &readme[from + start.len()..];
    rest[..rest.find("\n### ").unwrap_or(rest.len())].to_string()
}

fn words(text: &str, pattern: &str) -> std::collections::BTreeSet<String> {
    regex::Regex::new(pattern)
        .unwrap()
        .captures_iter(text)
        .map(|c| c[1].to_string())
        .collect()
}

#[test]
fn the_readme_tables_name_what_the_schema_has() {
    let protocol = Protocol::load();
    let methods = protocol.schema["methods"].as_object().unwrap();
    let of = |direction: &str| -> std::collections::BTreeSet<String> {
        methods
            .iter()
            .filter(|(_, e)| e["direction"] == direction)
            .map(|(m, _)| m.clone())
            .collect()
    };
    let requests = readme_section("### Client → server requests");
    assert_eq!(words(&requests, r"`(agent/[\w/]+)`"), of("clientToServer"));
    let server = readme_section("### Server → client");
    assert_eq!(
        words(&server, r"(?:notification|request) `(agent/[\w/]+)`"),
        of("serverToClient")
    );
    let kinds: std::collections::BTreeSet<String> =
        protocol.schema["$defs"]["SessionUpdate"]["oneOf"]
            .as_array()
            .unwrap()
            .iter()
            .map(|v| {
                v["properties"]["kind"]["const"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect();
    assert_eq!(
        words(&server, r"`(\w+) \{"),
        kinds,
        "the update kinds in the README"
    );
}
