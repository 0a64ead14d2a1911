//! What real OpenAI-compatible servers send, replayed byte for byte by fake-llm through the
//! real binary: llama.cpp's captured streams (`tests/wire/llama.cpp`), its errors, and the
//! window each local server reports.

use agent_lsp_tests::cli_run::{parts, run, setup, show};
use agent_lsp_tests::process::FakeLlm;
use serde_json::{Value, json};

fn wire(name: &str) -> String {
    format!("{}/wire/{name}", env!("CARGO_MANIFEST_DIR"))
}

/// Asserts the run's exit code, showing its output and what fake-llm refused otherwise.
fn assert_code(r: &agent_lsp_tests::cli_run::Run, llm: &FakeLlm, code: i32) {
    let refused: Vec<_> = llm.requests().into_iter().filter_map(|q| q.error).collect();
    assert_eq!(r.code, code, "{}\n{refused:?}\n{:?}", r.stderr, r.lines);
}

/// The tool parts of a run's session.
fn tool_parts(env: &agent_lsp_tests::process::TestEnv, session: &str) -> Vec<Value> {
    let view = show(env, session);
    parts(&view, "tool").into_iter().cloned().collect()
}

#[test]
fn a_cut_off_answer_stops_with_max_tokens_and_its_calls_are_judged_one_by_one() {
    // llama.cpp's six reads ending at `length` (each call whole), then its text cut at
    // `length`: the reads run (the repeats refused as a loop under --yes), the text ends the
    // turn as max_tokens, never end_turn.
    let script = json!({"turns": [
        {"replay": wire("llama.cpp/tool-auto.sse")},
        {"expect": {"request_contains": "repeated three times"},
         "replay": wire("llama.cpp/plain.sse")}
    ]});
    let llm = FakeLlm::start(&script, "openai");
    let env = setup(&llm, "openai", "");
    std::fs::write(env.workspace().join("src/main.rs"), "fn main() {}\n").unwrap();
    let r = run(&env, &["--yes", "read main.rs"]);
    assert_code(&r, &llm, 3);
    let requests = llm.requests();
    assert_eq!(r.done()["stop_reason"], "max_tokens");
    let why = r.done()["error"].as_str().unwrap();
    assert!(why.contains("output limit (4096 tokens)"), "{why}");
    let first = &requests[0].body;
    assert_eq!(
        first["max_tokens"], 4096,
        "the answer's limit reaches the server"
    );
    assert_eq!(first["parallel_tool_calls"], true);
    let tools = tool_parts(&env, &r.session());
    assert_eq!(tools.len(), 6);
    let ran = tools.iter().filter(|p| p["status"] == "completed").count();
    let refused: Vec<_> = tools
        .iter()
        .filter(|p| p["status"] == "error")
        .map(|p| p["data"]["output"].as_str().unwrap())
        .collect();
    assert_eq!(ran, 2, "{tools:?}");
    assert!(
        refused.iter().all(|o| o.contains("under --yes")),
        "{refused:?}"
    );
    // The cut text is kept, as interrupted.
    let view = show(&env, &r.session());
    let texts = parts(&view, "text");
    let last = texts.last().unwrap();
    assert_eq!(last["status"], "interrupted");
    // llama.cpp counted 29 input tokens for a request of thousands: its template dropped
    // most of it, and the user is told.
    assert!(r.stderr.contains("chat template"), "{}", r.stderr);
}

#[test]
fn a_call_cut_inside_its_arguments_never_runs_and_the_history_stays_valid() {
    // fake-llm, like llama.cpp's server, refuses any history with arguments that do not
    // parse (HTTP 500 for this request and every later one).
    let script = json!({"turns": [
        {"replay": wire("llama.cpp/tool-cut.sse")},
        {"expect": {"last_message_contains": "cut off"},
         "reply": {"text": "I will write it in parts."}}
    ]});
    let llm = FakeLlm::start(&script, "openai");
    let env = setup(&llm, "openai", "");
    let r = run(&env, &["--yes", "write notes"]);
    assert_code(&r, &llm, 0);
    let requests = llm.requests();
    assert!(
        !env.workspace().join("notes.txt").exists(),
        "the cut write never ran"
    );
    let second = &requests[1].body;
    let call = &second["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["tool_calls"].is_array())
        .unwrap()["tool_calls"][0];
    assert_eq!(call["function"]["arguments"], "{}", "{call}");
    let tools = tool_parts(&env, &r.session());
    let output = tools[0]["data"]["output"].as_str().unwrap();
    assert!(output.contains("output limit (4096 tokens)"), "{output}");
    // What the model really wrote stays in the log.
    assert!(
        tools[0]["data"]["input"]
            .as_str()
            .unwrap()
            .contains("hello wor")
    );
}

#[test]
fn a_server_error_that_would_repeat_is_not_retried() {
    let body = json!({"error": {"code": 500, "message": "Failed to parse tool call arguments as JSON: [json.exception.parse_error.101] parse error", "type": "server_error"}});
    let llm = FakeLlm::start(
        &json!({"turns": [
            {"fault": {"status": 500, "body_json": body}},
            {"reply": {"text": "never asked"}}
        ]}),
        "openai",
    );
    let env = setup(&llm, "openai", "");
    let r = run(&env, &["hello"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert_eq!(llm.requests().len(), 1, "no retry");
    assert!(
        r.error().contains("Failed to parse tool call arguments"),
        "{:?}",
        r.lines
    );
}

#[test]
fn a_few_tokens_then_length_is_a_full_context() {
    let llm = FakeLlm::start(
        &json!({
            "side": [{"expect": {"system_contains": "observer"}, "reply": {"text": "- [10:00] [high] The user said hello."}}],
            "turns": [
                {"replay": wire("llama.cpp/full-context.sse")},
                {"replay": wire("llama.cpp/full-context.sse")},
                {"reply": {"text": "never"}}
            ]
        }),
        "openai",
    );
    let env = setup(
        &llm,
        "openai",
        "context_window = 5000\n[tools]\n\"*\" = false\nread = true\n",
    );
    let r = run(&env, &["hello"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    let error = r.error();
    // Taken as an overflow: the context's cut moved (the prompt distilled), the request
    // was asked again, and the message says what was tried.
    assert!(error.contains("its context full"), "{error}");
    assert!(
        error.contains("even with its older part distilled"),
        "{error}"
    );
    assert!(!error.contains("stubs"), "nothing was stubbed: {error}");
    let requests = llm.requests();
    assert_eq!(requests.iter().filter(|q| q.turn.is_some()).count(), 2);
    let retried = requests.iter().find(|q| q.turn == Some(1)).unwrap();
    assert!(
        !retried.body.to_string().contains("I will"),
        "the set-aside answer is not sent back"
    );
    let first = &llm.requests()[0].body;
    let offered: Vec<_> = first["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(offered, ["read"], "[tools] leaves the others out");
}

#[test]
fn an_overflow_naming_a_small_window_says_the_tools_alone_do_not_fit() {
    let body = json!({"error": {"code": 400, "message": "the request exceeds the available context size, try increasing it", "type": "exceed_context_size_error", "n_prompt_tokens": 5210, "n_ctx": 2048}});
    let llm = FakeLlm::start(
        &json!({"turns": [{"fault": {"status": 400, "body_json": body}}, {"reply": {"text": "never"}}]}),
        "openai",
    );
    let env = setup(&llm, "openai", "");
    let r = run(&env, &["hello"]);
    assert_eq!(r.code, 1, "{}", r.stderr);
    assert_eq!(
        llm.requests().len(),
        1,
        "the second request could not fit either"
    );
    let error = r.error();
    assert!(
        error.contains("tool definitions alone take about"),
        "{error}"
    );
    assert!(error.contains("fewer tools"), "{error}");
    assert!(!error.contains("after compaction"), "{error}");
}

/// `agent-lsp doctor --json`'s window check against fake-llm imitating `server`.
fn doctor_window(server: Value) -> Value {
    let llm = FakeLlm::start(&json!({"turns": [], "server": server}), "openai");
    let env = setup(&llm, "openai", "");
    let (_, out, err) = env.run(&[
        "doctor",
        "--json",
        "--cwd",
        env.workspace().to_str().unwrap(),
    ]);
    let report: Value = serde_json::from_str(&out).unwrap_or_else(|e| panic!("{e}: {out}\n{err}"));
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["name"] == "window")
        .cloned()
        .unwrap_or_else(|| panic!("no window check: {report}"))
}

#[test]
fn the_window_comes_from_the_server() {
    for (flavor, source) in [
        ("llamacpp", "llama.cpp /props n_ctx"),
        ("vllm", "vLLM /v1/models max_model_len"),
        ("openrouter", "/v1/models context_length"),
        ("lmstudio", "LM Studio loaded_context_length"),
    ] {
        let check = doctor_window(json!({"flavor": flavor, "context": 12288, "trained": 131072}));
        let detail = check["detail"].as_str().unwrap();
        assert!(
            detail.starts_with("12288 tokens (from ") && detail.contains(source),
            "{flavor}: {detail}"
        );
        assert_eq!(check["ok"], true, "{flavor}");
    }
    // Ollama: a loaded model's context, else num_ctx, else its default with a warning
    // that it cuts prompts silently.
    let check = doctor_window(json!({"flavor": "ollama", "context": 16384, "loaded": true}));
    assert!(
        check["detail"]
            .as_str()
            .unwrap()
            .contains("16384 tokens (from Ollama /api/ps"),
        "{check}"
    );
    let check = doctor_window(
        json!({"flavor": "ollama", "context": 8192, "num_ctx_set": true, "trained": 8192}),
    );
    assert!(
        check["detail"]
            .as_str()
            .unwrap()
            .starts_with("8192 tokens (from Ollama /api/show num_ctx"),
        "{check}"
    );
    assert_eq!(check["ok"], true);
    let check = doctor_window(json!({"flavor": "ollama", "context": 4096, "trained": 40960}));
    let detail = check["detail"].as_str().unwrap();
    assert!(detail.contains("cuts longer prompts silently"), "{detail}");
    assert_eq!(check["ok"], false);
    // Nothing answers about it: assumed, and said so.
    let check = doctor_window(json!({"flavor": "none", "context": 1}));
    let detail = check["detail"].as_str().unwrap();
    assert!(detail.starts_with("32768 tokens (unknown"), "{detail}");
}

#[test]
fn the_servers_window_sizes_the_request() {
    // llama.cpp reports 8,000 tokens: an answer may take half, and a big tool output is
    // cut to about half of what input may use (4,000 tokens, some 8,000 bytes).
    let big: String = (0..3000)
        .map(|i| format!("line {i} of a long file\n"))
        .collect();
    let script = json!({"server": {"flavor": "llamacpp", "context": 8000}, "turns": [
        {"reply": {"tool_calls": [{"name": "read", "arguments": {"filePath": "big.txt"}}]}},
        {"reply": {"text": "done"}}
    ]});
    let llm = FakeLlm::start(&script, "openai");
    let env = setup(&llm, "openai", "[tools]\n\"*\" = false\nread = true\n");
    std::fs::write(env.workspace().join("big.txt"), big).unwrap();
    let r = run(&env, &["--yes", "read big.txt"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let requests = llm.requests();
    assert_eq!(requests[0].body["max_tokens"], 4000);
    let messages = requests[1].body["messages"].as_array().unwrap();
    let result = messages.last().unwrap()["content"].as_str().unwrap();
    assert!(result.len() <= 8000 + 400, "{}", result.len());
    assert!(result.contains("cut"), "{result}");
}
