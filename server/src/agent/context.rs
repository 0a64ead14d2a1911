//! The request of each step: the mode's system prompt and the baseline note (the stable
//! prefix), then the session's messages as stored, then the tools.

use super::{Agent, AgentError, Result};
use crate::provider::{ChatMessage, ChatRequest, ToolCallMsg};
use crate::status::{PartKind, PartStatus};
use crate::store::MessageView;
use crate::tools::ToolContext;

const WRAP_UP: &str = "You have reached the step limit for this turn. Do not call any tools. \
Summarise what you did, what is left to do, and anything the user should check.";

fn texts(m: &MessageView, kinds: &[PartKind]) -> String {
    m.parts
        .iter()
        .filter(|p| kinds.contains(&p.kind))
        .filter_map(|p| p.data["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n\n")
}

/// The stored messages as the model sees them.
pub fn project_messages(messages: &[MessageView]) -> Vec<ChatMessage> {
    let mut out = Vec::new();
    for m in messages {
        match m.role.as_str() {
            "user" => out.push(ChatMessage::User {
                text: texts(m, &[PartKind::Note, PartKind::Text]),
            }),
            "assistant" => {
                let text = texts(m, &[PartKind::Text]);
                let reasoning = m
                    .parts
                    .iter()
                    .find(|p| p.kind == PartKind::Reasoning)
                    .map(|p| {
                        (
                            p.data["text"].as_str().unwrap_or_default().to_string(),
                            p.data["signature"].as_str().map(String::from),
                        )
                    });
                let tools: Vec<_> = m
                    .parts
                    .iter()
                    .filter(|p| p.kind == PartKind::Tool)
                    .collect();
                let calls: Vec<ToolCallMsg> = tools
                    .iter()
                    .map(|p| ToolCallMsg {
                        id: p.data["callId"].as_str().unwrap_or_default().into(),
                        name: p.data["name"].as_str().unwrap_or_default().into(),
                        arguments: p.data["input"].as_str().unwrap_or("{}").into(),
                    })
                    .collect();
                if text.is_empty() && calls.is_empty() {
                    continue; // an answer that failed before any output
                }
                out.push(ChatMessage::Assistant {
                    text,
                    reasoning,
                    tool_calls: calls,
                });
                for p in tools {
                    out.push(ChatMessage::ToolResult {
                        call_id: p.data["callId"].as_str().unwrap_or_default().into(),
                        name: p.data["name"].as_str().unwrap_or_default().into(),
                        content: p.data["output"].as_str().unwrap_or("(no output)").into(),
                        is_error: p.status != Some(PartStatus::Completed),
                    });
                }
            }
            _ => {}
        }
    }
    out
}

/// A step's request, and whether it would overflow the model's usable window (by the
/// calibrated token estimate), in which case the loop compacts first.
pub struct StepRequest {
    pub request: ChatRequest,
    /// Our token estimate of the request (uncalibrated; stored beside the provider's).
    pub estimate: usize,
    pub over_budget: bool,
    /// How many tool outputs of the current turn it shows as stubs.
    pub stubbed: usize,
}

/// The messages a request shows: all of them, or after a compaction the checkpoint and
/// the messages kept verbatim.
fn shown_messages(all: &[MessageView], epoch: Option<&crate::store::Epoch>) -> Vec<ChatMessage> {
    let mut messages = Vec::new();
    let mut shown = all;
    if let Some(epoch) = epoch
        && let (Some(summary), Some(first)) = (&epoch.summary, &epoch.first_kept)
    {
        let from = all
            .iter()
            .position(|m| &m.message_id == first)
            .unwrap_or(all.len());
        shown = &all[from..];
        messages.push(ChatMessage::User {
            text: checkpoint_message(summary),
        });
    }
    messages.extend(project_messages(shown));
    messages
}

/// The request of the next step. With `squeeze`, the tool outputs of the current turn
/// become loss-annotated stubs, oldest first, until the (calibrated) estimate is within that
/// fraction of the usable window: a single long task then fits although compaction has
/// nothing to fold. The prompt itself stays verbatim; whole outputs stay in the log and in
/// the tool-output folder, where the stub says they are. Oldest first keeps the request's
/// prefix stable from one step to the next (the stubbed set only grows).
pub fn build_request(
    agent: &Agent,
    sid: &str,
    ctx: &ToolContext,
    last_step: bool,
    squeeze: Option<f64>,
) -> Result<StepRequest> {
    let (view, epoch) = {
        let store = agent.store.lock().unwrap_or_else(|p| p.into_inner());
        let view = store
            .session(sid)?
            .ok_or_else(|| AgentError::not_found(format!("the session {sid} vanished")))?;
        let epoch = store.latest_epoch(sid)?;
        (view, epoch)
    };
    let mode = view
        .summary
        .mode
        .clone()
        .unwrap_or_else(|| agent.config.mode.clone());
    let mut system = vec![super::prompts::system(&mode)];
    system.extend(epoch.as_ref().map(|e| e.baseline.clone()));
    let mut messages = shown_messages(&view.messages, epoch.as_ref());
    let turn_start = messages
        .iter()
        .rposition(|m| matches!(m, ChatMessage::User { .. }))
        .unwrap_or(0);
    let tools = if last_step {
        messages.push(ChatMessage::User {
            text: WRAP_UP.into(),
        });
        Vec::new()
    } else {
        agent.registry.definitions(ctx)
    };
    let limits = agent.limits();
    let request = ChatRequest {
        model: agent.model(),
        system,
        messages,
        tools,
        max_tokens: limits.max_output_tokens,
    };
    let usage = view.messages.iter().flat_map(|m| &m.parts);
    let usage = usage.filter(|p| p.kind == PartKind::Usage).map(|p| &p.data);
    let calibration = crate::tokens::calibration(usage, &request.model);
    let mut request = request;
    let mut stubbed = 0;
    if let Some(fraction) = squeeze {
        let target = f64::from(limits.usable_input()) * fraction;
        let total = crate::tokens::estimate_request(&request);
        stubbed = stub_outputs(
            &mut request.messages[turn_start..],
            calibration,
            target,
            total,
        );
        if stubbed > 0 {
            tracing::info!(session = %sid, stubbed, "older tool outputs of this turn shown as stubs");
        }
    }
    let (over_budget, estimate) =
        crate::tokens::over_budget(&request, calibration, limits.usable_input());
    Ok(StepRequest {
        over_budget,
        estimate,
        request,
        stubbed,
    })
}

/// Turns tool results in `messages`, in order, into stubs until `total` (the request's
/// estimate) times the calibration is within `target`; returns how many it stubbed.
fn stub_outputs(
    messages: &mut [ChatMessage],
    calibration: Option<f64>,
    target: f64,
    mut total: usize,
) -> usize {
    let ratio = calibration.unwrap_or(1.0);
    let dir = crate::tools::truncate::output_dir();
    let mut stubbed = 0;
    for m in messages {
        if total as f64 * ratio <= target {
            break;
        }
        let ChatMessage::ToolResult {
            call_id,
            name,
            content,
            is_error,
        } = m
        else {
            continue;
        };
        if content.chars().count() <= super::compaction::STUB_OVER_CHARS {
            continue;
        }
        let whereabouts = match crate::tools::truncate::keep_whole(content, &dir, call_id) {
            Ok(path) => format!("in {} (read it with offset/limit)", path.display()),
            Err(_) => "in the session log".to_string(),
        };
        let stub = super::compaction::stub(name, content, !*is_error, &whereabouts);
        total =
            total.saturating_sub(crate::tokens::estimate(content)) + crate::tokens::estimate(&stub);
        *content = stub;
        stubbed += 1;
    }
    stubbed
}

/// The summary of folded messages as the model reads it.
pub fn checkpoint_message(summary: &str) -> String {
    format!(
        "<conversation-checkpoint>\nThe conversation so far was compacted into this checkpoint; \
         the full record stays searchable with the recall tool.\n\n{}\n</conversation-checkpoint>",
        summary.trim()
    )
}
