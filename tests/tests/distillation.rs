//! Distillation and the gradient context through `agent-lsp run` and `agent-lsp session`,
//! against fake-llm in both wire formats: a turn many times the window, prefix stability,
//! observations and their consolidation, overflow recovery.

use agent_lsp_tests::cli_run::{FORMATS, parts, run, setup, show};
use agent_lsp_tests::fake_llm::Recorded;
use agent_lsp_tests::process::FakeLlm;
use serde_json::{Value, json};

const OBSERVER: &str = "observer of a coding session";
const REFLECTOR: &str = "consolidate the observation logs";

fn observer(reply: &str) -> Value {
    json!({"expect": {"system_contains": OBSERVER, "no_tools": true}, "reply": {"text": reply}})
}

fn reflector(reply: &str) -> Value {
    json!({"expect": {"system_contains": REFLECTOR, "no_tools": true}, "reply": {"text": reply}})
}

/// The requests of the conversation itself (not the side calls).
fn main_requests(requests: &[Recorded]) -> Vec<&Recorded> {
    requests.iter().filter(|r| r.side.is_none()).collect()
}

/// The messages of a request, the system prompt of either format included.
fn messages(body: &Value) -> &Vec<Value> {
    body["messages"].as_array().unwrap()
}

#[test]
fn one_turn_six_times_the_window_completes_with_every_request_inside_it() {
    const PROMPT: &str = "summarise every part, verbatim prompt 7731";
    const WINDOW: usize = 16_000;
    let reads = 30;
    let mut turns: Vec<Value> = (0..reads / 2)
        .map(|i| {
            json!({"reply": {"tool_calls": [
                {"name": "read", "arguments": {"filePath": format!("data/part{}.txt", 2 * i)}},
                {"name": "read", "arguments": {"filePath": format!("data/part{}.txt", 2 * i + 1)}}]}})
        })
        .collect();
    turns.push(json!({"expect": {"request_contains": PROMPT},
                      "reply": {"text": "All 30 parts read."}}));
    // A model server that refuses any request over the window (fake-llm counts the body).
    let script = json!({"max_context_tokens": WINDOW, "turns": turns,
        "side": [observer("- [10:00] [high] read two data parts; OBSERVED-4417")]});
    for format in FORMATS {
        let llm = FakeLlm::start(&script, format);
        let env = setup(&llm, format, &format!("context_window = {WINDOW}\n"));
        let data = env.workspace().join("data");
        std::fs::create_dir_all(&data).unwrap();
        let mut output_tokens = 0;
        for i in 0..reads {
            let text: String = (0..270)
                .map(|l| format!("part {i} line {l:03}: the quick brown fox jumps\n"))
                .collect();
            output_tokens += agent_lsp::tokens::count(&text);
            std::fs::write(data.join(format!("part{i}.txt")), text).unwrap();
        }
        assert!(
            output_tokens >= 6 * WINDOW,
            "{output_tokens} tokens of output"
        );
        let r = run(&env, &["--yes", PROMPT]);
        let requests = llm.requests();
        assert_eq!(
            r.code,
            0,
            "{format}: {}\n{:?}",
            r.stderr,
            requests.iter().map(|q| &q.error).collect::<Vec<_>>()
        );
        assert!(r.text().contains("All 30 parts read."));
        // Every request the agent sent fit the window: none was refused.
        assert!(
            requests.iter().all(|q| q.error.is_none()),
            "{format}: {:?}",
            requests
                .iter()
                .filter_map(|q| q.error.as_ref())
                .collect::<Vec<_>>()
        );
        let main = main_requests(&requests);
        assert_eq!(main.len(), reads / 2 + 1, "{format}: one request per step");
        for q in &main {
            assert!(
                q.body.to_string().contains(PROMPT),
                "{format}: the prompt is in every request, verbatim"
            );
        }
        // The observer ran as isolated calls, and their logs reached the later requests.
        let side = requests.len() - main.len();
        assert!(side >= reads / 2 - 2, "{format}: {side} observer calls");
        let last = main.last().unwrap().body.to_string();
        assert!(
            last.contains("OBSERVED-4417"),
            "{format}: the distilled prefix"
        );
        assert!(
            last.contains("part 29 line 269"),
            "{format}: the newest output"
        );
        assert!(
            !last.contains("part 0 line 100"),
            "{format}: the oldest gave way"
        );
        // The log keeps every output whole; the distillations are on record.
        let view = show(&env, &r.session());
        let tools = parts(&view, "tool");
        assert_eq!(tools.len(), reads);
        assert!(tools.iter().all(|p| p["status"] == "completed"));
        let distillations = view["distillations"].as_array().unwrap();
        assert_eq!(distillations.len(), side, "{format}");
        assert!(distillations.iter().all(|d| d["generation"] == 0));
    }
}

#[test]
fn requests_within_a_turn_extend_each_other_byte_for_byte() {
    let step = |i: usize| {
        json!({"reply": {"text": format!("step {i}"), "tool_calls": [
            {"name": "read", "arguments": {"filePath": "src/lib.rs"}}]}})
    };
    let mut turns: Vec<Value> = (0..4).map(step).collect();
    // An edit: the state's obligation changes, and a note follows the edit's result.
    turns[1] = json!({"reply": {"tool_calls": [{"name": "edit", "arguments": {
        "filePath": "src/lib.rs", "oldString": "41", "newString": "42"}}]}});
    turns.push(json!({"reply": {"text": "done"}}));
    turns.push(json!({"reply": {"text": "second done"}}));
    let script = json!({ "turns": turns });
    for format in FORMATS {
        let llm = FakeLlm::start(&script, format);
        let env = setup(&llm, format, "");
        let first = run(&env, &["--yes", "read it four times"]);
        assert_eq!(first.code, 0, "{}", first.stderr);
        let second = run(&env, &["--session", &first.session(), "and again"]);
        assert_eq!(second.code, 0, "{}", second.stderr);
        let requests = llm.requests();
        assert_eq!(requests.len(), 6);
        assert!(
            requests[2]
                .body
                .to_string()
                .contains("session-state-update"),
            "{format}"
        );
        for pair in requests.windows(2) {
            let (before, after) = (&pair[0].body, &pair[1].body);
            assert_eq!(before["system"], after["system"], "{format}");
            assert_eq!(before["tools"], after["tools"], "{format}");
            let (b, a) = (messages(before), messages(after));
            assert!(a.len() > b.len(), "{format}");
            assert_eq!(
                &a[..b.len()],
                &b[..],
                "{format}: a prefix of the next request"
            );
        }
    }
}

#[test]
fn observations_are_consolidated_into_a_working_context_and_stay_searchable() {
    let script = json!({
        "side": [
            observer("- [10:00] [high] the user named QUOKKA-1 as the codename"),
            reflector("## Current state\nWORKING-CONTEXT-1\n## Key decisions\n## Technical changes\n## Timeline")
        ],
        "turns": [
            {"reply": {"text": "Noted the first codename."}},
            {"reply": {"text": "Noted the second codename."}},
            // After the consolidation: the working context, then the latest turn raw.
            {"expect": {"system_contains": "WORKING-CONTEXT-1", "last_message_contains": "third"},
             "reply": {"text": "third done"}}
        ]
    });
    for format in FORMATS {
        let llm = FakeLlm::start(&script, format);
        // A distilled share so small that two observation logs outgrow it (32 tokens), in a
        // window where the raw turns alone never move the cut.
        let env = setup(
            &llm,
            format,
            "context_window = 16000\ndistill_model = \"small-model\"\n[context_budget]\ndistilled = 0.002\n",
        );
        let first = run(&env, &["first codename: ZEPPELIN"]);
        assert_eq!(first.code, 0, "{}", first.stderr);
        let sid = first.session();
        // The state reaches the distillations.
        let state_file = env.workspace().join(".agent-lsp/STATE.md");
        std::fs::create_dir_all(state_file.parent().unwrap()).unwrap();
        std::fs::write(&state_file, "## Current\n\n- Focus: naming the airships\n").unwrap();
        let compact = |env: &agent_lsp_tests::process::TestEnv| {
            let (code, out, err) = env.run(&["session", "compact", &sid, "--json"]);
            assert_eq!(code, 0, "{err}");
            serde_json::from_str::<Value>(&out).unwrap()
        };
        let once = compact(&env);
        assert_eq!(once["observedMessages"], 2, "{format}: {once}");
        assert_eq!(once["reflected"], false, "{format}: one log fits");
        let second = run(&env, &["--session", &sid, "second codename: BLIMP"]);
        assert_eq!(second.code, 0, "{}", second.stderr);
        let twice = compact(&env);
        assert_eq!(twice["observedMessages"], 2, "{format}: only what is new");
        assert_eq!(twice["reflected"], true, "{format}: two logs do not");

        let view = show(&env, &sid);
        let d = view["distillations"].as_array().unwrap();
        let shape: Vec<(u64, bool)> = d
            .iter()
            .map(|d| {
                (
                    d["generation"].as_u64().unwrap(),
                    d["archived"].as_bool().unwrap(),
                )
            })
            .collect();
        assert_eq!(shape, [(0, true), (0, true), (1, false)], "{format}");
        for key in ["id", "text", "fromMessageId", "toMessageId", "createdAt"] {
            assert!(d.iter().all(|d| !d[key].is_null()), "{format}: {key}");
        }
        assert_eq!(d[2]["fromMessageId"], d[0]["fromMessageId"]);
        assert_eq!(d[2]["toMessageId"], d[1]["toMessageId"]);
        // The archived observations are still found.
        let (code, out, _) = env.run(&["session", "search", "QUOKKA", "--json"]);
        assert_eq!(code, 0);
        let hits: Value = serde_json::from_str(&out).unwrap();
        assert!(
            hits.as_array()
                .unwrap()
                .iter()
                .any(|h| h["source"] == "distillation 0"),
            "{format}: {hits}"
        );
        // The reflector read both logs; the observers read the messages, not the tools.
        let requests = llm.requests();
        let reflection = requests
            .iter()
            .find(|q| q.body.to_string().contains(REFLECTOR))
            .unwrap();
        assert_eq!(reflection.body.to_string().matches("QUOKKA-1").count(), 2);
        let observation = requests.iter().find(|q| q.side == Some(0)).unwrap();
        assert!(
            observation
                .body
                .to_string()
                .contains("first codename: ZEPPELIN")
        );

        let third = run(&env, &["--session", &sid, "third task"]);
        assert_eq!(third.code, 0, "{format}: {}", third.stderr);
        let last = llm.requests().last().unwrap().body.to_string();
        assert!(
            !last.contains("first codename"),
            "{format}: gave way to the context"
        );
        assert!(
            last.contains("second codename: BLIMP"),
            "{format}: the kept turn"
        );
    }
}

#[test]
fn a_context_overflow_moves_the_cut_and_asks_again() {
    let script = json!({
        "side": [observer("- [10:00] [high] OBSERVED-1")],
        "turns": [
            {"reply": {"text": "ok"}},
            {"fault": {"context_overflow": true}},
            {"expect": {"system_contains": "OBSERVED-1"}, "reply": {"text": "recovered"}},
            // Distilled already, no tool output to stub: a second overflow is final.
            {"fault": {"context_overflow": true}},
            {"fault": {"context_overflow": true}}
        ]
    });
    let llm = FakeLlm::start(&script, "anthropic");
    let env = setup(&llm, "anthropic", "");
    let first = run(&env, &["first task"]);
    assert_eq!(first.code, 0, "{}", first.stderr);
    let sid = first.session();
    let second = run(&env, &["--session", &sid, "second task"]);
    assert_eq!(second.code, 0, "{}", second.stderr);
    assert!(second.text().contains("recovered"));
    let third = run(&env, &["--session", &sid, "third task"]);
    assert_ne!(third.code, 0);
    assert_eq!(third.done()["stop_reason"], "error");
    let error = third.done()["error"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(error.contains("older part distilled"), "{error}");
    assert!(llm.requests().iter().all(|q| q.error.is_none()));
}

#[tokio::test]
async fn the_server_distils_in_the_background_once_enough_is_undistilled() {
    use agent_lsp_tests::lsp_client::{LspClient, initialize_params};
    use agent_lsp_tests::process::TestEnv;
    let step =
        json!({"reply": {"tool_calls": [{"name": "read", "arguments": {"filePath": "a.txt"}}]}});
    let script = json!({
        // A slow observer: the editor must not wait for it.
        "side": [{"expect": {"system_contains": OBSERVER, "no_tools": true},
                  "fault": {"delay_ms": 1500},
                  "reply": {"text": "- [10:00] [high] read a.txt four times; OBSERVED-BG"}}],
        "turns": [step, step, step, step, {"reply": {"text": "first done"}},
                  {"reply": {"text": "second done"}}]
    });
    let llm = FakeLlm::start(&script, "openai");
    let env = TestEnv::new();
    env.answer_workspace(&llm);
    std::fs::write(env.workspace().join("a.txt"), "alpha\n").unwrap();
    let client = LspClient::spawn(&env, &[("FAKE_KEY", "k")]);
    let mut params = initialize_params(&env.workspace());
    params["capabilities"]["experimental"] = json!({"agent": {"updates": true}});
    client.initialize(params).await;
    let history = |sid: &str| client.request("agent/history", json!({"sessionId": sid}));
    let idle_count = || {
        client
            .received("agent/update")
            .iter()
            .filter(|u| {
                u["params"]["update"]["kind"] == "status"
                    && u["params"]["update"]["status"] == "idle"
            })
            .count()
    };
    let started = client
        .request("agent/prompt", json!({"text": "read it four times"}))
        .await
        .unwrap();
    let sid = started["sessionId"].as_str().unwrap().to_string();
    client
        .wait_until("the first turn", || (idle_count() >= 1).then_some(()))
        .await;
    // Six messages: fewer than eight, nothing is due.
    assert_eq!(history(&sid).await.unwrap()["messageCount"], 6);
    client
        .request(
            "agent/prompt",
            json!({"sessionId": sid, "text": "once more"}),
        )
        .await
        .unwrap();
    client
        .wait_until("the second turn", || (idle_count() >= 2).then_some(()))
        .await;
    client
        .wait_until("the observer call", || {
            llm.requests()
                .iter()
                .any(|q| q.side.is_some())
                .then_some(())
        })
        .await;
    // While the observer works, the editor is answered and the session is idle.
    let sessions = client.request("agent/sessions", json!({})).await.unwrap();
    assert_eq!(sessions[0]["status"], "idle");
    assert!(
        history(&sid).await.unwrap()["distillations"]
            .as_array()
            .unwrap()
            .is_empty()
    );
    let mut found = Value::Null;
    for _ in 0..100 {
        let h = history(&sid).await.unwrap();
        if !h["distillations"].as_array().unwrap().is_empty() {
            found = h["distillations"][0].clone();
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(
        found["text"].as_str().unwrap_or("").contains("OBSERVED-BG"),
        "{found}"
    );
    assert_eq!(found["generation"], 0);
    let observed = llm
        .requests()
        .into_iter()
        .find(|q| q.side.is_some())
        .unwrap();
    assert!(
        observed.body.to_string().contains("once more"),
        "all eight messages"
    );
    assert!(
        observed
            .body
            .get("tools")
            .is_none_or(|t| t.as_array().is_some_and(|a| a.is_empty()))
    );
}
