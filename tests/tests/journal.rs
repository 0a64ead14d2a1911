//! The journal through the real binary: off by default (the model has no journal tools), on
//! with `[journal] enabled = true`; entries as markdown files with front matter that the
//! model writes, searches and reads, and the user lists, searches and shows; search by text
//! and, with an embeddings model, by meaning — with the degradations: no embeddings model, a
//! sidecar of another model, an entry without a sidecar, an endpoint that fails, and entries
//! edited or deleted while the server runs.

use std::path::PathBuf;

use agent_lsp_tests::cli_run::{point_at, run, setup};
use agent_lsp_tests::fake_llm::bag_of_words;
use agent_lsp_tests::process::{FakeLlm, TestEnv};
use serde_json::{Value, json};

const ON: &str = "[journal]\nenabled = true\n";

fn journal_dir(env: &TestEnv) -> PathBuf {
    env.config_home().join("agent-lsp/journal")
}

fn journal(env: &TestEnv, args: &[&str]) -> Value {
    let ws = env.workspace();
    let out = env
        .command(&["journal"])
        .args(args)
        .arg("--cwd")
        .arg(&ws)
        .arg("--json")
        .env("FAKE_KEY", "k")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "journal {args:?}: {stderr}");
    serde_json::from_slice(&out.stdout).unwrap()
}

fn titles(found: &Value) -> Vec<String> {
    found["hits"]
        .as_array()
        .unwrap()
        .iter()
        .map(|h| h["title"].as_str().unwrap().to_string())
        .collect()
}

fn tool_names(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .map(|t| {
            t.iter()
                .map(|t| {
                    t["function"]["name"]
                        .as_str()
                        .unwrap_or_default()
                        .to_string()
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn off_by_default_the_model_has_no_journal_tools() {
    let llm = FakeLlm::start(&json!({"turns": [{"reply": {"text": "Hi."}}]}), "openai");
    let env = setup(&llm, "openai", "");
    assert_eq!(run(&env, &["--yes", "hello"]).code, 0);
    let tools = tool_names(&llm.requests()[0].body);
    assert!(tools.contains(&"recall".to_string()), "{tools:?}");
    assert!(
        tools.iter().all(|t| !t.starts_with("journal_")),
        "{tools:?}"
    );
    assert!(!journal_dir(&env).exists(), "nothing collected");
}

#[test]
fn the_model_writes_searches_and_reads_entries_that_the_user_can_read_too() {
    let write = json!({"turns": [
        {"expect": {"tools_include": ["journal_write", "journal_search", "journal_read"]},
         "reply": {"tool_calls": [{"name": "journal_write", "arguments": {
            "title": "Why the cacheKey includes the locale",
            "body": "Cached pages mixed languages (the French bug). The fix is in src/cache.rs.",
            "tags": ["cache", "i18n"]}}]}},
        {"expect": {"last_message_contains": "Wrote journal entry"}, "reply": {"text": "Noted."}},
        {"reply": {"tool_calls": [{"name": "journal_write", "arguments": {"title": "", "body": "x"}}]}},
        {"expect": {"last_message_contains": "a title is one line"}, "reply": {"text": "Oops."}}
    ]});
    let llm = FakeLlm::start(&write, "openai");
    let env = setup(&llm, "openai", ON);
    let one = run(&env, &["--yes", "note why the cache key has the locale"]);
    assert_eq!(one.code, 0, "{}", one.stderr);
    assert_eq!(run(&env, &["--yes", "write an empty one"]).code, 0);
    assert!(llm.requests().iter().all(|q| q.error.is_none()));

    // A markdown file with front matter, for a person to read.
    let files: Vec<PathBuf> = std::fs::read_dir(journal_dir(&env))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let text = std::fs::read_to_string(&files[0]).unwrap();
    for want in [
        "title: Why the cacheKey includes the locale",
        "provider: openai",
        "model: fake-model",
        "mode: build",
        &format!("session: {}", one.session()),
        "- i18n",
        "Cached pages mixed languages",
    ] {
        assert!(text.contains(want), "{want:?} not in:\n{text}");
    }
    assert!(text.starts_with("---\n"));

    let listed = journal(&env, &["list"]);
    let id = listed["entries"][0]["id"].as_str().unwrap().to_string();
    assert_eq!(listed["entries"].as_array().unwrap().len(), 1);
    // Identifier-aware: `cache key` finds `cacheKey`.
    let found = journal(&env, &["search", "cache key locale"]);
    assert_eq!(found["semantic"], "off");
    assert_eq!(titles(&found), ["Why the cacheKey includes the locale"]);
    assert!(found["hits"][0]["snippet"].as_str().unwrap().contains('«'));
    let shown = journal(&env, &["show", &id[..13]]);
    assert_eq!(shown["tags"], json!(["cache", "i18n"]));

    // Another session, another project even: the model searches and reads it.
    let read = json!({"turns": [
        {"reply": {"tool_calls": [{"name": "journal_search", "arguments": {"query": "French bug"}}]}},
        {"expect": {"last_message_contains": id.as_str()},
         "reply": {"tool_calls": [{"name": "journal_read", "arguments": {"id": id}}]}},
        {"expect": {"last_message_contains": "src/cache.rs"}, "reply": {"text": "Found it."}}
    ]});
    let llm = FakeLlm::start(&read, "openai");
    point_at(&env, &llm, ON);
    let two = run(&env, &["--yes", "what was the French bug?"]);
    assert_eq!(two.code, 0, "{}", two.stderr);
    assert!(
        llm.requests().iter().all(|q| q.error.is_none()),
        "{:?}",
        llm.requests()
            .iter()
            .map(|q| q.error.clone())
            .collect::<Vec<_>>()
    );
    assert_eq!(two.text(), "Found it.");
}

/// A journal of three entries a person wrote: one with a sidecar of this model, one with a
/// sidecar of another model, one with none.
fn three_entries(env: &TestEnv, query: &str) -> PathBuf {
    let dir = journal_dir(env);
    std::fs::create_dir_all(&dir).unwrap();
    let entry = |name: &str, title: &str, body: &str| {
        let path = dir.join(name);
        std::fs::write(
            &path,
            format!(
                "---\nid: {name}\ntitle: {title}\ncreated: 2026-11-0{}T10:00:00Z\n---\n{body}\n",
                name.len() % 9
            ),
        )
        .unwrap();
        path
    };
    let car = |entry: &PathBuf, model: &str| {
        let v = bag_of_words(query);
        let car = json!({"v": 1, "model": model, "dimension": v.len(), "vector": v});
        std::fs::write(entry.with_extension("embedding.json"), car.to_string()).unwrap();
    };
    let a = entry("a.md", "Deploy checklist", "run make ship, then tag");
    car(&a, "nomic-embed-text");
    let b = entry("bb.md", "Slow builds", "linking with lld helps");
    car(&b, "another-model");
    entry(
        "ccc.md",
        "Flaky test in the parser",
        "the parser test flakes on CI",
    );
    dir
}

#[test]
fn search_by_meaning_degrades_to_text_where_it_cannot_be_used() {
    let query = "how do we release";
    // No embeddings model: text only; the deploy checklist shares no word with the query.
    let env = TestEnv::new();
    let dir = three_entries(&env, query);
    let found = journal(&env, &["search", query]);
    assert_eq!(found["semantic"], "off");
    assert!(titles(&found).is_empty(), "{found}");

    let llm = FakeLlm::start(&json!({"turns": []}), "openai");
    point_at(&env, &llm, "embeddings_model = \"nomic-embed-text\"\n");
    let found = journal(&env, &["search", query]);
    assert_eq!(found["semantic"], "on");
    // By meaning through its sidecar; the one of another model is not (and not an error).
    assert_eq!(titles(&found), ["Deploy checklist"], "{found}");
    assert_eq!(found["hits"][0]["matched"], "meaning");
    // The entry without a sidecar got one, of this model; the other model's was left alone.
    let made: Value = serde_json::from_str(
        &std::fs::read_to_string(dir.join("ccc.embedding.json")).expect("a sidecar was made"),
    )
    .unwrap();
    assert_eq!(
        (&made["v"], &made["model"]),
        (&json!(1), &json!("nomic-embed-text"))
    );
    assert_eq!(made["dimension"], 64);
    let other: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("bb.embedding.json")).unwrap())
            .unwrap();
    assert_eq!(other["model"], "another-model");
    // Text still counts: the flaky parser test, by its words and its meaning.
    let found = journal(&env, &["search", "parser test flakes"]);
    assert_eq!(titles(&found)[0], "Flaky test in the parser");
    assert_eq!(found["hits"][0]["matched"], "text+meaning");

    // An endpoint that fails: text only, said so.
    let broken = FakeLlm::start(
        &json!({"turns": [], "embeddings": {"fault": {"status": 503, "body": "loading model"}}}),
        "openai",
    );
    point_at(&env, &broken, "embeddings_model = \"nomic-embed-text\"\n");
    let found = journal(&env, &["search", "lld"]);
    assert!(
        found["semantic"]
            .as_str()
            .unwrap()
            .contains("loading model"),
        "{found}"
    );
    assert_eq!(titles(&found), ["Slow builds"]);
}

#[tokio::test]
async fn the_editor_searches_the_journal_and_sees_edits_and_deletions_without_a_restart() {
    use agent_lsp_tests::lsp_client::{LspClient, initialize_params};
    let env = TestEnv::new();
    let dir = three_entries(&env, "unused");
    let client = LspClient::spawn(&env, &[]);
    client.initialize(initialize_params(&env.workspace())).await;
    let search = |q: &str| client.request("agent/journal/search", json!({"query": q}));
    let found = search("make ship").await.unwrap();
    assert_eq!(titles(&found), ["Deploy checklist"]);
    assert!(found["hits"][0]["path"].as_str().unwrap().ends_with("a.md"));

    // The title, either way round, ranks an entry first.
    let found = search("slow builds on CI").await.unwrap();
    assert_eq!(titles(&found)[0], "Slow builds", "{found}");
    assert_eq!(found["hits"][0]["matched"], "title");

    // Edited: the new words are found, the old ones no longer.
    std::fs::write(
        dir.join("a.md"),
        "---\nid: a.md\ntitle: Release checklist\ncreated: 2026-11-02T10:00:00Z\n---\nbump the version, then make release\n",
    )
    .unwrap();
    assert_eq!(
        titles(&search("make release").await.unwrap()),
        ["Release checklist"]
    );
    assert!(titles(&search("ship").await.unwrap()).is_empty());
    // Deleted: gone. A new file a person wrote: found.
    std::fs::remove_file(dir.join("bb.md")).unwrap();
    assert!(titles(&search("lld").await.unwrap()).is_empty());
    std::fs::write(
        dir.join("mine.md"),
        "# Coffee machine\n\nthe second floor one works\n",
    )
    .unwrap();
    assert_eq!(titles(&search("coffee").await.unwrap()), ["Coffee machine"]);
    let bad = client
        .request("agent/journal/search", json!({"limit": 3}))
        .await
        .unwrap_err();
    assert_eq!(bad.code, -32602, "{bad:?}");
}
