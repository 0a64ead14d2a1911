//! The agent loop through `agent-lsp run`, against fake-llm in both wire formats.

use std::io::{BufRead, BufReader};
use std::time::{Duration, Instant};

use agent_lsp_tests::cli_run::{FORMATS, finish, parts, point_at, run, setup, show, spawn};
use agent_lsp_tests::process::FakeLlm;
use serde_json::{Value, json};

#[test]
fn a_multi_step_task_reads_edits_runs_and_answers() {
    for format in FORMATS {
        let script = json!({"turns": [
            {"expect": {"tools_include": ["read", "edit", "bash", "apply_patch"], "system_contains": "Working directory"},
             "reply": {"text": "Let me look.", "tool_calls": [{"name": "read", "arguments": {"filePath": "src/lib.rs"}}]}},
            {"expect": {"last_message_contains": "00002|     41"},
             "reply": {"text": "Fixing the answer.", "tool_calls": [{"name": "edit", "arguments": {"filePath": "src/lib.rs", "oldString": "    41", "newString": "    42"}}]}},
            {"expect": {"last_message_contains": "Edited src/lib.rs"},
             "reply": {"tool_calls": [{"name": "bash", "arguments": {"command": "grep -c 42 src/lib.rs", "description": "check the fix"}}]}},
            {"expect": {"last_message_contains": "(exit code 0)"},
             "reply": {"text": "The answer is now 42.", "usage": {"input_tokens": 900, "output_tokens": 12}}}
        ]});
        let llm = FakeLlm::start(&script, format);
        let env = setup(&llm, format, "");
        let r = run(&env, &["--yes", "fix the answer"]);
        assert_eq!(
            r.code,
            0,
            "{format}: {}\n{:?}",
            r.stderr,
            llm.requests().iter().map(|q| &q.error).collect::<Vec<_>>()
        );
        assert_eq!(r.done()["stop_reason"], "end_turn");
        assert_eq!(
            std::fs::read_to_string(env.workspace().join("src/lib.rs")).unwrap(),
            "pub fn answer() -> u32 {\n    42\n}\n"
        );
        assert!(r.text().contains("The answer is now 42."), "{format}");
        let calls: Vec<&str> = r
            .of_type("tool_result")
            .iter()
            .map(|l| l["name"].as_str().unwrap())
            .collect();
        assert_eq!(calls, ["read", "edit", "bash"]);
        assert!(
            r.of_type("permission").len() >= 4,
            "asks for edit and bash, answered by --yes"
        );
        assert!(llm.requests().iter().all(|q| q.error.is_none()));

        let view = show(&env, &r.session());
        let tools = parts(&view, "tool");
        assert_eq!(tools.len(), 3);
        assert!(
            tools.iter().all(|p| p["status"] == "completed"),
            "{tools:?}"
        );
        assert_eq!(parts(&view, "step_start").len(), 4);
        assert!(
            parts(&view, "text")
                .iter()
                .any(|p| p["data"]["text"] == "The answer is now 42.")
        );
        assert_eq!(view["messages"][0]["role"], "user");
        assert_eq!(view["status"], "idle");
        // Each usage part keeps the provider's count beside ours (token calibration); the
        // request's answer budget comes from the model's limits.
        let usage = parts(&view, "usage");
        let last = usage.last().expect("usage parts");
        assert_eq!(last["data"]["inputTokens"], 900);
        assert_eq!(last["data"]["model"], "fake-model");
        let estimate = last["data"]["estimate"].as_u64().unwrap();
        assert!(estimate > 500 && estimate < 20_000, "{estimate}");
        if format == "anthropic" {
            // (The OpenAI format leaves the budget to the server.)
            assert_eq!(
                llm.requests()[0].body["max_tokens"],
                4_096,
                "an unknown model's fallback budget"
            );
        }
    }
}

#[test]
fn retries_honour_retry_after_and_give_up_after_two() {
    for format in FORMATS {
        let script = json!({"turns": [
            {"fault": {"status": 429, "retry_after_s": 1, "body": "slow down"}},
            {"reply": {"text": "ok after a retry"}}
        ]});
        let llm = FakeLlm::start(&script, format);
        let env = setup(&llm, format, "");
        let started = Instant::now();
        let r = run(&env, &["hello"]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        assert!(
            started.elapsed() >= Duration::from_millis(900),
            "Retry-After: 1 was honoured"
        );
        assert_eq!(r.of_type("retry").len(), 1);
        assert_eq!(r.of_type("retry")[0]["wait_ms"], 1000);
        assert_eq!(r.text(), "ok after a retry");

        let script = json!({"turns": [
            {"fault": {"status": 500, "body": "boom 1"}},
            {"fault": {"status": 502, "body": "boom 2"}},
            {"fault": {"status": 503, "body": "boom 3"}},
            {"reply": {"text": "never reached"}}
        ]});
        let llm = FakeLlm::start(&script, format);
        let env = setup(&llm, format, "");
        let r = run(&env, &["hello"]);
        assert_eq!(r.code, 1);
        assert_eq!(llm.requests().len(), 3, "the first try and two retries");
        let error = r.of_type("error")[0]["message"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(
            error.contains("503") && error.contains("gave up after 2 retries"),
            "{error}"
        );
        assert_eq!(r.done()["stop_reason"], "error");
    }
}

#[test]
fn an_auth_error_fails_at_once_naming_the_key_variable() {
    for format in FORMATS {
        let llm = FakeLlm::start(
            &json!({"turns": [{"fault": {"status": 401, "body": "invalid x-api-key"}}]}),
            format,
        );
        let env = setup(&llm, format, "");
        let r = run(&env, &["hello"]);
        assert_eq!(r.code, 1);
        assert_eq!(llm.requests().len(), 1, "no retry");
        let error = r.of_type("error")[0]["message"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(
            error.contains("$FAKE_KEY") && error.contains("invalid x-api-key"),
            "{error}"
        );
    }
}

#[test]
fn a_stream_cut_mid_answer_keeps_the_partial_text_and_says_so() {
    for format in FORMATS {
        let script = json!({"turns": [
            {"reply": {"text": "The first part arrives, then the connection drops"}, "fault": {"disconnect_after_chunks": 4}}
        ], "chunk_chars": 5});
        let llm = FakeLlm::start(&script, format);
        let env = setup(&llm, format, "");
        let r = run(&env, &["hello"]);
        assert_eq!(r.code, 1, "{}", r.stderr);
        assert_eq!(
            llm.requests().len(),
            1,
            "a stream that began is not retried blindly"
        );
        let error = r.of_type("error")[0]["message"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(
            error.contains("cut off") && error.contains("partial answer was kept"),
            "{error}"
        );
        if format == "openai" {
            // A dropped connection is named as such, not "error decoding response body".
            assert!(error.contains("the server closed the stream"), "{error}");
        }
        let view = show(&env, &r.session());
        let text = parts(&view, "text");
        let kept = text.last().unwrap();
        assert!(!kept["data"]["text"].as_str().unwrap().is_empty());
        assert_eq!(kept["status"], "interrupted");
    }
}

#[test]
fn malformed_events_and_bad_tool_arguments_do_not_stop_the_loop() {
    for format in FORMATS {
        let script = json!({"turns": [
            {"reply": {"text": "Calling with broken arguments.", "tool_calls": [{"name": "read", "arguments": "{\"filePath\": "}]},
             "fault": {"malformed_sse": true}},
            {"expect": {"last_message_contains": "not valid JSON"},
             "reply": {"text": "Understood, done."}}
        ]});
        let llm = FakeLlm::start(&script, format);
        let env = setup(&llm, format, "");
        let r = run(&env, &["hello"]);
        assert_eq!(
            r.code,
            0,
            "{}\n{:?}",
            r.stderr,
            llm.requests().iter().map(|q| &q.error).collect::<Vec<_>>()
        );
        assert!(
            r.text().contains("Calling with broken arguments.")
                && r.text().contains("Understood, done.")
        );
        let result = &r.of_type("tool_result")[0];
        assert_eq!(result["status"], "error");
    }
}

#[test]
fn context_overflow_ends_the_turn_with_a_clear_error() {
    for format in FORMATS {
        let llm = FakeLlm::start(
            &json!({"turns": [{"fault": {"context_overflow": true}}]}),
            format,
        );
        let env = setup(&llm, format, "");
        let r = run(&env, &["hello"]);
        assert_eq!(r.code, 1);
        let error = r.of_type("error")[0]["message"]
            .as_str()
            .unwrap()
            .to_string();
        assert!(
            error.contains("context too long") && error.contains("new session"),
            "{error}"
        );
    }
}

#[test]
fn arguments_in_many_chunks_and_two_calls_in_one_turn() {
    for format in FORMATS {
        std::thread::sleep(Duration::from_millis(5));
        let script = json!({"chunk_chars": 3, "turns": [
            {"reply": {"tool_calls": [
                {"name": "write", "arguments": {"filePath": "a.txt", "content": "alpha 🦀 with a longer body\n"}},
                {"name": "write", "arguments": {"filePath": "b/b.txt", "content": "beta\n"}}
            ]}},
            {"expect": {"request_contains": "Created b/b.txt"}, "reply": {"text": "Both written."}}
        ]});
        let llm = FakeLlm::start(&script, format);
        let env = setup(&llm, format, "");
        let r = run(&env, &["--mode", "auto", "write two files"]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        assert_eq!(
            std::fs::read_to_string(env.workspace().join("a.txt")).unwrap(),
            "alpha 🦀 with a longer body\n"
        );
        assert_eq!(
            std::fs::read_to_string(env.workspace().join("b/b.txt")).unwrap(),
            "beta\n"
        );
        // The second request carries both results after the assistant's two calls.
        let second = &llm.requests()[1].body;
        let text = second.to_string();
        assert!(
            text.contains("Created a.txt") && text.contains("Created b/b.txt"),
            "{format}"
        );
    }
}

#[test]
fn without_a_terminal_asks_are_refused_unless_yes_or_auto() {
    let script = json!({"turns": [
        {"reply": {"tool_calls": [{"name": "write", "arguments": {"filePath": "x.txt", "content": "x"}}]}},
        {"expect": {"last_message_contains": "no terminal"}, "reply": {"text": "I could not write it."}}
    ]});
    let llm = FakeLlm::start(&script, "openai");
    let env = setup(&llm, "openai", "");
    let r = run(&env, &["write x"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(!env.workspace().join("x.txt").exists());
    assert_eq!(r.of_type("permission")[1]["reply"]["outcome"], "reject");
}

/// Every request of a session extends the previous one: same system, same tools, and the
/// earlier messages unchanged (prompt caches depend on it).
#[test]
fn the_prefix_is_byte_stable_over_ten_steps() {
    for format in FORMATS {
        let mut turns: Vec<Value> = (0..9)
            .map(|i| json!({"reply": {"text": format!("step {i}"), "tool_calls": [
                {"name": "write", "arguments": {"filePath": format!("f{i}.txt"), "content": format!("{i}\n")}}]}}))
            .collect();
        turns.push(json!({"reply": {"text": "all ten done"}}));
        let llm = FakeLlm::start(&json!({"turns": turns}), format);
        let env = setup(&llm, format, "max_steps = 20\n");
        let r = run(&env, &["--mode", "auto", "ten steps"]);
        assert_eq!(r.code, 0, "{}", r.stderr);
        let requests = llm.requests();
        assert_eq!(requests.len(), 10);
        for pair in requests.windows(2) {
            let (a, b) = (&pair[0].body, &pair[1].body);
            assert_eq!(a["system"], b["system"], "{format}: system blocks stable");
            assert_eq!(a["tools"], b["tools"], "{format}: tools stable");
            let (ma, mb) = (
                a["messages"].as_array().unwrap(),
                b["messages"].as_array().unwrap(),
            );
            assert!(mb.len() > ma.len());
            // Anthropic merges tool results into the user turn that follows, so the last
            // message of a request may grow; everything before it must be identical.
            let stable = if format == "anthropic" {
                ma.len() - 1
            } else {
                ma.len()
            };
            assert_eq!(
                &mb[..stable],
                &ma[..stable],
                "{format}: earlier messages unchanged"
            );
        }
    }
}

#[test]
fn the_step_limit_asks_for_a_wrap_up_without_tools() {
    let turns: Vec<Value> = (0..2)
        .map(|i| json!({"reply": {"tool_calls": [{"name": "glob", "arguments": {"pattern": format!("*{i}")}}]}}))
        .chain(std::iter::once(json!({"expect": {"no_tools": true, "last_message_contains": "step limit"},
                                       "reply": {"text": "Summary: I looked around."}})))
        .collect();
    let llm = FakeLlm::start(&json!({"turns": turns}), "openai");
    let env = setup(&llm, "openai", "max_steps = 3\n");
    let r = run(&env, &["look around"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.done()["stop_reason"], "max_steps");
    assert!(r.text().contains("Summary"));
    assert!(llm.requests().iter().all(|q| q.error.is_none()));
}

#[test]
fn the_same_call_three_times_in_a_row_is_a_doom_loop() {
    let same =
        json!({"reply": {"tool_calls": [{"name": "glob", "arguments": {"pattern": "*.nothing"}}]}});
    let script = json!({"turns": [same, same, same,
        {"expect": {"last_message_contains": "repeated three times"}, "reply": {"text": "I will stop repeating myself."}}]});
    let llm = FakeLlm::start(&script, "openai");
    let env = setup(&llm, "openai", "[permission]\ndoom_loop = \"deny\"\n");
    let r = run(&env, &["loop"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let results = r.of_type("tool_result");
    assert_eq!(results.len(), 3);
    assert_eq!(results[0]["status"], "completed");
    assert_eq!(results[2]["status"], "error");

    // With the default (ask), the user is asked.
    let llm = FakeLlm::start(&script, "openai");
    let env = setup(&llm, "openai", "");
    let r = run(&env, &["--yes", "loop"]);
    assert!(
        r.of_type("permission")
            .iter()
            .any(|p| p["request"]["permission"] == "doom_loop")
    );
}

/// Whether any live (non-zombie) process belongs to process group `pgid`.
fn pgid_alive(pgid: i32) -> bool {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
        .any(|stat| {
            // pid (comm) state ppid pgrp ...; comm may contain spaces, so split after ')'.
            let rest: Vec<&str> = stat
                .rsplit_once(')')
                .map(|(_, r)| r)
                .unwrap_or("")
                .split_whitespace()
                .collect();
            rest.len() > 2 && rest[0] != "Z" && rest[2] == pgid.to_string()
        })
}

#[test]
fn ctrl_c_during_a_long_command_cancels_cleanly() {
    let script = json!({"turns": [
        {"reply": {"tool_calls": [{"name": "bash", "arguments": {"command": "echo $$ > pgid; sleep 30"}}]}}
    ]});
    let llm = FakeLlm::start(&script, "openai");
    let env = setup(&llm, "openai", "");
    let child = spawn(&env, &["--mode", "auto", "wait"]);
    let pgid_file = env.workspace().join("pgid");
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::fs::read_to_string(&pgid_file)
        .map(|s| s.trim().is_empty())
        .unwrap_or(true)
    {
        assert!(Instant::now() < deadline, "the command never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    let pgid: i32 = std::fs::read_to_string(&pgid_file)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(pgid_alive(pgid));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let r = finish(child);
    assert_eq!(r.code, 130, "{}", r.stderr);
    assert_eq!(r.done()["stop_reason"], "cancelled");
    assert!(!pgid_alive(pgid), "the command's process group is gone");
    let view = show(&env, &r.session());
    let tool = parts(&view, "tool")[0];
    assert_eq!(tool["status"], "interrupted", "{tool}");
}

#[test]
fn kill_9_mid_tool_call_then_restart_marks_it_failed_and_runs_pending_input() {
    let script = json!({"turns": [
        {"reply": {"tool_calls": [{"name": "bash", "arguments": {"command": "touch started; sleep 30"}}]}}
    ]});
    let llm = FakeLlm::start(&script, "openai");
    let env = setup(&llm, "openai", "");
    let mut child = spawn(&env, &["--mode", "auto", "first"]);
    let mut first_line = String::new();
    BufReader::new(child.stdout.as_mut().unwrap())
        .read_line(&mut first_line)
        .unwrap();
    let session = serde_json::from_str::<Value>(&first_line).unwrap()["session_id"]
        .as_str()
        .unwrap()
        .to_string();
    let deadline = Instant::now() + Duration::from_secs(20);
    while !env.workspace().join("started").exists() {
        assert!(Instant::now() < deadline);
        std::thread::sleep(Duration::from_millis(20));
    }
    // Another client queues input meanwhile (admitted, not yet promoted).
    {
        let mut store = agent_lsp::store::Store::open(&env.database()).unwrap();
        store
            .append(
                Some(&session),
                &agent_lsp::store::Event::InputAdmitted {
                    input_id: "queued-1".into(),
                    text: "queued while busy".into(),
                    context: Value::Null,
                },
            )
            .unwrap();
    }
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
    let view = show(&env, &session);
    assert_eq!(
        parts(&view, "tool")[0]["status"],
        "running",
        "the crash left it running"
    );

    let script = json!({"turns": [
        {"expect": {"last_message_contains": "queued while busy"}, "reply": {"text": "Handled the queued input."}},
        {"expect": {"last_message_contains": "after the crash"}, "reply": {"text": "And the new one."}}
    ]});
    let llm2 = FakeLlm::start(&script, "openai");
    point_at(&env, &llm2, "");
    let r = run(&env, &["--session", &session, "after the crash"]);
    assert_eq!(r.code, 0, "{}\n{:?}", r.stderr, llm2.requests());
    assert_eq!(r.text(), "Handled the queued input.And the new one.");
    let view = show(&env, &session);
    let tool = parts(&view, "tool")[0];
    assert_eq!(tool["status"], "error");
    assert!(
        tool["data"]["output"]
            .as_str()
            .unwrap()
            .contains("interrupted")
    );
    assert!(view["inbox"].as_array().unwrap().is_empty());
    // The interrupted call was not re-run: the second fake got only the two answers' requests.
    assert_eq!(llm2.requests().len(), 2);
    let store = agent_lsp::store::Store::open(&env.database()).unwrap();
    assert_eq!(store.integrity_check().unwrap(), "ok");
}

#[test]
fn an_unreadable_instruction_file_keeps_the_input_pending() {
    let llm = FakeLlm::start(&json!({"turns": [{"reply": {"text": "hi"}}]}), "openai");
    let env = setup(&llm, "openai", "");
    std::fs::create_dir(env.workspace().join("AGENTS.md")).unwrap(); // unreadable as a file
    let r = run(&env, &["hello"]);
    assert_eq!(r.code, 1);
    assert!(
        r.of_type("error")[0]["message"]
            .as_str()
            .unwrap()
            .contains("stays pending")
    );
    assert_eq!(
        llm.requests().len(),
        0,
        "no request with a partial baseline"
    );
    let view = show(&env, &r.session());
    assert_eq!(view["inbox"][0]["text"], "hello");
    // Fixed: the pending input runs.
    std::fs::remove_dir(env.workspace().join("AGENTS.md")).unwrap();
    std::fs::write(env.workspace().join("AGENTS.md"), "Be brief.").unwrap();
    let r = run(&env, &["--session", &r.session()]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(llm.requests()[0].body.to_string().contains("Be brief."));
}

#[test]
fn escapes_through_the_binary_are_refused_and_the_turn_goes_on() {
    let script = json!({"turns": [
        {"reply": {"tool_calls": [
            {"name": "read", "arguments": {"filePath": "/etc/passwd"}},
            {"name": "write", "arguments": {"filePath": "../escaped.txt", "content": "x"}},
            {"name": "bash", "arguments": {"command": "ls", "workdir": "/"}}
        ]}},
        {"expect": {"last_message_contains": "external_directory"}, "reply": {"text": "Those paths are outside the workspace."}}
    ]});
    let llm = FakeLlm::start(&script, "openai");
    let env = setup(&llm, "openai", "");
    let r = run(&env, &["--mode", "auto", "try to escape"]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let results = r.of_type("tool_result");
    assert_eq!(results.len(), 3);
    for result in &results {
        assert_eq!(result["status"], "error", "{result}");
        assert!(
            result["output"]
                .as_str()
                .unwrap()
                .contains("external_directory"),
            "{result}"
        );
    }
    assert!(
        !env.workspace()
            .parent()
            .unwrap()
            .join("escaped.txt")
            .exists()
    );
}

#[test]
fn changed_instructions_arrive_as_a_note_not_a_new_baseline() {
    let script = json!({"turns": [
        {"expect": {"system_contains": "Use tabs."}, "reply": {"text": "first"}},
        {"expect": {"last_message_contains": "Use spaces."}, "reply": {"text": "second"}}
    ]});
    let llm = FakeLlm::start(&script, "openai");
    let env = setup(&llm, "openai", "");
    std::fs::write(env.workspace().join("AGENTS.md"), "Use tabs.").unwrap();
    let first = run(&env, &["one"]);
    assert_eq!(first.code, 0, "{}", first.stderr);
    std::fs::write(env.workspace().join("AGENTS.md"), "Use spaces.").unwrap();
    let second = run(&env, &["--session", &first.session(), "two"]);
    assert_eq!(second.code, 0, "{}\n{:?}", second.stderr, llm.requests());
    let requests = llm.requests();
    assert_eq!(
        requests[0].body["messages"][0], requests[1].body["messages"][0],
        "the system prompt with the baseline is unchanged"
    );
}

#[test]
fn recall_finds_what_an_earlier_session_saw() {
    for format in FORMATS {
        let script = json!({"turns": [
            {"reply": {"text": "Running it.", "tool_calls": [{"name": "bash", "arguments": {
                "command": "echo 'error: the userStore cache at src/cache/user_store.rs overflowed at 4096 entries'",
                "description": "reproduce"}}]}},
            {"reply": {"text": "Noted."}},
            {"reply": {"text": "Let me check what we found before.", "tool_calls": [{"name": "recall", "arguments": {
                "query": "user store cache overflow", "scope": "project"}}]}},
            {"expect": {"last_message_contains": "4096 entries"},
             "reply": {"text": "It overflowed at 4096 entries."}}
        ]});
        let llm = FakeLlm::start(&script, format);
        let env = setup(&llm, format, "");
        let first = run(&env, &["--yes", "reproduce the cache bug"]);
        assert_eq!(first.code, 0, "{}", first.stderr);
        // A new session: the fact is only in the store.
        let second = run(&env, &["what did the cache bug look like?"]);
        assert_eq!(
            second.code,
            0,
            "{format}: {}\n{:?}",
            second.stderr,
            llm.requests().iter().map(|q| &q.error).collect::<Vec<_>>()
        );
        assert_ne!(first.session(), second.session());
        let result = second.of_type("tool_result");
        let output = result[0]["output"].as_str().unwrap_or_default().to_string();
        assert!(
            output.contains("files: src/cache/user_store.rs"),
            "{output}"
        );
        assert!(
            output.contains(&first.session()),
            "names the session: {output}"
        );
        assert!(llm.requests().iter().all(|q| q.error.is_none()));
        // The same index from the command line.
        let (code, out, err) = env.run(&["session", "search", "userStore", "--json"]);
        assert_eq!(code, 0, "{err}");
        let hits: Value = serde_json::from_str(&out).unwrap();
        assert_eq!(hits[0]["sessionId"], first.session(), "{hits}");
        assert_eq!(hits[0]["paths"][0], "src/cache/user_store.rs");
    }
}

#[test]
fn memory_blocks_are_seeded_shown_edited_within_limits_and_logged() {
    let script = json!({"turns": [
        {"expect": {"system_contains": "<block label=\"project\""},
         "reply": {"text": "Noting it.", "tool_calls": [
            {"name": "memory_set", "arguments": {"label": "project", "content": "Build with `make all`; the tests need REDIS_URL."}},
            {"name": "memory_replace", "arguments": {"label": "project", "old": "make all", "new": "make build"}},
            {"name": "memory_set", "arguments": {"label": "style", "content": "far too long for this block"}}]}},
        {"expect": {"last_message_contains": "at most 10 characters"}, "reply": {"text": "Saved."}},
        // The same session, next prompt: the change arrives as a supplemental note.
        {"expect": {"last_message_contains": "now reads:"}, "reply": {"text": "Seen."}},
        // A new session: the block is in its baseline.
        {"expect": {"system_contains": "Build with `make build`; the tests need REDIS_URL."},
         "reply": {"text": "I remember."}}
    ]});
    let llm = FakeLlm::start(&script, "openai");
    let env = setup(&llm, "openai", "");
    let ws = env.workspace();
    std::process::Command::new("git")
        .args(["init", "-q"])
        .current_dir(&ws)
        .status()
        .unwrap();
    // A global block with a small limit.
    let global = env.config_home().join("agent-lsp/memory");
    std::fs::create_dir_all(&global).unwrap();
    std::fs::write(
        global.join("style.md"),
        "---\ndescription: Code style\nlimit: 10\n---\n",
    )
    .unwrap();

    let exclude_before = std::fs::read(ws.join(".git/info/exclude")).unwrap();
    let first = run(&env, &["remember how to build"]);
    assert_eq!(
        first.code,
        0,
        "{}\n{:?}\n{:?}",
        first.stderr,
        first.lines.last(),
        llm.requests().iter().map(|q| &q.error).collect::<Vec<_>>()
    );
    // Seeded: a global `human` block and the project's `project` block, kept out of git by
    // a folder that ignores itself (nothing under .git is written).
    assert!(env.config_home().join("agent-lsp/memory/human.md").exists());
    assert!(ws.join(".agent-lsp/.gitignore").exists());
    assert_eq!(
        exclude_before,
        std::fs::read(ws.join(".git/info/exclude")).unwrap()
    );
    assert!(
        !ws.join(".gitignore").exists(),
        "the user's .gitignore is never written"
    );
    let project = std::fs::read_to_string(ws.join(".agent-lsp/memory/project.md")).unwrap();
    assert!(project.contains("Build with `make build`"), "{project}");
    assert!(
        project.starts_with("---\nlabel: project\ndescription:"),
        "{project}"
    );
    // The over-long write was refused (the block limit is 10 characters).
    let results = first.of_type("tool_result");
    assert!(
        results[2]["output"]
            .as_str()
            .unwrap()
            .contains("at most 10 characters"),
        "{results:?}"
    );
    // Each write is an event: which block, what content, in which session.
    let store = agent_lsp::store::Store::open(&env.database()).unwrap();
    let writes: Vec<_> = store
        .events(Some(&first.session()))
        .unwrap()
        .into_iter()
        .filter(|e| e.event.type_name() == "memory_written")
        .collect();
    assert_eq!(
        writes.len(),
        2,
        "set and replace; the refused one is not a write"
    );

    let again = run(&env, &["--session", &first.session(), "anything new?"]);
    assert_eq!(again.code, 0, "{}", again.stderr);
    let fresh = run(&env, &["what do you remember?"]);
    assert_eq!(fresh.code, 0, "{}", fresh.stderr);
    assert!(
        llm.requests().iter().all(|q| q.error.is_none()),
        "{:?}",
        llm.requests().iter().map(|q| &q.error).collect::<Vec<_>>()
    );
    assert_eq!(
        exclude_before,
        std::fs::read(ws.join(".git/info/exclude")).unwrap()
    );
}

#[test]
fn read_only_calls_of_one_answer_run_at_once_and_writes_keep_their_place() {
    const SLOW_MS: u64 = 600;
    let llm = FakeLlm::start(&json!({"turns": []}), "openai");
    let page = |n: u32| format!("{}/_fake/slow/{SLOW_MS}?page={n}", llm.url);
    let script = json!({"turns": [
        {"reply": {"tool_calls": [
            {"name": "webfetch", "arguments": {"url": page(1), "format": "text"}},
            {"name": "webfetch", "arguments": {"url": page(2), "format": "text"}},
            {"name": "webfetch", "arguments": {"url": page(3), "format": "text"}},
            {"name": "write", "arguments": {"filePath": "notes.txt", "content": "written in between\n"}},
            {"name": "read", "arguments": {"filePath": "notes.txt"}},
            {"name": "grep", "arguments": {"pattern": "between"}}
        ]}},
        {"expect": {"last_message_contains": "notes.txt"}, "reply": {"text": "done"}}
    ]});
    // The pages come from a second fake, so the script can name the first one's address.
    let pages = llm;
    let llm = FakeLlm::start(&script, "openai");
    let env = setup(&llm, "openai", "webfetch_allow_hosts = [\"127.0.0.1\"]\n");
    let r = run(&env, &["--yes", "fetch three pages, then note"]);
    assert_eq!(r.code, 0, "{}\n{:?}", r.stderr, r.lines);
    // The three fetches were all asked before the first could have answered.
    let asked: Vec<u64> = pages
        .requests()
        .iter()
        .filter(|q| q.path.starts_with("/_fake/slow"))
        .map(|q| q.received_unix_us)
        .collect();
    assert_eq!(asked.len(), 3, "{asked:?}");
    let spread = asked.iter().max().unwrap() - asked.iter().min().unwrap();
    assert!(
        spread < SLOW_MS * 1000,
        "the fetches overlapped: {spread} µs apart"
    );
    // Results in the model's order; the write ran before the read that sees it.
    let results = r.of_type("tool_result");
    let names: Vec<_> = results
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        ["webfetch", "webfetch", "webfetch", "write", "read", "grep"]
    );
    assert!(
        results.iter().all(|t| t["status"] == "completed"),
        "{results:?}"
    );
    assert!(
        results[0]["output"]
            .as_str()
            .unwrap()
            .contains("took 600 ms")
    );
    assert!(
        results[4]["output"]
            .as_str()
            .unwrap()
            .contains("written in between")
    );
    let next = &llm.requests()[1].body;
    let ids: Vec<_> = next["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["tool_call_id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ids.len(), 6);
    let asked_ids: Vec<_> = next["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["tool_calls"].is_array())
        .unwrap()["tool_calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["id"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(ids, asked_ids, "results in the order of the calls");
}

#[test]
fn a_refused_answer_ends_the_turn_as_refusal_and_its_calls_never_run() {
    // OpenAI's `content_filter`, Anthropic's `refusal`: the turn ends, nothing of the answer
    // is acted on, the user reads why, the exit code says so.
    for (format, reason) in [("openai", "content_filter"), ("anthropic", "refusal")] {
        let script = json!({"turns": [
            {"reply": {"text": "I will not", "finish_reason": reason,
                       "tool_calls": [{"name": "write", "arguments": {"filePath": "made.txt", "content": "x"}}]}}
        ]});
        let llm = FakeLlm::start(&script, format);
        let env = setup(&llm, format, "");
        let r = run(&env, &["--yes", "write made.txt"]);
        assert_eq!(r.code, 4, "{format}: {}", r.stderr);
        assert_eq!(llm.requests().len(), 1, "{format}: no step after a refusal");
        assert_eq!(r.done()["stop_reason"], "refusal", "{format}");
        let why = r.done()["error"].as_str().unwrap_or_default().to_string();
        assert!(
            why.contains("stopped the answer as a refusal"),
            "{format}: {why}"
        );
        assert!(!env.workspace().join("made.txt").exists(), "{format}");
        let view = show(&env, &r.session());
        let tool = &parts(&view, "tool")[0];
        assert_eq!(tool["status"], "error", "{format}: {tool}");
        let output = tool["data"]["output"].as_str().unwrap();
        assert!(output.contains("refusal"), "{format}: {output}");
    }
}
