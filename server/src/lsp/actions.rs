//! Code actions and the commands they run (`workspace/executeCommand`): the way into the
//! agent for editors without the `agent/*` methods, and for everyone on a selection.

use serde_json::{Value, json};
use tower_lsp_server::jsonrpc::{Error, Result};
use tower_lsp_server::ls_types::*;

use super::server::Backend;
use crate::editor::PermissionReply;

/// The commands the server runs (`agent.ask` is the client's own).
pub const COMMANDS: &[&str] = &[
    "agent.run",
    "agent.cancel",
    "agent.undo",
    "agent.redo",
    "agent.answerPermission",
    "agent.openTranscript",
];

/// The instruction of an `AGENT:` comment on a line, in any comment syntax.
pub fn agent_comment(line: &str) -> Option<String> {
    let at = line.find("AGENT:")?;
    let before = line[..at].trim();
    // Only in a comment: something comment-like must come before it.
    let comment_like = ["//", "#", "--", "/*", "<!--", ";", "%", "\"", "'"]
        .iter()
        .any(|m| before.ends_with(m) || before.contains(m));
    if !comment_like {
        return None;
    }
    let text = line[at + "AGENT:".len()..]
        .trim()
        .trim_end_matches("*/")
        .trim_end_matches("-->")
        .trim();
    (!text.is_empty()).then(|| text.to_string())
}

fn action(title: String, kind: CodeActionKind, command: &str, args: Value) -> CodeActionOrCommand {
    CodeActionOrCommand::CodeAction(CodeAction {
        title: title.clone(),
        kind: Some(kind),
        command: Some(Command {
            title,
            command: command.into(),
            arguments: Some(vec![args]),
        }),
        ..Default::default()
    })
}

/// The prompt of an `agent.run` kind.
fn run_prompt(kind: &str, target: &Value) -> Result<String> {
    Ok(match kind {
        "explain" => {
            "Explain what this code does, briefly and concretely. Do not change any file.".into()
        }
        "fix" => {
            "Fix the problems reported in this code (see the diagnostics). Keep the change minimal."
                .into()
        }
        "refactor" => "Refactor this code to be clearer without changing what it does.".into(),
        "tests" => {
            "Write tests for this code, in the project's existing test style, and run them.".into()
        }
        "comment" => format!(
            "{}\n\n(This instruction comes from an `AGENT:` comment on line {} of this file. Do what it says, and remove that comment as part of your edit.)",
            target["instruction"].as_str().unwrap_or(""),
            target["line"].as_u64().unwrap_or(0) + 1
        ),
        other => {
            return Err(Error::invalid_params(format!(
                "unknown agent.run kind {other:?}"
            )));
        }
    })
}

/// Actions on the target itself: the `AGENT:` comment on its line, and on a selection
/// explain, refactor, tests (and fix where diagnostics are).
fn target_actions(
    uri: &Uri,
    range: Range,
    line_text: Option<&str>,
    has_diagnostics: bool,
) -> Vec<CodeActionOrCommand> {
    let mut actions = Vec::new();
    let target = json!({"uri": uri, "range": range});
    if let Some(instruction) = line_text.and_then(agent_comment) {
        let mut args = target.clone();
        args["instruction"] = json!(instruction);
        args["line"] = json!(range.start.line);
        actions.push(action(
            "Agent: do what the comment says".into(),
            CodeActionKind::REFACTOR,
            "agent.run",
            json!({"kind": "comment", "target": args}),
        ));
    }
    if range.start == range.end {
        return actions;
    }
    if has_diagnostics {
        actions.push(action(
            "Agent: fix the problems here".into(),
            CodeActionKind::QUICKFIX,
            "agent.run",
            json!({"kind": "fix", "target": target}),
        ));
    }
    for (title, kind) in [
        ("Agent: explain this", "explain"),
        ("Agent: refactor this", "refactor"),
        ("Agent: write tests for this", "tests"),
    ] {
        let args = json!({"kind": kind, "target": target});
        actions.push(action(
            title.into(),
            CodeActionKind::REFACTOR,
            "agent.run",
            args,
        ));
    }
    actions
}

impl Backend {
    /// Pending approvals first (for editors without any other way to answer), then the
    /// target's actions, then the last session's.
    pub(super) fn code_actions(&self, params: &CodeActionParams) -> Vec<CodeActionOrCommand> {
        let uri = &params.text_document.uri;
        let range = params.range;
        let (caps, line_text) = self.note_code_action(params);
        let mut actions = self.permission_actions();
        let has_diagnostics = !params.context.diagnostics.is_empty();
        actions.extend(target_actions(
            uri,
            range,
            line_text.as_deref(),
            has_diagnostics,
        ));
        if caps.updates {
            // Clients with their own input box run this command themselves.
            let target = json!({"uri": uri, "range": range});
            actions.push(action(
                "Agent: ask…".into(),
                CodeActionKind::EMPTY,
                "agent.ask",
                target,
            ));
        }
        actions.extend(self.session_actions());
        actions
    }

    fn permission_actions(&self) -> Vec<CodeActionOrCommand> {
        let Some(host) = self.agent_host() else {
            return Vec::new();
        };
        let mut actions = Vec::new();
        for (id, request) in host.editor().pending_asks() {
            let what = request.command.clone().unwrap_or(request.title.clone());
            for (label, outcome) in [("once", "once"), ("always", "always"), ("deny", "reject")] {
                let title = if outcome == "reject" {
                    format!("Agent: deny `{what}`")
                } else {
                    format!("Agent: allow `{what}` {label}")
                };
                let args = json!({"id": id, "outcome": outcome});
                actions.push(action(
                    title,
                    CodeActionKind::QUICKFIX,
                    "agent.answerPermission",
                    args,
                ));
            }
        }
        actions
    }

    /// Cancel while the last session runs, else undo and redo; its transcript.
    fn session_actions(&self) -> Vec<CodeActionOrCommand> {
        let Some(host) = self.agent_host() else {
            return Vec::new();
        };
        let Some(sid) = host.last_session() else {
            return Vec::new();
        };
        let args = json!({"sessionId": sid});
        let mut actions = Vec::new();
        let mut add = |title: &str, command: &str| {
            actions.push(action(
                title.into(),
                CodeActionKind::EMPTY,
                command,
                args.clone(),
            ));
        };
        if host.is_running(&sid) {
            add("Agent: cancel", "agent.cancel");
        } else {
            add("Agent: undo last change", "agent.undo");
            add("Agent: redo", "agent.redo");
        }
        add("Agent: open transcript", "agent.openTranscript");
        actions
    }

    pub(super) async fn run_command(&self, params: ExecuteCommandParams) -> Result<Option<Value>> {
        let arg = params.arguments.first().cloned().unwrap_or(Value::Null);
        let sid = || {
            arg["sessionId"]
                .as_str()
                .map(String::from)
                .or_else(|| self.host().last_session())
                .ok_or_else(|| Error::invalid_params("no session to act on"))
        };
        let to_rpc = super::error::to_rpc;
        let reply = match params.command.as_str() {
            "agent.run" => json!(self.run_agent_command(&arg).await?),
            "agent.cancel" => {
                self.host().cancel(&sid()?);
                json!({})
            }
            "agent.undo" => {
                self.ensure_agent()?;
                json!(self.host().undo(&sid()?).await.map_err(to_rpc)?)
            }
            "agent.redo" => {
                self.ensure_agent()?;
                json!(self.host().unrevert(&sid()?).await.map_err(to_rpc)?)
            }
            "agent.answerPermission" => self.answer_permission(&arg)?,
            "agent.openTranscript" => self.open_transcript(&sid()?).await,
            other => return Err(Error::invalid_params(format!("unknown command {other:?}"))),
        };
        Ok(Some(reply))
    }

    /// `agent.run`: a prompt made of the kind and the target's context.
    async fn run_agent_command(&self, arg: &Value) -> Result<super::protocol::PromptResult> {
        let target = &arg["target"];
        let uri: Uri = serde_json::from_value(target["uri"].clone())
            .map_err(|e| Error::invalid_params(format!("agent.run needs a target uri: {e}")))?;
        let range: Option<Range> = serde_json::from_value(target["range"].clone()).ok();
        let text = run_prompt(arg["kind"].as_str().unwrap_or(""), target)?;
        let note = self.context_note(&uri, range);
        let (root, config) = self.workspace()?;
        let session = arg["sessionId"].as_str();
        self.host()
            .prompt(&config, &root, session, &text, note, None)
            .await
            .map_err(super::error::to_rpc)
    }

    fn answer_permission(&self, arg: &Value) -> Result<Value> {
        let id = arg["id"]
            .as_u64()
            .ok_or_else(|| Error::invalid_params("agent.answerPermission needs an id"))?;
        let reply = match arg["outcome"].as_str() {
            Some("once") => PermissionReply::Once,
            Some("always") => PermissionReply::Always,
            _ => PermissionReply::Reject {
                message: arg["message"].as_str().map(String::from),
            },
        };
        let answered = self.host().editor().answer(id, reply);
        Ok(json!({ "answered": answered }))
    }

    /// Shows the session's transcript (`window/showDocument`, else its path in a message).
    async fn open_transcript(&self, sid: &str) -> Value {
        let path = crate::paths::data_dir()
            .join("transcripts")
            .join(format!("{sid}.md"));
        let uri = super::bridge::file_uri(&path).filter(|_| self.client_caps().show_document);
        if let Some(uri) = uri {
            let shown = self
                .client()
                .show_document(ShowDocumentParams {
                    uri,
                    external: Some(false),
                    take_focus: Some(true),
                    selection: None,
                })
                .await;
            if let Err(e) = shown {
                tracing::warn!("the editor did not show the transcript: {e}");
            }
        } else {
            let message = format!("agent-lsp transcript: {}", path.display());
            self.client().show_message(MessageType::INFO, message).await;
        }
        json!({ "path": path })
    }
}
