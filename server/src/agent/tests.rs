//! The loop in process: the scripted provider for the model, a recording editor port, a
//! store and a workspace in a temp folder. `check(script, expected)` runs one prompt and
//! compares what the editor saw, one line per update (streamed text merged).

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Once};

use futures::future::BoxFuture;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::{Agent, AgentError, TurnEnd, TurnOutcome};
use crate::config::{Action, Config, PermissionRule, ProviderKind};
use crate::editor::{BufferEdit, EditorPort, PermissionReply, PermissionRequest, Question, Update};
use crate::provider::script::Script;
use crate::provider::scripted::Scripted;
use crate::status::{PartKind, PartStatus};
use crate::store::Store;

/// The editor: records every update and permission ask, answers asks from a queue (allow
/// once when it is empty).
#[derive(Default)]
struct Recorder {
    updates: Mutex<Vec<Update>>,
    asks: Mutex<Vec<PermissionRequest>>,
    replies: Mutex<VecDeque<PermissionReply>>,
    /// Cancelled at the first streamed text, when set.
    cancel_on_text: Mutex<Option<CancellationToken>>,
}

impl EditorPort for Recorder {
    fn publish(&self, update: Update) {
        if matches!(update, Update::Text { .. })
            && let Some(token) = self.cancel_on_text.lock().unwrap().as_ref()
        {
            token.cancel();
        }
        self.updates.lock().unwrap().push(update);
    }

    fn buffer_text(&self, _: &Path) -> Option<String> {
        None
    }

    fn apply_to_buffer<'a>(&'a self, _: &'a Path, _: &'a str) -> BoxFuture<'a, BufferEdit> {
        Box::pin(async { BufferEdit::NotOpen })
    }

    fn ask_permission<'a>(&'a self, r: &'a PermissionRequest) -> BoxFuture<'a, PermissionReply> {
        self.asks.lock().unwrap().push(r.clone());
        let reply = self.replies.lock().unwrap().pop_front();
        Box::pin(async move { reply.unwrap_or(PermissionReply::Once) })
    }

    fn ask_questions<'a>(
        &'a self,
        _: &'a [Question],
    ) -> BoxFuture<'a, Result<Vec<Vec<String>>, crate::editor::Unanswered>> {
        Box::pin(async { Err("no questions in these tests".into()) })
    }
}

struct Harness {
    dir: tempfile::TempDir,
    agent: Agent,
    editor: Arc<Recorder>,
}

/// The data and config folders of every test here: never the user's. (Set once, before
/// any harness reads them.)
fn isolate() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let dir = std::env::temp_dir().join(format!("agent-lsp-unit-{}", std::process::id()));
        // SAFETY: set once, at the first harness, before the agent code reads them.
        unsafe {
            std::env::set_var("AGENT_LSP_DATA_DIR", dir.join("data"));
            std::env::set_var("XDG_CONFIG_HOME", dir.join("config"));
        }
    });
}

fn harness_with(script: Value, tune: impl FnOnce(&mut Config)) -> Harness {
    isolate();
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let mut config = Config {
        provider: Some(ProviderKind::Scripted),
        snapshot: false,
        ..Config::default()
    };
    tune(&mut config);
    let script: Script = serde_json::from_value(script).unwrap();
    let store = Store::open(&dir.path().join("db.sqlite")).unwrap();
    let editor = Arc::new(Recorder::default());
    let agent = Agent::new(
        Arc::new(Mutex::new(store)),
        config,
        &ws,
        Some(Arc::new(Scripted::new(script))),
        editor.clone(),
    );
    Harness { dir, agent, editor }
}

fn harness(script: Value) -> Harness {
    harness_with(script, |_| {})
}

impl Harness {
    fn ws(&self) -> PathBuf {
        self.dir.path().join("ws")
    }

    async fn run(&self, prompt: &str) -> (String, TurnOutcome) {
        let (sid, _) = self.agent.prompt(None, prompt, None).await.unwrap();
        let outcome = self.agent.drive(&sid, &CancellationToken::new()).await;
        (sid, outcome)
    }

    /// What the editor saw, one line per update; consecutive text pieces merged.
    fn trace(&self) -> Vec<String> {
        let mut out: Vec<String> = Vec::new();
        let mut text_open = false;
        for u in self.editor.updates.lock().unwrap().iter() {
            let line = match u {
                Update::Text { text, .. } => {
                    if text_open && let Some(last) = out.last_mut() {
                        last.push_str(text);
                        continue;
                    }
                    text_open = true;
                    out.push(format!("text {text}"));
                    continue;
                }
                Update::UserMessage { text, .. } => format!("user {text}"),
                Update::Reasoning { text, .. } => format!("reasoning {text}"),
                Update::ToolCall { name, status, .. } => format!("call {name} {status}"),
                Update::ToolResult { name, status, .. } => format!("result {name} {status}"),
                Update::Status {
                    status,
                    stop_reason,
                    ..
                } => match stop_reason {
                    Some(end) => format!("{status} {end}"),
                    None => status.to_string(),
                },
                Update::Retry { attempt, .. } => format!("retry {attempt}"),
                Update::Error { message, .. } => format!("error {message}"),
                Update::Plan { todos, .. } => format!("plan {}", todos.len()),
                Update::Revert { files, .. } => format!("revert {}", files.join(",")),
                Update::Usage { .. } => "usage".into(),
                Update::Session { .. } => "session".into(),
                Update::State { focus, .. } => {
                    format!("state {}", focus.as_deref().unwrap_or("-"))
                }
            };
            text_open = false;
            out.push(line);
        }
        out
    }

    fn outputs(&self) -> Vec<String> {
        self.editor
            .updates
            .lock()
            .unwrap()
            .iter()
            .filter_map(|u| match u {
                Update::ToolResult { output, .. } => Some(output.clone()),
                _ => None,
            })
            .collect()
    }

    fn parts(&self, sid: &str) -> Vec<(PartKind, Option<PartStatus>, Value)> {
        let store = self.agent.store.lock().unwrap();
        let view = store.session(sid).unwrap().unwrap();
        view.messages
            .into_iter()
            .flat_map(|m| m.parts)
            .map(|p| (p.kind, p.status, p.data))
            .collect()
    }
}

fn reply(text: &str) -> Value {
    json!({"reply": {"text": text}})
}

fn call(name: &str, arguments: Value) -> Value {
    json!({"reply": {"tool_calls": [{"name": name, "arguments": arguments}]}})
}

/// Runs `prompt` against `script` and compares the editor's trace with `expected`.
async fn check(script: Value, expected: &[&str]) -> Harness {
    let h = harness(script);
    h.run("hi").await;
    assert_eq!(h.trace(), expected, "outputs: {:?}", h.outputs());
    h
}

#[tokio::test]
async fn a_plain_answer_ends_the_turn() {
    check(
        json!({"turns": [reply("hello there")]}),
        &["user hi", "busy", "text hello there", "idle end_turn"],
    )
    .await;
}

#[tokio::test]
async fn a_tool_call_goes_pending_running_completed_and_its_result_reaches_the_model() {
    let h = harness(json!({"turns": [
        call("glob", json!({"pattern": "*.txt"})),
        {"expect": {"request_contains": "a.txt"}, "reply": {"text": "found it"}}
    ]}));
    std::fs::write(h.ws().join("a.txt"), "x").unwrap();
    let (_, outcome) = h.run("find").await;
    assert_eq!(outcome.end, TurnEnd::EndTurn, "{:?}", h.trace());
    assert_eq!(
        h.trace(),
        [
            "user find",
            "busy",
            "call glob pending",
            "call glob running",
            "result glob completed",
            "text found it",
            "idle end_turn"
        ]
    );
}

#[tokio::test]
async fn the_step_limit_ends_the_turn_with_max_steps() {
    let turns: Vec<Value> = (0..3)
        .map(|i| call("glob", json!({"pattern": format!("{i}*")})))
        .collect();
    let h = harness_with(json!({ "turns": turns }), |c| c.max_steps = 2);
    let (_, outcome) = h.run("loop").await;
    assert_eq!(outcome.end, TurnEnd::MaxSteps);
    assert_eq!(h.trace().last().unwrap(), "idle max_steps");
}

#[tokio::test]
async fn the_last_step_asks_the_model_to_wrap_up() {
    let h = harness_with(
        json!({"turns": [
            call("glob", json!({"pattern": "*"})),
            {"expect": {"request_contains": "step limit"}, "reply": {"text": "summary"}}
        ]}),
        |c| c.max_steps = 2,
    );
    let (_, outcome) = h.run("go").await;
    assert_eq!(outcome.end, TurnEnd::MaxSteps, "{:?}", h.trace());
}

#[tokio::test]
async fn a_cancel_before_the_turn_runs_nothing() {
    let h = harness(json!({"turns": [reply("never")]}));
    let (sid, _) = h.agent.prompt(None, "hi", None).await.unwrap();
    let cancel = CancellationToken::new();
    cancel.cancel();
    let outcome = h.agent.drive(&sid, &cancel).await;
    assert_eq!(outcome.end, TurnEnd::Cancelled);
    assert!(h.trace().is_empty());
}

#[tokio::test]
async fn a_cancel_mid_stream_keeps_the_text_as_interrupted() {
    let h = harness(json!({"chunk_delay_ms": 5, "turns": [reply("a long answer that streams")]}));
    let (sid, _) = h.agent.prompt(None, "hi", None).await.unwrap();
    let cancel = CancellationToken::new();
    *h.editor.cancel_on_text.lock().unwrap() = Some(cancel.clone());
    let outcome = h.agent.drive(&sid, &cancel).await;
    assert_eq!(outcome.end, TurnEnd::Cancelled);
    let answer = h
        .parts(&sid)
        .into_iter()
        .rfind(|(k, ..)| *k == PartKind::Text);
    assert_eq!(answer.unwrap().1, Some(PartStatus::Interrupted));
}

#[tokio::test]
async fn three_identical_calls_ask_before_the_third_runs() {
    let same = call("glob", json!({"pattern": "*.rs"}));
    let h = harness(json!({"turns": [same, same, same, reply("ok")]}));
    h.editor
        .replies
        .lock()
        .unwrap()
        .push_back(PermissionReply::Reject {
            message: Some("try grep".into()),
        });
    let (_, outcome) = h.run("look").await;
    assert_eq!(outcome.end, TurnEnd::EndTurn);
    let asks = h.editor.asks.lock().unwrap();
    assert_eq!(asks.len(), 1);
    assert_eq!(asks[0].permission, "doom_loop");
    let last = h.outputs().pop().unwrap();
    assert!(
        last.contains("repeated three times") && last.contains("try grep"),
        "{last}"
    );
}

#[tokio::test]
async fn a_rate_limit_is_retried_and_the_turn_completes() {
    check(
        json!({"turns": [
            {"fault": {"status": 429, "retry_after_ms": 1}},
            reply("second time lucky")
        ]}),
        &[
            "user hi",
            "busy",
            "retry 1",
            "text second time lucky",
            "idle end_turn",
        ],
    )
    .await;
}

#[tokio::test]
async fn retries_give_up_with_a_clear_error() {
    let faults: Vec<Value> = (0..10)
        .map(|_| json!({"fault": {"status": 503, "retry_after_ms": 1}}))
        .collect();
    let h = harness(json!({ "turns": faults }));
    let (_, outcome) = h.run("hi").await;
    assert_eq!(outcome.end, TurnEnd::Error);
    let error = outcome.error.unwrap();
    assert!(error.contains("gave up after"), "{error}");
    let retries = h.trace().iter().filter(|l| l.starts_with("retry")).count();
    assert_eq!(retries as u32, crate::provider::retry::MAX_RETRIES);
}

#[tokio::test]
async fn a_stream_broken_after_output_keeps_the_partial_answer() {
    let h = harness(json!({"turns": [
        {"reply": {"text": "partial answer here"}, "fault": {"disconnect_after_chunks": 2}}
    ]}));
    let (sid, outcome) = h.run("hi").await;
    assert_eq!(outcome.end, TurnEnd::Error);
    assert!(outcome.error.unwrap().contains("partial answer was kept"));
    let parts = h.parts(&sid);
    let interrupted = Some(PartStatus::Interrupted);
    assert!(
        parts
            .iter()
            .any(|(k, s, _)| *k == PartKind::Text && *s == interrupted),
        "{parts:?}"
    );
    assert!(parts.iter().any(|(k, ..)| *k == PartKind::Error));
}

#[tokio::test]
async fn a_stream_broken_before_output_is_retried() {
    check(
        json!({"turns": [
            {"reply": {"text": "x"}, "fault": {"disconnect_after_chunks": 0}},
            reply("fine")
        ]}),
        &["user hi", "busy", "retry 1", "text fine", "idle end_turn"],
    )
    .await;
}

#[tokio::test]
async fn an_overflow_with_nothing_to_fold_or_stub_ends_with_advice() {
    let h = harness(
        json!({"turns": [{"fault": {"context_overflow": true}}, {"fault": {"context_overflow": true}}, {"fault": {"context_overflow": true}}]}),
    );
    let (_, outcome) = h.run("hi").await;
    assert_eq!(outcome.end, TurnEnd::Error);
    let error = outcome.error.unwrap();
    assert!(error.contains("context_window"), "{error}");
}

#[tokio::test]
async fn an_unknown_tool_is_an_error_the_model_reads() {
    let h = harness(json!({"turns": [call("teleport", json!({})), reply("sorry")]}));
    let (_, outcome) = h.run("go").await;
    assert_eq!(outcome.end, TurnEnd::EndTurn);
    assert!(
        h.trace().contains(&"result teleport error".to_string()),
        "{:?}",
        h.trace()
    );
}

#[tokio::test]
async fn arguments_that_are_not_json_are_an_error_the_model_reads() {
    let h = harness(json!({"turns": [call("glob", json!("{not json")), reply("oops")]}));
    let (_, outcome) = h.run("go").await;
    assert_eq!(outcome.end, TurnEnd::EndTurn);
    assert!(h.trace().contains(&"result glob error".to_string()));
}

#[tokio::test]
async fn past_the_call_limit_one_call_says_why_and_the_rest_are_dropped() {
    let calls: Vec<Value> = (0..70)
        .map(|i| json!({"name": "glob", "arguments": {"pattern": format!("{i}")}}))
        .collect();
    let h = harness(json!({"turns": [{"reply": {"tool_calls": calls}}, reply("done")]}));
    h.run("many").await;
    let outputs = h.outputs();
    assert_eq!(outputs.len(), super::turn::MAX_CALLS + 1);
    assert!(
        outputs[0].contains("asked for 70 tool calls"),
        "{}",
        outputs[0]
    );
}

/// A session where edits ask, and the editor answers the first ask with `reply`; the
/// model writes `a.txt`, then `then`.
async fn rejected_write(reply: PermissionReply, then: Value) -> (Harness, TurnOutcome) {
    let write = call("write", json!({"filePath": "a.txt", "content": "x"}));
    let h = harness_with(json!({ "turns": [write, then] }), |c| {
        let ask = PermissionRule::Action(Action::Ask);
        c.permission.insert("edit".into(), ask);
    });
    h.editor.replies.lock().unwrap().push_back(reply);
    let (_, outcome) = h.run("write").await;
    (h, outcome)
}

#[tokio::test]
async fn a_rejection_without_a_message_stops_the_turn() {
    let reject = PermissionReply::Reject { message: None };
    let (h, outcome) = rejected_write(reject, reply("never")).await;
    assert_eq!(outcome.end, TurnEnd::Cancelled);
    assert!(outcome.error.unwrap().contains("rejected"));
    assert!(!h.ws().join("a.txt").exists());
}

#[tokio::test]
async fn a_rejection_with_a_message_goes_back_to_the_model() {
    let reject = PermissionReply::Reject {
        message: Some("use b.txt".into()),
    };
    let then = json!({"expect": {"request_contains": "use b.txt"}, "reply": {"text": "ok"}});
    let (h, outcome) = rejected_write(reject, then).await;
    assert_eq!(outcome.end, TurnEnd::EndTurn, "{:?}", h.trace());
    assert!(!h.ws().join("a.txt").exists());
}

#[tokio::test]
async fn a_call_whose_pending_record_fails_never_runs() {
    let h = harness(json!({"turns": [
        call("write", json!({"filePath": "a.txt", "content": "x"})),
        reply("never")
    ]}));
    // The database refuses tool parts (a full disk, say) from now on.
    let db = rusqlite::Connection::open(h.dir.path().join("db.sqlite")).unwrap();
    db.execute_batch(
        "CREATE TRIGGER no_tools BEFORE INSERT ON part WHEN NEW.kind = 'tool'
         BEGIN SELECT RAISE(ABORT, 'disk full'); END;",
    )
    .unwrap();
    let (_, outcome) = h.run("write").await;
    assert_eq!(outcome.end, TurnEnd::Error);
    assert!(outcome.error.unwrap().contains("disk full"));
    assert!(!h.ws().join("a.txt").exists(), "the tool ran unrecorded");
    assert!(!h.trace().iter().any(|l| l.starts_with("call ")));
}

#[tokio::test]
async fn recovery_marks_calls_a_dead_process_left_as_failed() {
    let h = harness(json!({"turns": []}));
    let (sid, _) = h.agent.prompt(None, "hi", None).await.unwrap();
    let store = h.agent.store.clone();
    let events = vec![
        (
            Some(sid.as_str()),
            crate::store::Event::MessageStarted {
                message_id: "m1".into(),
                role: "assistant".into(),
                meta: Value::Null,
            },
        ),
        (
            Some(sid.as_str()),
            crate::store::Event::PartAdded {
                part_id: "p1".into(),
                message_id: "m1".into(),
                kind: PartKind::Tool,
                data: json!({"name": "bash"}),
                status: Some(PartStatus::Running),
            },
        ),
    ];
    store.lock().unwrap().append_all(&events).unwrap();
    assert_eq!(h.agent.recover().unwrap(), 1);
    let (_, status, data) = h
        .parts(&sid)
        .into_iter()
        .find(|(k, ..)| *k == PartKind::Tool)
        .unwrap();
    assert_eq!(status, Some(PartStatus::Error));
    assert!(data["output"].as_str().unwrap().contains("interrupted"));
    assert_eq!(h.agent.recover().unwrap(), 0, "recovery is idempotent");
}

#[tokio::test]
async fn inputs_admitted_while_idle_run_in_order() {
    let h = harness(json!({"turns": [reply("first"), reply("second")]}));
    let (sid, _) = h.agent.prompt(None, "one", None).await.unwrap();
    h.agent.prompt(Some(&sid), "two", None).await.unwrap();
    assert!(h.agent.has_input(&sid));
    let outcome = h.agent.drive(&sid, &CancellationToken::new()).await;
    assert_eq!(outcome.end, TurnEnd::EndTurn);
    let trace = h.trace();
    let users: Vec<_> = trace.iter().filter(|l| l.starts_with("user")).collect();
    assert_eq!(users, ["user one", "user two"]);
    assert!(!h.agent.has_input(&sid));
}

#[tokio::test]
async fn a_prompt_to_an_unknown_session_is_not_found() {
    let h = harness(json!({"turns": []}));
    let e = h.agent.prompt(Some("nope"), "hi", None).await.unwrap_err();
    assert!(matches!(e, AgentError::NotFound(_)), "{e:?}");
}

#[tokio::test]
async fn revert_is_refused_when_snapshots_are_off() {
    let h = harness(json!({"turns": [reply("x")]}));
    let (sid, _) = h.run("hi").await;
    let e = h.agent.undo(&sid).await.unwrap_err();
    assert!(matches!(e, AgentError::Refused(_)), "{e:?}");
}

fn snapshotting(script: Value) -> Harness {
    harness_with(script, |c| c.snapshot = true)
}

#[tokio::test]
async fn undo_stages_the_revert_redo_restores_and_the_next_prompt_commits() {
    let h = snapshotting(json!({"turns": [
        call("write", json!({"filePath": "new.txt", "content": "made"})),
        reply("wrote it"),
        reply("again")
    ]}));
    let (sid, _) = h.run("make a file").await;
    let file = h.ws().join("new.txt");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "made");
    let patch = h
        .parts(&sid)
        .into_iter()
        .find(|(k, ..)| *k == PartKind::Patch);
    assert!(patch.is_some(), "the step recorded its change");

    let info = h.agent.undo(&sid).await.unwrap();
    assert_eq!(info.text.as_deref(), Some("make a file"));
    assert_eq!(info.files, ["new.txt"]);
    assert!(!file.exists());
    assert_eq!(h.agent.unrevert(&sid).await.unwrap(), ["new.txt"]);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "made");

    h.agent.undo(&sid).await.unwrap();
    h.agent
        .prompt(Some(&sid), "something else", None)
        .await
        .unwrap();
    let store = h.agent.store.lock().unwrap();
    let view = store.session(&sid).unwrap().unwrap();
    assert!(
        view.messages.is_empty(),
        "the reverted turn was deleted on the next prompt"
    );
    assert!(view.summary.revert.is_none());
}

#[tokio::test]
async fn redo_without_a_staged_revert_is_refused() {
    let h = snapshotting(json!({"turns": [reply("x")]}));
    let (sid, _) = h.run("hi").await;
    let e = h.agent.unrevert(&sid).await.unwrap_err();
    assert!(matches!(e, AgentError::Refused(_)), "{e:?}");
}

#[tokio::test]
async fn a_command_makes_the_step_scan_the_whole_tree() {
    let h = snapshotting(json!({"turns": [
        call("bash", json!({"command": "echo hi > made-by-bash.txt", "description": "make"})),
        reply("done")
    ]}));
    let (sid, outcome) = h.run("run it").await;
    assert_eq!(
        outcome.end,
        TurnEnd::EndTurn,
        "{:?} {:?}",
        h.trace(),
        h.outputs()
    );
    let (_, _, data) = h
        .parts(&sid)
        .into_iter()
        .find(|(k, ..)| *k == PartKind::Patch)
        .expect("a patch part for the file the command wrote");
    assert_eq!(data["files"], json!(["made-by-bash.txt"]));
}

#[tokio::test]
async fn the_todo_list_reaches_the_editor_and_the_session() {
    let todos = json!({"todos": [{"content": "a", "status": "pending", "priority": "high"}]});
    let h = harness(json!({"turns": [call("todowrite", todos), reply("planned")]}));
    let (sid, _) = h.run("plan").await;
    assert!(
        h.trace().contains(&"plan 1".to_string()),
        "{:?} {:?}",
        h.trace(),
        h.outputs()
    );
    let view = h
        .agent
        .store
        .lock()
        .unwrap()
        .session(&sid)
        .unwrap()
        .unwrap();
    assert_eq!(view.todos.len(), 1);
}

#[tokio::test]
async fn usage_is_recorded_with_our_estimate() {
    let h = harness(json!({"turns": [
        {"reply": {"text": "hi", "usage": {"input_tokens": 120, "output_tokens": 3}}}
    ]}));
    let (sid, _) = h.run("hello").await;
    let (_, _, data) = h
        .parts(&sid)
        .into_iter()
        .find(|(k, ..)| *k == PartKind::Usage)
        .unwrap();
    assert_eq!(data["inputTokens"], 120);
    assert!(data["estimate"].as_u64().unwrap() > 0);
    assert!(h.trace().contains(&"usage".to_string()));
}

#[tokio::test]
async fn an_exhausted_script_is_an_error_part_and_a_failed_turn() {
    let h = harness(json!({"turns": []}));
    let (sid, outcome) = h.run("hi").await;
    assert_eq!(outcome.end, TurnEnd::Error);
    assert!(outcome.error.unwrap().contains("exhausted"));
    assert!(h.parts(&sid).iter().any(|(k, ..)| *k == PartKind::Error));
    assert_eq!(h.trace().last().unwrap(), "idle error");
}

#[tokio::test]
async fn reasoning_streams_before_the_text() {
    check(
        json!({"turns": [{"reply": {"reasoning": "think", "text": "answer"}}]}),
        &[
            "user hi",
            "busy",
            "reasoning think",
            "text answer",
            "idle end_turn",
        ],
    )
    .await;
}
