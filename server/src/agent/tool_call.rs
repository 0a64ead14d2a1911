//! One tool call: recorded pending (or it does not run), checked against the doom loop,
//! run through the registry, and recorded with its result and what it implies (grants,
//! memory provenance, the todo list).

use std::path::PathBuf;

use serde_json::{Value, json};

use super::answer::PendingCall;
use super::{Agent, Result};
use crate::config::Action;
use crate::editor::{PermissionReply, PermissionRequest, ProposedChange, Update};
use crate::status::{PartKind, PartStatus};
use crate::store::{Event, new_id};
use crate::tools::{CallResult, CallStatus, ToolContext};

/// How a call ended, when its records were written.
pub(super) enum CallEnd {
    Ran {
        files: Vec<PathBuf>,
    },
    /// Not run (the doom-loop check refused it); the model reads why.
    Refused,
    /// The user rejected it and stopped the turn.
    Stopped {
        files: Vec<PathBuf>,
    },
}

/// The call's arguments as the editor is shown them: the JSON, else the raw text.
fn shown_input(call: &PendingCall) -> Value {
    serde_json::from_str(&call.arguments).unwrap_or(Value::String(call.arguments.clone()))
}

/// The tool part's data: the call, and once it ran its result.
fn call_data(call: &PendingCall) -> Value {
    json!({"callId": call.id, "name": call.name, "input": call.arguments})
}

impl Agent {
    /// Runs one call: pending → running → completed/error, with the doom-loop check. A record
    /// that cannot be written is an error: the call does not run (or the turn ends after it).
    pub(super) async fn run_tool(
        &self,
        sid: &str,
        message_id: &str,
        call: &PendingCall,
        list_version: u64,
        ctx: &mut ToolContext,
        recent: &mut Vec<(String, String)>,
    ) -> Result<CallEnd> {
        let Some(part_id) = self.admit_call(sid, message_id, call, ctx, recent).await? else {
            return Ok(CallEnd::Refused);
        };
        let result = self
            .execute_call(sid, &part_id, call, list_version, ctx)
            .await?;
        self.record_result(sid, part_id, call, &result, ctx)?;
        let files = result.files_changed;
        Ok(match result.status {
            CallStatus::Stopped => CallEnd::Stopped { files },
            _ => CallEnd::Ran { files },
        })
    }

    /// Records the call pending and checks it against the doom loop: its part's id when it
    /// may run; `None` when it was refused (its part then says why).
    pub(super) async fn admit_call(
        &self,
        sid: &str,
        message_id: &str,
        call: &PendingCall,
        ctx: &ToolContext,
        recent: &mut Vec<(String, String)>,
    ) -> Result<Option<String>> {
        let part_id = new_id();
        let input = shown_input(call);
        let pending = Event::PartAdded {
            part_id: part_id.clone(),
            message_id: message_id.into(),
            kind: PartKind::Tool,
            data: call_data(call),
            status: Some(PartStatus::Pending),
        };
        self.append(sid, vec![pending])?;
        self.publish_call(sid, call, &input, PartStatus::Pending);
        let Some(output) = self.doom_loop(sid, call, ctx, recent).await else {
            return Ok(Some(part_id));
        };
        let mut data = call_data(call);
        data["output"] = json!(output);
        let refused = Event::PartUpdated {
            part_id,
            data: Some(data),
            status: Some(PartStatus::Error),
        };
        self.append(sid, vec![refused])?;
        self.publish_result(sid, call, PartStatus::Error, "", &output, None);
        Ok(None)
    }

    /// Marks an admitted call running and runs it (its result is recorded apart, in the
    /// model's order: see [`Self::record_result`]).
    pub(super) async fn execute_call(
        &self,
        sid: &str,
        part_id: &str,
        call: &PendingCall,
        list_version: u64,
        ctx: &ToolContext,
    ) -> Result<CallResult> {
        let running = Event::PartUpdated {
            part_id: part_id.into(),
            data: None,
            status: Some(PartStatus::Running),
        };
        self.append(sid, vec![running])?;
        let input = shown_input(call);
        self.publish_call(sid, call, &input, PartStatus::Running);
        Ok(self
            .registry()
            .call(&call.name, &call.arguments, list_version, ctx)
            .await)
    }

    /// The same call three times in a row: asks before letting the model spin. `Some`: why
    /// the call does not run.
    async fn doom_loop(
        &self,
        sid: &str,
        call: &PendingCall,
        ctx: &ToolContext,
        recent: &mut Vec<(String, String)>,
    ) -> Option<String> {
        recent.push((call.name.clone(), call.arguments.clone()));
        let n = recent.len();
        if n < 3 || !recent[n - 3..].iter().all(|c| *c == recent[n - 1]) {
            return None;
        }
        let request = PermissionRequest {
            session_id: Some(sid.into()),
            tool_call_id: Some(call.id.clone()),
            permission: "doom_loop".into(),
            tool: call.name.clone(),
            title: format!(
                "{} was called three times in a row with the same arguments",
                call.name
            ),
            patterns: vec![call.name.clone()],
            always: vec![call.name.clone()],
            ..Default::default()
        };
        let stopped = "stopped: the same call was repeated three times";
        match ctx.policy.decide("doom_loop", &call.name) {
            Action::Allow => None,
            Action::Deny => Some(format!("{stopped}; try something else")),
            Action::Ask => match ctx.editor.ask_permission(&request).await {
                PermissionReply::Once | PermissionReply::Always => None,
                PermissionReply::Reject { message } => Some(match message {
                    Some(m) => format!("{stopped}; the user says: {m}"),
                    None => stopped.to_string(),
                }),
            },
        }
    }

    /// Records a finished call and what it implies: grants (project-wide), memory
    /// provenance and the todo list (the session's).
    pub(super) fn record_result(
        &self,
        sid: &str,
        part_id: String,
        call: &PendingCall,
        result: &CallResult,
        ctx: &mut ToolContext,
    ) -> Result<()> {
        let status = match result.status {
            CallStatus::Completed => PartStatus::Completed,
            _ if ctx.cancel.is_cancelled() || result.output.starts_with("interrupted") => {
                PartStatus::Interrupted
            }
            _ => PartStatus::Error,
        };
        let mut data = call_data(call);
        data["output"] = json!(result.output);
        data["title"] = json!(result.title);
        data["metadata"] = result.metadata.clone();
        let mut events = vec![Event::PartUpdated {
            part_id,
            data: Some(data),
            status: Some(status),
        }];
        if let Some((scope, label, content)) = &result.memory {
            // Who wrote which block when: the memory's provenance, in the log.
            events.push(Event::MemoryWritten {
                scope: scope.clone(),
                label: label.clone(),
                content: content.clone(),
            });
        }
        if let Some(todos) = &result.todos {
            events.push(Event::TodosReplaced {
                todos: todos.clone(),
            });
        }
        self.append(sid, events)?;
        self.record_grants(&result.grants, ctx)?;
        if let Some(todos) = &result.todos {
            self.editor.publish(Update::Plan {
                session_id: sid.into(),
                todos: todos.clone(),
            });
        }
        let diff = result
            .metadata
            .get("edit")
            .and_then(|v| serde_json::from_value::<ProposedChange>(v.clone()).ok());
        self.publish_result(sid, call, status, &result.title, &result.output, diff);
        Ok(())
    }

    /// "Always" answers: saved for the project, and in force for the rest of the turn.
    fn record_grants(&self, grants: &[(String, String)], ctx: &mut ToolContext) -> Result<()> {
        if grants.is_empty() {
            return Ok(());
        }
        self.with_store(|s| s.record_grants(&self.project(), grants, false))?;
        ctx.policy.grants.extend(grants.iter().cloned());
        Ok(())
    }

    /// Records a tool part in its final state, for a call that never ran.
    pub(super) fn record_unrun(
        &self,
        sid: &str,
        message_id: &str,
        call: &PendingCall,
        why: &str,
    ) -> Result<()> {
        let mut data = call_data(call);
        data["output"] = json!(why);
        data["title"] = json!("");
        data["metadata"] = Value::Null;
        let event = Event::PartAdded {
            part_id: new_id(),
            message_id: message_id.into(),
            kind: PartKind::Tool,
            data,
            status: Some(PartStatus::Error),
        };
        self.append(sid, vec![event])?;
        self.publish_result(sid, call, PartStatus::Error, "", why, None);
        Ok(())
    }

    fn publish_call(&self, sid: &str, call: &PendingCall, input: &Value, status: PartStatus) {
        self.editor.publish(Update::ToolCall {
            session_id: sid.into(),
            id: call.id.clone(),
            name: call.name.clone(),
            input: input.clone(),
            status,
        });
    }

    fn publish_result(
        &self,
        sid: &str,
        call: &PendingCall,
        status: PartStatus,
        title: &str,
        output: &str,
        diff: Option<ProposedChange>,
    ) {
        self.editor.publish(Update::ToolResult {
            session_id: sid.into(),
            id: call.id.clone(),
            name: call.name.clone(),
            status,
            title: title.into(),
            output: output.into(),
            diff,
        });
    }
}
