//! The session state file through `agent-lsp run` with fake-llm: its tools, the state block
//! with the git line and obligations, the notes mid-turn, the server's `[auto]` entries and
//! the warnings — in a workspace that is a git repository, which must not see any of it.

use agent_lsp_tests::cli_run::{run, setup};
use agent_lsp_tests::process::{FakeLlm, TestEnv, git};
use serde_json::{Value, json};

/// A workspace with one commit.
fn repo(llm: &FakeLlm) -> TestEnv {
    let env = setup(llm, "openai", "");
    let ws = env.workspace();
    git(&ws, &["init", "-q", "-b", "main"]);
    git(&ws, &["add", "."]);
    git(&ws, &["commit", "-qm", "first commit"]);
    env
}

fn state_file(env: &TestEnv) -> String {
    std::fs::read_to_string(env.workspace().join(".agent-lsp/STATE.md")).unwrap_or_default()
}

/// The text of the first user message of a recorded request.
fn prompt_of(body: &Value) -> String {
    body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .find(|m| m["role"] == "user")
        .map(|m| m["content"].to_string())
        .unwrap_or_default()
}

#[test]
fn the_state_tools_the_block_and_its_notes_work_and_git_sees_none_of_it() {
    let script = json!({"turns": [
        {"expect": {"request_contains": "No checkpoint yet"},
         "reply": {"tool_calls": [{"name": "edit", "arguments": {
            "filePath": "src/lib.rs", "oldString": "41", "newString": "42"}}]}},
        // The edit's result carries the obligation the change made.
        {"expect": {"last_message_contains": "needs a checkpoint (files changed since the last one)"},
         "reply": {"tool_calls": [
            {"name": "context_discover", "arguments": {"target": "decisions",
                "content": "[REJECTED] a lookup table: 3x slower on the bench"}},
            {"name": "context_checkpoint", "arguments": {"focus": "the answer function",
                "phase": "testing", "next": "run cargo test", "handoff": "42 is right; see docs/plan.md"}},
            {"name": "context_load", "arguments": {"path": "docs"}},
            {"name": "context_load", "arguments": {"path": "/etc"}},
            {"name": "context_checkpoint", "arguments": {"focus": "x".repeat(1001)}}]}},
        // The checkpoint answered the obligation: the note says so.
        {"expect": {"last_message_contains": "Focus: the answer function"},
         "reply": {"text": "Done."}}
    ]});
    let llm = FakeLlm::start(&script, "openai");
    let env = repo(&llm);
    let ws = env.workspace();
    std::fs::create_dir_all(ws.join("docs")).unwrap();
    std::fs::write(ws.join("docs/plan.md"), "# Plan\n\nstep one\nstep two\n").unwrap();
    std::fs::write(ws.join("docs/notes.txt"), "not markdown").unwrap();
    git(&ws, &["add", "."]);
    git(&ws, &["commit", "-qm", "docs"]);
    let dot_git_before = git(&ws, &["rev-parse", "HEAD"]);

    let r = run(&env, &["--yes", "make it 42"]);
    let requests = llm.requests();
    assert_eq!(
        r.code,
        0,
        "{}\n{:?}",
        r.stderr,
        requests.iter().map(|q| &q.error).collect::<Vec<_>>()
    );
    let first = prompt_of(&requests[0].body);
    assert!(
        first.contains("<session-state file=\\\".agent-lsp/STATE.md\\\">"),
        "{first}"
    );
    assert!(
        first.contains("Git: main, 0 uncommitted, 0 ahead"),
        "{first}"
    );
    assert!(first.contains("Decisions: 0 recorded"), "{first}");
    // The block in the prompt stays as it was: the later change came as a note.
    assert_eq!(prompt_of(&requests[2].body), first);
    let last = requests[2].body["messages"]
        .as_array()
        .unwrap()
        .last()
        .unwrap()
        .to_string();
    assert!(last.contains("Phase: testing"), "{last}");
    assert!(last.contains("Decisions: 1 recorded"), "{last}");
    assert!(!last.contains("needs a checkpoint"), "{last}");
    // The tools' results.
    let tool_outputs: Vec<String> = requests[2].body["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["content"].as_str().unwrap().to_string())
        .collect();
    assert!(tool_outputs[3].contains("## plan.md (") && tool_outputs[3].contains("step two"));
    assert!(!tool_outputs[3].contains("notes.txt"));
    assert!(
        tool_outputs[4].contains("outside the workspace"),
        "{}",
        tool_outputs[4]
    );
    assert!(tool_outputs[5].contains("focus is 1001 characters; at most 1000"));

    let state = state_file(&env);
    assert!(state.contains("## Current\n\n- Focus: the answer function\n- Phase: testing\n"));
    assert!(state.contains("- Handoff: 42 is right; see docs/plan.md\n"));
    assert!(state.contains("[REJECTED] a lookup table: 3x slower on the bench"));
    assert!(
        state.contains("[auto]") && state.contains(" on main: docs"),
        "{state}"
    );
    assert!(
        !state.contains("Session ended"),
        "the turn left a checkpoint: {state}"
    );
    // Git sees the edit and nothing of ours; its own files are untouched.
    assert_eq!(git(&ws, &["status", "--porcelain"]), " M src/lib.rs\n");
    assert_eq!(git(&ws, &["rev-parse", "HEAD"]), dot_git_before);
}

#[test]
fn auto_entries_and_warnings_carry_the_work_from_one_session_to_the_next() {
    let script = json!({"turns": [
        // Session 1 edits and stops without a checkpoint.
        {"reply": {"tool_calls": [{"name": "bash", "arguments": {
            "command": "echo changed > made_by_bash.txt", "description": "write a file"}}]}},
        {"reply": {"text": "Done, no checkpoint."}},
        // Session 2 starts after the server's entry: a resumption warning.
        {"expect": {"request_contains": "resuming after an automatic entry"},
         "reply": {"text": "I will check the state first."}},
        // Its next turn, after a hand edit of STATE.md and a commit.
        {"expect": {"request_contains": ".agent-lsp/STATE.md was edited outside the agent since the last turn"},
         "reply": {"text": "Read it again."}}
    ]});
    let llm = FakeLlm::start(&script, "openai");
    let env = repo(&llm);
    let ws = env.workspace();
    let one = run(&env, &["--yes", "write a file"]);
    assert_eq!(one.code, 0, "{}", one.stderr);
    let state = state_file(&env);
    let ended: Vec<&str> = state
        .lines()
        .filter(|l| l.contains("Session ended."))
        .collect();
    assert_eq!(ended.len(), 1, "{state}");
    assert!(
        ended[0].contains("[auto]") && ended[0].contains("1 tool calls. No explicit checkpoint."),
        "a file written by bash counts: {state}"
    );

    let two = run(&env, &["--yes", "go on"]);
    assert_eq!(two.code, 0, "{}", two.stderr);
    let sid = two.session();
    // A person edits STATE.md and commits between turns.
    let edited = state_file(&env).replace("## Decisions\n", "## Decisions\n\n- use tabs\n");
    std::fs::write(ws.join(".agent-lsp/STATE.md"), edited).unwrap();
    std::fs::write(ws.join("AGENTS.md"), "Use tabs.\n").unwrap();
    git(&ws, &["add", "made_by_bash.txt"]);
    git(&ws, &["commit", "-qm", "bash output"]);
    let three = run(&env, &["--session", &sid, "and now?"]);
    assert_eq!(
        three.code,
        0,
        "{}\n{:?}",
        three.stderr,
        llm.requests().iter().map(|q| &q.error).collect::<Vec<_>>()
    );
    let last = llm.requests().last().unwrap().body.to_string();
    assert!(last.contains("Decisions: 1 recorded"), "{last}");
    assert!(
        last.contains("AGENTS.md was edited outside the agent"),
        "{last}"
    );
    let state = state_file(&env);
    assert_eq!(state.matches(" on main: bash output").count(), 1, "{state}");
    assert_eq!(
        state.matches(" on main: first commit").count(),
        1,
        "once each: {state}"
    );
    assert!(state.contains("- use tabs\n"), "a person's entry is kept");
    assert_eq!(git(&ws, &["status", "--porcelain"]), "?? AGENTS.md\n");
}
