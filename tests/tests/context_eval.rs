//! Evaluation of context that lasts: a long session (300 messages, over 150k tokens by the
//! counter) with 20 planted facts at varying depths is compacted for a 32k window. For each
//! fact: is it (a) verbatim in the model's next request, (b) found by recall with its natural
//! query in the top 5? The summariser here is fake-llm giving a generic checkpoint — the worst
//! case, where the checkpoint keeps nothing — so the figures measure the kept tail and recall
//! alone. Goal: (a)+(b) covers all 20; (b) alone at least 18. Prints the table.

use agent_lsp::store::{Event, Scope, Store};
use agent_lsp_tests::process::{FakeLlm, TestEnv};
use serde_json::{Value, json};

const FACTS: [(&str, &str); 20] = [
    (
        "The staging database password rotates every 45 days",
        "how often does the staging database password rotate",
    ),
    (
        "error E4417 checksum mismatch in src/ingest/parquet_reader.rs",
        "checksum mismatch error in the parquet reader",
    ),
    (
        "We chose BLAKE3 over SHA-256 for content hashes",
        "which hash function did we choose for content hashes",
    ),
    (
        "The p99 latency of the search endpoint was 412 ms",
        "p99 latency of the search endpoint",
    ),
    (
        "The billing cron job runs at 03:17 UTC",
        "when does the billing cron job run",
    ),
    (
        "The feature flag enable_tiered_cache is off in production",
        "tiered cache feature flag in production",
    ),
    (
        "The max upload size was raised to 250 MB",
        "maximum upload size",
    ),
    (
        "The Redis connection pool size is 64",
        "redis connection pool size",
    ),
    (
        "Migration 0042_add_tenant_index failed on the replica",
        "which migration failed on the replica",
    ),
    (
        "The customer ACME-9 reported the duplicate invoice bug",
        "which customer reported duplicate invoices",
    ),
    (
        "We pinned tokio to 1.38 because of the io_uring regression",
        "why did we pin tokio",
    ),
    (
        "The flaky test is test_reconnect_backoff in tests/net.rs",
        "which test is flaky",
    ),
    (
        "Release build command: make release PROFILE=lto",
        "release build command",
    ),
    (
        "The API rate limit is 1200 requests per minute per key",
        "api rate limit per key",
    ),
    (
        "Decision: store timestamps as UTC milliseconds",
        "how do we store timestamps",
    ),
    (
        "The memory leak came from the unbounded LruCache in src/cache/thumbnails.rs",
        "where was the memory leak",
    ),
    (
        "The Kafka topic orders.v2 has 24 partitions",
        "how many partitions does the orders topic have",
    ),
    (
        "The deploy freeze starts on December 18",
        "when does the deploy freeze start",
    ),
    (
        "The config key retry.max_attempts defaults to 7",
        "retry max attempts default",
    ),
    (
        "The GPU node pool uses n1-highmem-16 machines",
        "what machines does the gpu node pool use",
    ),
];

const FILLER: &[&str] = &[
    "fn",
    "let",
    "match",
    "result",
    "handler",
    "request",
    "response",
    "error",
    "test",
    "build",
    "config",
    "cache",
    "database",
    "query",
    "index",
    "parse",
    "value",
    "option",
    "string",
    "vector",
    "buffer",
    "stream",
    "future",
    "await",
    "async",
    "spawn",
    "task",
    "channel",
    "sender",
    "receiver",
    "mutex",
    "lock",
    "guard",
    "timeout",
    "retry",
    "backoff",
    "metric",
    "counter",
    "gauge",
    "histogram",
    "span",
    "trace",
    "debug",
    "info",
    "warn",
    "module",
    "crate",
    "import",
    "export",
    "struct",
    "enum",
    "trait",
    "impl",
    "generic",
    "lifetime",
    "borrow",
    "clone",
    "serialize",
    "deserialize",
    "schema",
    "migration",
    "table",
    "column",
    "row",
    "insert",
    "update",
    "delete",
    "select",
    "join",
    "filter",
    "map",
    "fold",
    "reduce",
    "iterator",
    "collect",
    "sort",
    "dedup",
    "chunk",
    "window",
    "slice",
    "offset",
    "limit",
    "page",
    "cursor",
    "token",
    "session",
    "user",
    "account",
    "tenant",
    "invoice",
    "order",
    "payment",
    "refund",
    "upload",
    "download",
    "file",
    "path",
    "directory",
    "socket",
    "port",
    "host",
    "client",
    "server",
    "route",
    "middleware",
    "header",
    "body",
    "status",
    "code",
    "deploy",
    "release",
    "version",
    "branch",
    "commit",
    "merge",
    "review",
    "lint",
    "format",
];

/// About `words` words of plausible session text, deterministic from `seed`.
fn filler(seed: u64, words: usize) -> String {
    let mut x = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let mut out = String::new();
    for i in 0..words {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let w = FILLER[(x >> 33) as usize % FILLER.len()];
        out.push_str(w);
        out.push(if i % 12 == 11 { '\n' } else { ' ' });
        if i % 40 == 39 {
            out.push_str(&format!("line_{} = {};\n", x % 997, x % 10_007));
        }
    }
    out
}

#[test]
fn after_compaction_to_32k_every_planted_fact_is_in_the_request_or_recalled() {
    // A generic checkpoint for every summariser call, and an answer for the next request.
    let turns: Vec<Value> = (0..40)
        .map(|_| json!({"reply": {"text": "## Goal\nContinue the work.\n## Critical context\n(see the log)"}}))
        .collect();
    let llm = FakeLlm::start(&json!({ "turns": turns }), "openai");
    let env = TestEnv::new();
    env.write_user_config(&format!(
        "provider = \"openai\"\nmodel = \"m\"\nbase_url = \"{}/v1\"\napi_key_env = \"FAKE_KEY\"\n\
         context_window = 32768\nmax_output_tokens = 4096\n",
        llm.url
    ));

    // The long session, written straight into the store.
    let sid = "eval-session";
    let mut store = Store::open(&env.database()).unwrap();
    let s = Some(sid);
    store
        .append(
            s,
            &Event::SessionCreated {
                workspace: env.workspace().display().to_string(),
                title: "a long session".into(),
            },
        )
        .unwrap();
    let pairs = 150;
    // Fact k sits in pair `depth(k)`: spread from the oldest to the newest turns.
    let depth = |k: usize| 2 + k * 147 / 19;
    let mut planted: Vec<(usize, String)> = Vec::new(); // (fact, message id)
    let mut total_tokens = 0;
    for p in 0..pairs {
        let facts_here: Vec<usize> = (0..20).filter(|&k| depth(k) == p).collect();
        let user_id = format!("u{p:03}");
        let mut user_text = format!("Step {p}: continue with the next part of the work.");
        let mut answer = filler(p as u64, 760);
        for &k in &facts_here {
            // Even facts in the prompt, odd ones deep in the answer.
            if k % 2 == 0 {
                user_text.push_str(&format!(" Note: {}.", FACTS[k].0));
                planted.push((k, user_id.clone()));
            } else {
                answer.insert_str(answer.len() / 2, &format!("\n{}.\n", FACTS[k].0));
                planted.push((k, format!("a{p:03}")));
            }
        }
        total_tokens += agent_lsp::tokens::count(&user_text) + agent_lsp::tokens::count(&answer);
        store
            .append_all(&[
                (
                    s,
                    Event::InputAdmitted {
                        input_id: format!("i{p:03}"),
                        text: user_text,
                        context: Value::Null,
                    },
                ),
                (
                    s,
                    Event::InputPromoted {
                        input_id: format!("i{p:03}"),
                        message_id: user_id,
                        part_id: format!("up{p:03}"),
                    },
                ),
                (
                    s,
                    Event::MessageStarted {
                        message_id: format!("a{p:03}"),
                        role: "assistant".into(),
                        meta: json!({}),
                    },
                ),
                (
                    s,
                    Event::PartAdded {
                        part_id: format!("ap{p:03}"),
                        message_id: format!("a{p:03}"),
                        kind: agent_lsp::status::PartKind::Text,
                        data: json!({ "text": answer }),
                        status: Some(agent_lsp::status::PartStatus::Completed),
                    },
                ),
            ])
            .unwrap();
    }
    drop(store);
    assert_eq!(planted.len(), 20);
    assert!(total_tokens >= 150_000, "{total_tokens} tokens");

    let (code, out, err) = env.run(&["session", "compact", sid, "--json"]);
    assert_eq!(code, 0, "{err}");
    let compacted: Value = serde_json::from_str(&out).unwrap();
    let mut cmd = env.command(&["run", "--json", "--session", sid, "continue"]);
    cmd.env("FAKE_KEY", "k");
    let next = cmd.output().unwrap();
    assert!(
        next.status.success(),
        "{}",
        String::from_utf8_lossy(&next.stderr)
    );
    let requests = llm.requests();
    assert!(requests.iter().all(|r| r.error.is_none()));
    let request = requests.last().unwrap().body.to_string();
    let request_tokens = agent_lsp::tokens::count(&request);

    let store = Store::open(&env.database()).unwrap();
    let mut rows = Vec::new();
    let (mut verbatim, mut recalled, mut covered) = (0, 0, 0);
    for (k, message_id) in &planted {
        let (fact, query) = FACTS[*k];
        let in_request = request.contains(fact);
        let hits = store
            .search(query, Scope::Session, Some(sid), None, 5)
            .unwrap();
        let rank = hits.iter().position(|h| &h.message_id == message_id);
        verbatim += usize::from(in_request);
        recalled += usize::from(rank.is_some());
        covered += usize::from(in_request || rank.is_some());
        rows.push(format!(
            "| {} | {} | {fact} | {} | {} |",
            k + 1,
            depth(*k),
            if in_request { "yes" } else { "no" },
            rank.map_or("—".to_string(), |r| format!("#{}", r + 1)),
        ));
    }
    println!(
        "session: {} messages, {total_tokens} tokens; compacted: {} folded, {} kept; \
         the next request: {request_tokens} tokens ({} summariser calls)",
        pairs * 2,
        compacted["foldedMessages"],
        compacted["keptMessages"],
        requests.len() - 1
    );
    println!("| # | turn | fact | (a) in the next request | (b) recall rank |");
    println!("|---|---|---|---|---|");
    for r in &rows {
        println!("{r}");
    }
    println!("(a) {verbatim}/20, (b) {recalled}/20, (a) or (b) {covered}/20");
    assert!(request_tokens <= 32_768, "{request_tokens}");
    assert_eq!(covered, 20, "every fact verbatim or recalled");
    assert!(recalled >= 18, "recall found {recalled}/20");
}
