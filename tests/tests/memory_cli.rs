//! `agent-lsp memory` through the real binary: writes with dedup (also from two processes
//! at once), what surfaces for a prompt (core always, local-only never, the gate), TTL
//! expiry, project isolation, and why / update / forget / feedback / export.

use agent_lsp_tests::memory::{memory_in as memory, ok_in as ok};
use agent_lsp_tests::process::TestEnv;
use serde_json::Value;

fn ids(v: &Value) -> Vec<String> {
    v["facts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["id"].as_str().unwrap().to_string())
        .collect()
}

#[test]
fn facts_are_written_once_surfaced_by_relevance_and_kept_to_their_project() {
    let env = TestEnv::new();
    let a = env.workspace();
    std::fs::create_dir_all(a.join(".git")).unwrap();
    let b = env.dir.path().join("other");
    std::fs::create_dir_all(b.join(".git")).unwrap();

    let redis = ok(&env, &a, &["add", "The Redis connection pool size is 64"]);
    assert_eq!(redis["created"], true);
    let again = ok(&env, &a, &["add", "the redis  connection pool size is 64."]);
    assert_eq!(
        (again["id"].clone(), again["created"].clone()),
        (redis["id"].clone(), false.into())
    );
    let core = ok(
        &env,
        &a,
        &["add", "Answer in British English", "--tier", "core"],
    );
    let secret = ok(
        &env,
        &a,
        &[
            "add",
            "The redis admin password is hunter2",
            "--sensitivity",
            "local-only",
        ],
    );
    let global = ok(
        &env,
        &a,
        &["add", "Prefer tabs in Go files", "--scope", "global"],
    );

    // Two processes at once: the same text is one fact; two similar texts stay two.
    let spawn = |text: &str| {
        let cwd = a.to_str().unwrap().to_string();
        env.command(&["memory", "add", text, "--cwd", &cwd, "--json"])
            .output()
            .unwrap()
    };
    let (x, y) = std::thread::scope(|s| {
        let x = s.spawn(|| spawn("The deploy freeze starts on December 18"));
        let y = s.spawn(|| spawn("The deploy freeze starts on December 18"));
        (x.join().unwrap(), y.join().unwrap())
    });
    let (x, y): (Value, Value) = (
        serde_json::from_slice(&x.stdout).unwrap(),
        serde_json::from_slice(&y.stdout).unwrap(),
    );
    assert_eq!(x["id"], y["id"], "one fact");
    assert_ne!(x["created"], y["created"], "one of them made it");
    std::thread::scope(|s| {
        s.spawn(|| spawn("The billing cron job runs at 03:17 UTC"));
        s.spawn(|| spawn("The billing cron job runs at 03:18 UTC"));
    });
    let listed = ok(&env, &a, &["list"]);
    assert_eq!(ids(&listed).len(), 7, "{listed}");
    let secret_row = listed["facts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == secret["id"])
        .unwrap();
    assert_eq!(secret_row["sensitivity"], "local-only");
    assert_eq!(secret_row["source"], "user");

    // What a prompt gets: core always, the relevant fact, never the local-only one.
    let shown = ok(&env, &a, &["surface", "how big is the redis pool"]);
    assert_eq!(
        ids(&shown),
        [core["id"].as_str().unwrap(), redis["id"].as_str().unwrap()],
        "{shown}"
    );
    assert!(shown["tokens"].as_u64().unwrap() > 0);
    let nothing = ok(&env, &a, &["surface", "write a unit test for the parser"]);
    assert_eq!(
        ids(&nothing),
        [core["id"].as_str().unwrap()],
        "only core: {nothing}"
    );
    let why = ok(
        &env,
        &a,
        &[
            "why",
            secret["id"].as_str().unwrap(),
            "redis admin password",
        ],
    );
    assert_eq!(why["verdict"], "local-only: never shown to the model");
    let why = ok(
        &env,
        &a,
        &[
            "why",
            redis["id"].as_str().unwrap(),
            "how big is the redis pool",
        ],
    );
    assert_eq!(why["verdict"], "passed the gate");
    assert_eq!(why["rank"], 2);

    // Another project sees the global fact only, and cannot touch this one's.
    let there = ok(&env, &b, &["list"]);
    assert_eq!(ids(&there), [global["id"].as_str().unwrap()]);
    let (code, _, err) = memory(&env, &b, &["forget", redis["id"].as_str().unwrap()]);
    assert_ne!(code, 0);
    assert!(err.contains("belongs to another project"), "{err}");

    // Update, feedback, forget, export.
    let id = redis["id"].as_str().unwrap();
    ok(
        &env,
        &a,
        &["update", id, "The Redis connection pool size is 128"],
    );
    ok(&env, &a, &["useful", id]);
    ok(&env, &a, &["irrelevant", id]);
    let exported = ok(&env, &a, &["export"]);
    let row = exported["facts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["id"] == id)
        .unwrap()
        .clone();
    assert_eq!(row["content"], "The Redis connection pool size is 128");
    assert_eq!(
        (row["useful"].clone(), row["irrelevant"].clone()),
        (1.into(), 1.into())
    );
    assert!(!row["confirmedAt"].is_null());
    ok(&env, &a, &["forget", id]);
    assert!(!ids(&ok(&env, &a, &["list"])).contains(&id.to_string()));
    let (code, _, err) = memory(&env, &a, &["update", "no-such-id", "x"]);
    assert!(code != 0 && err.contains("no fact no-such-id"), "{err}");
}

#[test]
fn a_temporary_fact_expires_and_needs_a_time_to_live() {
    let env = TestEnv::new();
    let a = env.workspace();
    let (code, _, err) = memory(
        &env,
        &a,
        &["add", "The build is red", "--tier", "temporary"],
    );
    assert_ne!(code, 0);
    assert!(err.contains("needs ttlHours"), "{err}");
    let (code, _, err) = memory(&env, &a, &["add", "x", "--ttl-hours", "1"]);
    assert!(
        code != 0 && err.contains("for temporary facts only"),
        "{err}"
    );
    // 0.0004 h: about 1.4 s.
    let t = ok(
        &env,
        &a,
        &[
            "add",
            "The main build is red until the fix lands",
            "--tier",
            "temporary",
            "--ttl-hours",
            "0.0004",
        ],
    );
    assert_eq!(
        ids(&ok(&env, &a, &["surface", "is the main build red"])),
        [t["id"].as_str().unwrap()]
    );
    std::thread::sleep(std::time::Duration::from_millis(1_800));
    assert!(ids(&ok(&env, &a, &["list"])).is_empty(), "expired");
    assert!(ids(&ok(&env, &a, &["surface", "is the main build red"])).is_empty());
}

#[test]
fn the_model_writes_facts_and_later_prompts_get_the_relevant_ones_never_the_local_only() {
    use agent_lsp_tests::cli_run::{run, setup};
    use agent_lsp_tests::process::FakeLlm;
    use serde_json::json;
    let script = json!({"turns": [
        {"reply": {"tool_calls": [
            {"name": "memory_write", "arguments": {"content": "The Redis connection pool size is 64"}},
            {"name": "memory_write", "arguments": {"content": "The admin password is hunter2", "sensitivity": "local-only"}},
            {"name": "memory_write", "arguments": {"content": "x", "tier": "temporary"}}]}},
        {"expect": {"last_message_contains": "needs ttlHours"}, "reply": {"text": "Remembered."}},
        // A new session: the prompt brings the relevant fact along, as a note on the prompt.
        {"expect": {"last_message_contains": "pool size is 64"},
         "reply": {"tool_calls": [{"name": "memory_read", "arguments": {"query": "admin password redis"}}]}},
        {"expect": {"last_message_contains": "Redis connection pool"}, "reply": {"text": "It is 64."}},
        {"reply": {"text": "Here is a test."}}
    ]});
    let llm = FakeLlm::start(&script, "openai");
    let env = setup(&llm, "openai", "");
    let ws = env.workspace();
    let one = run(
        &env,
        &[
            "--yes",
            "remember the pool size, and keep my password to yourself",
        ],
    );
    assert_eq!(one.code, 0, "{}", one.stderr);
    let two = run(&env, &["--yes", "how big is the redis pool?"]);
    assert_eq!(two.code, 0, "{}", two.stderr);
    let three = run(&env, &["--yes", "write a unit test for the parser"]);
    assert_eq!(three.code, 0, "{}", three.stderr);

    let requests = llm.requests();
    assert!(
        requests.iter().all(|q| q.error.is_none()),
        "{:?}",
        requests.iter().map(|q| &q.error).collect::<Vec<_>>()
    );
    let prompt_two = requests[2].body.to_string();
    assert!(prompt_two.contains("<memory-facts>"), "{prompt_two}");
    // After the session that wrote it, the local-only fact is in no request.
    for q in &requests[2..] {
        assert!(
            !q.body.to_string().contains("hunter2"),
            "local-only leaked: {}",
            q.body
        );
    }
    assert!(
        !requests[4].body.to_string().contains("<memory-facts>"),
        "nothing for a loose prompt"
    );

    let facts = ok(&env, &ws, &["list"]);
    let facts = facts["facts"].as_array().unwrap();
    assert_eq!(
        facts.len(),
        2,
        "the temporary one without a ttl was refused"
    );
    let redis = facts
        .iter()
        .find(|f| f["content"] == "The Redis connection pool size is 64")
        .unwrap();
    assert_eq!(redis["source"], "model");
    assert_eq!(redis["sessionId"].as_str(), Some(one.session().as_str()));
    assert!(redis["messageId"].is_string());
    assert_eq!(
        redis["surfacedCount"], 1,
        "shown once, with the second prompt"
    );
    assert!(
        redis["confirmedAt"].is_null(),
        "being shown is not a confirmation"
    );
}

#[test]
fn a_fact_marked_irrelevant_for_a_prompt_is_held_back_from_prompts_like_it_only() {
    let env = TestEnv::new();
    let a = env.workspace();
    let pool = ok(&env, &a, &["add", "The Redis connection pool size is 64"]);
    let id = pool["id"].as_str().unwrap();
    let prompt = "how big is the redis connection pool";
    assert_eq!(ids(&ok(&env, &a, &["surface", prompt])), [id]);
    ok(&env, &a, &["irrelevant", id, "--query", prompt]);
    assert!(ids(&ok(&env, &a, &["surface", prompt])).is_empty());
    let why = ok(&env, &a, &["why", id, prompt]);
    assert_eq!(
        why["verdict"], "held back: marked irrelevant for prompts like this",
        "{why}"
    );
    assert!(why["irrelevance"].as_f64().unwrap() < 0.5, "{why}");
    // An unrelated prompt that names the fact still gets it.
    let other = "raise the redis pool size to 128 for the load test";
    assert_eq!(ids(&ok(&env, &a, &["surface", other])), [id]);
    assert_eq!(ok(&env, &a, &["why", id, other])["irrelevance"], 1.0);
}
