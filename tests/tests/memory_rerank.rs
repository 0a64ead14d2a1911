//! The memory facts' optional rerank with embeddings, through the real binary against
//! fake-llm's `/v1/embeddings`: it reorders what the lexical gate let through, abstains when
//! the similarities say nothing, falls back to the lexical order when the endpoint fails or
//! takes over 4 s, never sends a local-only fact, and caches vectors per text.

use std::time::Duration;

use agent_lsp_tests::cli_run::point_at;
use agent_lsp_tests::memory::memory;
use agent_lsp_tests::process::{FakeLlm, TestEnv};
use serde_json::{Value, json};

const QUERY: &str = "how big is the redis connection pool";
const POOL: &str = "The Redis connection pool size is 64";
const TIMEOUT: &str = "Redis pool connections time out after 30 seconds";
const SECRET: &str = "The redis connection pool password is hunter2";

fn embeddings_at(env: &TestEnv, llm: &FakeLlm) {
    point_at(env, llm, "embeddings_model = \"nomic-embed-text\"\n");
}

fn order(v: &Value) -> Vec<String> {
    v["facts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["text"].as_str().unwrap().to_string())
        .collect()
}

fn seeded() -> (TestEnv, Vec<String>) {
    let env = TestEnv::new();
    memory(&env, &["add", POOL]);
    memory(&env, &["add", TIMEOUT]);
    memory(&env, &["add", SECRET, "--sensitivity", "local-only"]);
    // Without an embeddings model: the lexical order, both past the gate.
    let lexical = memory(&env, &["surface", QUERY]);
    assert_eq!(lexical["rerank"]["outcome"], "off");
    let lexical = order(&lexical);
    assert_eq!(lexical.len(), 2, "{lexical:?}");
    (env, lexical)
}

#[test]
fn the_rerank_reorders_by_meaning_and_never_sends_a_local_only_fact() {
    let (env, lexical) = seeded();
    // The second by words is the nearest in meaning.
    let script = json!({"turns": [], "embeddings": {"vectors": {
        QUERY: [1.0, 0.0], (lexical[1].as_str()): [1.0, 0.05], (lexical[0].as_str()): [0.0, 1.0]
    }}});
    let llm = FakeLlm::start(&script, "openai");
    embeddings_at(&env, &llm);
    let shown = memory(&env, &["surface", QUERY]);
    assert_eq!(
        shown["rerank"],
        json!({"outcome": "applied", "model": "nomic-embed-text"})
    );
    assert_eq!(order(&shown), [lexical[1].clone(), lexical[0].clone()]);

    let requests = llm.requests();
    assert_eq!(
        requests.len(),
        1,
        "the prompt and its candidates in one request"
    );
    let body = &requests[0].body;
    assert_eq!(requests[0].path, "/v1/embeddings");
    assert_eq!(body["model"], "nomic-embed-text");
    let inputs: Vec<&str> = body["input"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| i.as_str().unwrap())
        .collect();
    assert_eq!(inputs[0], QUERY);
    assert_eq!(inputs.len(), 3);
    assert!(!body.to_string().contains("hunter2"), "local-only: {body}");
}

#[test]
fn the_rerank_abstains_or_falls_back_and_the_lexical_order_stands() {
    let (env, lexical) = seeded();
    let same = json!({"turns": [], "embeddings": {"vectors": {
        QUERY: [1.0, 0.0], POOL: [1.0, 1.0], TIMEOUT: [1.0, 1.0]
    }}});
    let llm = FakeLlm::start(&same, "openai");
    embeddings_at(&env, &llm);
    let shown = memory(&env, &["surface", QUERY]);
    assert_eq!(shown["rerank"]["outcome"], "abstained", "{shown}");
    assert_eq!(order(&shown), lexical);

    let broken = FakeLlm::start(
        &json!({"turns": [], "embeddings": {"fault": {"status": 500, "body": "model not loaded"}}}),
        "openai",
    );
    embeddings_at(&env, &broken);
    let shown = memory(&env, &["surface", QUERY]);
    assert_eq!(shown["rerank"]["outcome"], "failed");
    assert!(
        shown["rerank"]["error"]
            .as_str()
            .unwrap()
            .contains("model not loaded")
    );
    assert_eq!(order(&shown), lexical);

    let garbage = FakeLlm::start(
        &json!({"turns": [], "embeddings": {"fault": {"body": "<html>busy</html>"}}}),
        "openai",
    );
    embeddings_at(&env, &garbage);
    let shown = memory(&env, &["surface", QUERY]);
    assert_eq!(shown["rerank"]["outcome"], "failed");
    assert_eq!(order(&shown), lexical);

    let slow = FakeLlm::start(
        &json!({"turns": [], "embeddings": {"fault": {"delay_ms": 20_000}}}),
        "openai",
    );
    embeddings_at(&env, &slow);
    let started = std::time::Instant::now();
    let shown = memory(&env, &["surface", QUERY]);
    let took = started.elapsed();
    assert_eq!(
        shown["rerank"],
        json!({"outcome": "failed", "error": "no answer within 4s"})
    );
    assert_eq!(order(&shown), lexical);
    assert!(took < Duration::from_secs(15), "waited {took:?}");
}

#[tokio::test]
async fn a_prompt_gets_the_reranked_facts_and_a_repeated_one_costs_no_embedding() {
    use agent_lsp_tests::lsp_client::{LspClient, initialize_params};
    let (env, lexical) = seeded();
    let script = json!({
        "turns": [{"reply": {"text": "It is 64."}}, {"reply": {"text": "Still 64."}}],
        "embeddings": {"vectors": {
            QUERY: [1.0, 0.0], (lexical[1].as_str()): [1.0, 0.05], (lexical[0].as_str()): [0.0, 1.0]
        }}
    });
    let llm = FakeLlm::start(&script, "openai");
    embeddings_at(&env, &llm);
    let client = LspClient::spawn(&env, &[("FAKE_KEY", "k")]);
    let mut params = initialize_params(&env.workspace());
    params["capabilities"]["experimental"] = json!({"agent": {"updates": true}});
    client.initialize(params).await;
    let idle = |n: usize| {
        let updates = client.received("agent/update");
        let ended = updates.iter().filter(|u| {
            u["params"]["update"]["kind"] == "status" && u["params"]["update"]["status"] == "idle"
        });
        (ended.count() >= n).then_some(())
    };
    let chats = || {
        llm.requests()
            .into_iter()
            .filter(|q| q.path.ends_with("/chat/completions"))
            .collect::<Vec<_>>()
    };
    let started = client
        .request("agent/prompt", json!({"text": QUERY}))
        .await
        .unwrap();
    let sid = started["sessionId"].as_str().unwrap().to_string();
    client.wait_until("the first turn", || idle(1)).await;
    client
        .request("agent/prompt", json!({"sessionId": sid, "text": QUERY}))
        .await
        .unwrap();
    client.wait_until("the second turn", || idle(2)).await;
    assert_eq!(chats().len(), 2);
    for chat in chats() {
        let body = chat.body.to_string();
        let first = body.find(&lexical[1]).expect("the nearer fact is shown");
        let second = body.find(&lexical[0]).expect("the other fact is shown");
        assert!(first < second, "reranked: {body}");
        assert!(!body.contains("hunter2"));
    }
    let embeddings = llm
        .requests()
        .into_iter()
        .filter(|q| q.path == "/v1/embeddings")
        .count();
    assert_eq!(
        embeddings, 1,
        "the second prompt's vectors come from the cache"
    );
}
