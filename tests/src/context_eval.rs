//! The context evaluation: a long session (150 turns, over 150k tokens) with 20 facts
//! planted from its first turn to its last, run through the real binary (`agent-lsp run`),
//! then 20 questions about them, each a turn of its own. Against fake-llm (the default) it
//! reports what the loop sends: whether every request fit the window, the tokens of each,
//! how much of each request repeats the previous one's prefix (what a prompt cache reuses),
//! and, per depth, whether each fact was reachable when its question was asked — verbatim in
//! the request, or in recall's top 5 for the question. Against a real OpenAI-compatible
//! endpoint (`--base-url`, `--model`) it also grades the model's answers.
//!
//! The fake's observer writes a generic observation for every segment — the worst case:
//! the distilled prefix then keeps nothing, and reachability is the raw tail and recall.

use std::fmt::Write as _;

use agent_lsp::store::{Scope, Store};
use serde_json::{Value, json};

use crate::cli_run;
use crate::fake_llm::Recorded;
use crate::process::{FakeLlm, ModelServer, TestEnv};

/// The planted facts: (fact, the question a person would ask, what a right answer names).
pub const FACTS: [(&str, &str, &str); 20] = [
    (
        "The staging database password rotates every 45 days",
        "how often does the staging database password rotate",
        "45 days",
    ),
    (
        "error E4417 checksum mismatch in src/ingest/parquet_reader.rs",
        "checksum mismatch error in the parquet reader",
        "E4417",
    ),
    (
        "We chose BLAKE3 over SHA-256 for content hashes",
        "which hash function did we choose for content hashes",
        "BLAKE3",
    ),
    (
        "The p99 latency of the search endpoint was 412 ms",
        "p99 latency of the search endpoint",
        "412 ms",
    ),
    (
        "The billing cron job runs at 03:17 UTC",
        "when does the billing cron job run",
        "03:17",
    ),
    (
        "The feature flag enable_tiered_cache is off in production",
        "tiered cache feature flag in production",
        "off",
    ),
    (
        "The max upload size was raised to 250 MB",
        "maximum upload size",
        "250 MB",
    ),
    (
        "The Redis connection pool size is 64",
        "redis connection pool size",
        "64",
    ),
    (
        "Migration 0042_add_tenant_index failed on the replica",
        "which migration failed on the replica",
        "0042",
    ),
    (
        "The customer ACME-9 reported the duplicate invoice bug",
        "which customer reported duplicate invoices",
        "ACME-9",
    ),
    (
        "We pinned tokio to 1.38 because of the io_uring regression",
        "why did we pin tokio",
        "1.38",
    ),
    (
        "The flaky test is test_reconnect_backoff in tests/net.rs",
        "which test is flaky",
        "test_reconnect_backoff",
    ),
    (
        "Release build command: make release PROFILE=lto",
        "release build command",
        "PROFILE=lto",
    ),
    (
        "The API rate limit is 1200 requests per minute per key",
        "api rate limit per key",
        "1200",
    ),
    (
        "Decision: store timestamps as UTC milliseconds",
        "how do we store timestamps",
        "milliseconds",
    ),
    (
        "The memory leak came from the unbounded LruCache in src/cache/thumbnails.rs",
        "where was the memory leak",
        "LruCache",
    ),
    (
        "The Kafka topic orders.v2 has 24 partitions",
        "how many partitions does the orders topic have",
        "24",
    ),
    (
        "The deploy freeze starts on December 18",
        "when does the deploy freeze start",
        "December 18",
    ),
    (
        "The config key retry.max_attempts defaults to 7",
        "retry max attempts default",
        "7",
    ),
    (
        "The GPU node pool uses n1-highmem-16 machines",
        "what machines does the gpu node pool use",
        "n1-highmem-16",
    ),
];

pub const FILLER: &[&str] = &[
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
pub fn filler(seed: u64, words: usize) -> String {
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

/// Where the model is.
#[derive(Debug, Clone)]
pub enum Endpoint {
    /// fake-llm, replaying a generated script (answers of filler text; generic observations).
    Fake,
    /// A real server.
    Server(ModelServer),
}

#[derive(Debug, Clone)]
pub struct Options {
    pub endpoint: Endpoint,
    /// The context window the agent is told of (and, with the fake, the server enforces).
    pub window: u32,
    /// Prompt/answer pairs before the questions.
    pub turns: usize,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            endpoint: Endpoint::Fake,
            window: 32_768,
            turns: 150,
        }
    }
}

/// How one fact fared.
#[derive(Debug, Clone)]
pub struct FactResult {
    pub fact: usize,
    pub turn: usize,
    /// Verbatim in the request that asked about it.
    pub in_context: bool,
    /// Its message's rank in recall's top 5 for the question.
    pub recall_rank: Option<usize>,
    /// With a real model: whether its answer named the fact.
    pub answered: Option<bool>,
}

impl FactResult {
    pub fn reachable(&self) -> bool {
        self.in_context || self.recall_rank.is_some()
    }
}

#[derive(Debug, Clone)]
pub struct Report {
    pub session_tokens: usize,
    /// Requests of the conversation (not the distillation calls).
    pub requests: usize,
    /// Distillation calls (observer, reflector).
    pub side_requests: usize,
    /// Requests the server refused as over its window (fake only; must be 0).
    pub over_window: usize,
    /// Tokens per request (o200k count of the body; with a real model, its own count).
    pub tokens_min: usize,
    pub tokens_mean: usize,
    pub tokens_max: usize,
    /// Share of each request that repeats the previous one's prefix (mean), and how many
    /// requests extend the previous one byte for byte (fake only).
    pub prefix_reuse_mean: f64,
    pub extending: usize,
    /// How often the context's cut moved (a new distilled prefix).
    pub cuts: usize,
    pub distillations: (usize, usize),
    pub facts: Vec<FactResult>,
}

/// Early, mid, late: facts 1–7, 8–14, 15–20.
pub const DEPTHS: [(&str, std::ops::Range<usize>); 3] =
    [("early", 0..7), ("mid", 7..14), ("late", 14..20)];

impl Report {
    /// The report as markdown tables.
    pub fn table(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "session: {} tokens; {} requests, {} distillation calls; over the window: {}",
            self.session_tokens, self.requests, self.side_requests, self.over_window
        );
        let _ = writeln!(
            out,
            "tokens per request: min {}, mean {}, max {}; prefix reuse: mean {:.1} %, {} of {} \
             requests extend the previous one byte for byte ({} cut moves); distillations: {} \
             observations, {} working contexts\n",
            self.tokens_min,
            self.tokens_mean,
            self.tokens_max,
            self.prefix_reuse_mean * 100.0,
            self.extending,
            self.requests.saturating_sub(1),
            self.cuts,
            self.distillations.0,
            self.distillations.1
        );
        let answered = self.facts.iter().any(|f| f.answered.is_some());
        out.push_str("| depth | in the request | recall top 5 | reachable |");
        out.push_str(if answered {
            " answered |\n|---|---|---|---|---|\n"
        } else {
            "\n|---|---|---|---|\n"
        });
        for (name, range) in DEPTHS {
            let facts = &self.facts[range];
            let n = facts.len();
            let count = |f: &dyn Fn(&FactResult) -> bool| facts.iter().filter(|r| f(r)).count();
            let _ = write!(
                out,
                "| {name} | {}/{n} | {}/{n} | {}/{n} |",
                count(&|r| r.in_context),
                count(&|r| r.recall_rank.is_some()),
                count(&|r| r.reachable())
            );
            if answered {
                let _ = write!(out, " {}/{n} |", count(&|r| r.answered == Some(true)));
            }
            out.push('\n');
        }
        out
    }
}

/// The turn fact `k` is planted in: spread from the first turns to the last.
fn depth(k: usize, turns: usize) -> usize {
    1 + k * (turns - 3) / 19
}

/// Whether `answer` names `key` as a word of its own (case aside).
fn names(answer: &str, key: &str) -> bool {
    let (answer, key) = (answer.to_lowercase(), key.to_lowercase());
    answer.match_indices(&key).any(|(i, _)| {
        let before = answer[..i].chars().next_back();
        let after = answer[i + key.len()..].chars().next();
        !before.is_some_and(char::is_alphanumeric) && !after.is_some_and(char::is_alphanumeric)
    })
}

/// The session's prompts and the fake's answers (facts with an even number go in the
/// prompt, odd ones in the answer; a real model writes its own answers, so every fact goes
/// in the prompt).
fn session(opts: &Options) -> Vec<(String, String)> {
    let fake = matches!(opts.endpoint, Endpoint::Fake);
    (0..opts.turns)
        .map(|t| {
            let mut prompt = format!(
                "Step {t}: here are my notes on the next part of the work; reply with one short \
                 sentence.\n{}",
                filler(t as u64, if fake { 380 } else { 760 })
            );
            let mut answer = filler(1_000 + t as u64, 380);
            for k in (0..20).filter(|&k| depth(k, opts.turns) == t) {
                if k % 2 == 0 || !fake {
                    prompt.push_str(&format!("\nNote: {}.", FACTS[k].0));
                } else {
                    answer.insert_str(answer.len() / 2, &format!("\n{}.\n", FACTS[k].0));
                }
            }
            (prompt, answer)
        })
        .collect()
}

fn fake_script(pairs: &[(String, String)], window: u32) -> Value {
    let mut turns: Vec<Value> = pairs
        .iter()
        .map(|(_, a)| json!({"reply": {"text": a}}))
        .collect();
    turns.extend((0..20).map(|_| json!({"reply": {"text": "I looked it up."}})));
    json!({
        "max_context_tokens": window,
        "turns": turns,
        "side": [
            {"expect": {"system_contains": "observer of a coding session"},
             "reply": {"text": "- [00:00] [medium] worked on the next part of the task"}},
            {"expect": {"system_contains": "consolidate the observation logs"},
             "reply": {"text": "## Current state\nWorking through the task step by step.\n## Key decisions\n## Technical changes\n## Timeline"}}
        ]
    })
}

/// Runs one turn; returns the session id and the answer's text.
fn turn(
    env: &TestEnv,
    server: &ModelServer,
    session: Option<&str>,
    text: &str,
) -> (String, String) {
    let mut args = vec!["--yes"];
    if let Some(s) = session {
        args.extend(["--session", s]);
    }
    args.push(text);
    let mut cmd = cli_run::command(env, &args);
    cmd.envs(server.key());
    let run = cli_run::finish(cmd.spawn().expect("spawn agent-lsp run"));
    assert_eq!(run.code, 0, "the turn failed: {}", run.stderr);
    (run.session(), run.text())
}

/// The share of `after`'s messages (as JSON text) that repeats `before`'s from the start.
fn prefix_reuse(before: &Value, after: &Value) -> f64 {
    let (b, a) = (
        before["messages"].to_string(),
        after["messages"].to_string(),
    );
    let common = b.bytes().zip(a.bytes()).take_while(|(x, y)| x == y).count();
    common as f64 / a.len().max(1) as f64
}

/// Whether `after`'s messages begin with all of `before`'s.
fn extends(before: &Value, after: &Value) -> bool {
    let (b, a) = (before["messages"].as_array(), after["messages"].as_array());
    matches!((b, a), (Some(b), Some(a)) if a.len() >= b.len() && a[..b.len()] == b[..])
}

/// The message that holds each fact.
fn planted(env: &TestEnv, sid: &str) -> Vec<String> {
    let (_, out, _) = env.run(&["session", "show", sid, "--json"]);
    let view: Value = serde_json::from_str(&out).expect("session show --json");
    FACTS
        .iter()
        .map(|(fact, _, _)| {
            view["messages"]
                .as_array()
                .into_iter()
                .flatten()
                .find(|m| m["parts"].to_string().contains(fact))
                .and_then(|m| m["messageId"].as_str())
                .unwrap_or_default()
                .to_string()
        })
        .collect()
}

pub fn run(opts: &Options) -> Report {
    let env = TestEnv::new();
    let pairs = session(opts);
    let fake = matches!(opts.endpoint, Endpoint::Fake)
        .then(|| FakeLlm::start(&fake_script(&pairs, opts.window), "openai"));
    let server = match (&opts.endpoint, &fake) {
        (Endpoint::Server(server), _) => server.clone(),
        (_, Some(llm)) => ModelServer::fake(llm, "openai"),
        _ => unreachable!("the fake runs when no endpoint is given"),
    };
    env.write_user_config(&format!(
        "{}context_window = {}\nmax_output_tokens = 2048\nsnapshot = false\n",
        server.config(),
        opts.window
    ));
    let mut session_tokens = 0;
    let mut sid: Option<String> = None;
    for (prompt, answer) in &pairs {
        let (id, said) = turn(&env, &server, sid.as_deref(), prompt);
        session_tokens += agent_lsp::tokens::count(prompt)
            + agent_lsp::tokens::count(if fake.is_some() { answer } else { &said });
        sid = Some(id);
    }
    let sid = sid.expect("at least one turn");
    let planted = planted(&env, &sid);
    let before_questions = fake.as_ref().map_or(0, |llm| llm.requests().len());
    let mut answers = Vec::new();
    for (_, question, _) in FACTS {
        let (_, said) = turn(
            &env,
            &server,
            Some(&sid),
            &format!("Question: {question}? Answer in a few words."),
        );
        answers.push(said);
    }
    let store = Store::open(&env.database()).expect("the store");
    let distillations = store.distillations(&sid).unwrap_or_default();
    let records: Vec<Recorded> = fake.as_ref().map(|l| l.requests()).unwrap_or_default();
    let main: Vec<&Recorded> = records
        .iter()
        .filter(|r| r.side.is_none() && r.error.is_none())
        .collect();
    let question_requests: Vec<&Recorded> = records[before_questions..]
        .iter()
        .filter(|r| r.side.is_none() && r.error.is_none())
        .collect();
    let facts = (0..20)
        .map(|k| {
            let (fact, question, key) = FACTS[k];
            let hits = store
                .search(question, Scope::Session, Some(&sid), None, 5)
                .unwrap_or_default();
            FactResult {
                fact: k,
                turn: depth(k, opts.turns),
                in_context: question_requests
                    .get(k)
                    .is_some_and(|r| r.body.to_string().contains(fact)),
                recall_rank: hits
                    .iter()
                    .position(|h| h.message_id == planted[k])
                    .map(|r| r + 1),
                answered: fake.is_none().then(|| names(&answers[k], key)),
            }
        })
        .collect();
    let tokens: Vec<usize> = if fake.is_some() {
        main.iter()
            .map(|r| agent_lsp::tokens::count(&r.body.to_string()))
            .collect()
    } else {
        usage_input_tokens(&env, &sid)
    };
    let reuse: Vec<f64> = main
        .windows(2)
        .map(|w| prefix_reuse(&w[0].body, &w[1].body))
        .collect();
    Report {
        session_tokens,
        requests: if fake.is_some() {
            main.len()
        } else {
            tokens.len()
        },
        side_requests: records.iter().filter(|r| r.side.is_some()).count(),
        over_window: records
            .iter()
            .filter(|r| r.error.as_deref().is_some_and(|e| e.contains("overflow")))
            .count(),
        tokens_min: tokens.iter().copied().min().unwrap_or(0),
        tokens_mean: tokens.iter().sum::<usize>() / tokens.len().max(1),
        tokens_max: tokens.iter().copied().max().unwrap_or(0),
        prefix_reuse_mean: reuse.iter().sum::<f64>() / reuse.len().max(1) as f64,
        extending: main
            .windows(2)
            .filter(|w| extends(&w[0].body, &w[1].body))
            .count(),
        cuts: store
            .events(Some(&sid))
            .unwrap_or_default()
            .iter()
            .filter(|e| e.event.type_name() == "context_epoch_started")
            .count()
            .saturating_sub(1),
        distillations: (
            distillations.iter().filter(|d| d.generation == 0).count(),
            distillations.iter().filter(|d| d.generation >= 1).count(),
        ),
        facts,
    }
}

/// The input tokens the provider reported for each request of the session.
fn usage_input_tokens(env: &TestEnv, sid: &str) -> Vec<usize> {
    let (_, out, _) = env.run(&["session", "show", sid, "--json"]);
    let view: Value = serde_json::from_str(&out).unwrap_or(Value::Null);
    view["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|m| m["parts"].as_array().cloned().unwrap_or_default())
        .filter(|p| p["kind"] == "usage")
        .filter_map(|p| p["data"]["inputTokens"].as_u64().map(|n| n as usize))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_graded_by_whole_words() {
        assert!(names("It rotates every 45 days.", "45 days"));
        assert!(names("Default: 7", "7"));
        assert!(!names("It is 17 now", "7"));
        assert!(names("We chose blake3.", "BLAKE3"));
    }
}
