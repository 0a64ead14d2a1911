//! The request of each step, by the gradient: the stable prefix (the mode's system prompt
//! and the baseline note), the distilled prefix, the raw recent messages as stored, the
//! tools — with the answer's reserve left free. Each part has its share of the window
//! (`context_budget`); what still does not fit degrades to stubs.

use super::{Agent, AgentError, Result};
use crate::provider::{ChatMessage, ChatRequest, ToolCallMsg};
use crate::status::{PartKind, PartStatus};
use crate::store::MessageView;
use crate::tools::ToolContext;

const WRAP_UP: &str = "You have reached the step limit for this turn. Do not call any tools. \
Summarise what you did, what is left to do, and anything the user should check.";

/// The text of `m`'s parts of `kinds`, less answers set aside (an attempt that was asked
/// again: the model is not shown what it never really said).
fn texts(m: &MessageView, kinds: &[PartKind]) -> String {
    m.parts
        .iter()
        .filter(|p| kinds.contains(&p.kind) && p.status != Some(PartStatus::Error))
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
                // Notes that came during the step (a state change) follow its newest result.
                let notes = texts(m, &[PartKind::Note]);
                match out.last_mut() {
                    _ if notes.is_empty() => {}
                    Some(ChatMessage::ToolResult { content, .. }) => {
                        content.push_str("\n\n");
                        content.push_str(&notes);
                    }
                    _ => out.push(ChatMessage::User { text: notes }),
                }
            }
            _ => {}
        }
    }
    out
}

/// A step's request and how it sits in the window (by the calibrated token estimate).
pub struct StepRequest {
    pub request: ChatRequest,
    /// Our token estimate of the request (uncalibrated; stored beside the provider's).
    pub estimate: usize,
    /// The whole request is over the input budget.
    pub over_budget: bool,
    /// The raw messages are over their share, or the whole is over: the cut should move.
    pub needs_cut: bool,
    /// How many tokens the raw messages may take after a cut moves (half their share: room
    /// to grow before the next one).
    pub raw_target: usize,
    /// How many tool outputs it shows as stubs.
    pub stubbed: usize,
    /// The calibrated estimate of what no cut or squeeze can shrink: the system blocks
    /// and the tool definitions.
    pub fixed: usize,
    /// The input budget it is held to (the window less the answer's reserve).
    pub budget: u32,
    /// The session's older part is distilled (its context's cut has moved).
    pub distilled: bool,
}

/// The window's shares in tokens: the input budget (the window less the answer's reserve)
/// and the raw messages' share.
pub struct Shares {
    pub input: u32,
    pub raw: usize,
    /// Long-term knowledge's share: the baseline and the knowledge note.
    pub knowledge: usize,
}

pub fn shares(agent: &Agent) -> Shares {
    let limits = agent.limits();
    let budget = agent.config.budget;
    let window = f64::from(limits.context_window);
    let reserve = (budget.output * window).max(f64::from(limits.max_output_tokens));
    Shares {
        input: (window - reserve).max(0.0) as u32,
        raw: (budget.raw * window) as usize,
        knowledge: (budget.knowledge * window) as usize,
    }
}

/// The raw messages a request shows: all of them, or from the context's cut on — with the
/// prompt of the turn the cut falls in, verbatim, when it falls after it.
fn shown_messages(all: &[MessageView], epoch: Option<&crate::store::Epoch>) -> Vec<ChatMessage> {
    let from = epoch
        .and_then(|e| e.first_kept.as_ref())
        .map_or(0, |first| {
            all.iter()
                .position(|m| &m.message_id == first)
                .unwrap_or(all.len())
        });
    let mut shown: Vec<MessageView> = Vec::new();
    if from < all.len()
        && all[from].role != "user"
        && let Some(prompt) = all[..from].iter().rposition(|m| m.role == "user")
    {
        shown.push(all[prompt].clone());
    }
    shown.extend_from_slice(&all[from.min(all.len())..]);
    project_messages(&shown)
}

/// The request of the next step: the stable prefix (the mode's prompt, the baseline), the
/// distilled prefix of the context (once its cut has moved), the raw messages, the tools.
/// With `squeeze`, tool outputs become loss-annotated stubs, oldest first (earlier turns',
/// then this turn's), until the (calibrated) estimate is within that fraction of the input
/// budget. The prompt itself stays verbatim; whole outputs stay in the log and in the
/// tool-output folder, where the stub says they are. Oldest first keeps the request's prefix
/// stable from one step to the next (the stubbed set only grows).
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
    let registry = agent.registry();
    let tool_names = registry.names();
    let setting = super::prompts::Setting {
        mode: &mode,
        tools: &tool_names,
    };
    let mut system = vec![super::prompts::system(&agent.model(), &setting)];
    if let Some(epoch) = &epoch {
        system.push(epoch.baseline.clone());
        system.extend(epoch.summary.clone());
    }
    let mut messages = shown_messages(&view.messages, epoch.as_ref());
    let tools = if last_step {
        messages.push(ChatMessage::User {
            text: WRAP_UP.into(),
        });
        Vec::new()
    } else {
        registry.definitions(ctx)
    };
    let limits = agent.limits();
    let shares = shares(agent);
    let mut request = ChatRequest {
        model: agent.model(),
        system,
        messages,
        tools,
        max_tokens: limits.max_output_tokens,
    };
    let usage = view.messages.iter().flat_map(|m| &m.parts);
    let usage = usage.filter(|p| p.kind == PartKind::Usage).map(|p| &p.data);
    let calibration = crate::tokens::calibration(usage, &request.model);
    let mut stubbed = 0;
    if let Some(fraction) = squeeze {
        let target = f64::from(shares.input) * fraction;
        let total = crate::tokens::estimate_request(&request);
        stubbed = stub_outputs(&mut request.messages, calibration, target, total);
        if stubbed > 0 {
            tracing::info!(session = %sid, stubbed, "older tool outputs shown as stubs");
        }
    }
    let distilled = epoch.is_some_and(|e| e.summary.is_some());
    Ok(measure(request, calibration, &shares, stubbed, distilled))
}

/// Where a built request sits in the window's shares.
fn measure(
    request: ChatRequest,
    calibration: Option<f64>,
    shares: &Shares,
    stubbed: usize,
    distilled: bool,
) -> StepRequest {
    let ratio = calibration.unwrap_or(1.0);
    let (over_budget, estimate) = crate::tokens::over_budget(&request, calibration, shares.input);
    let raw: usize = request
        .messages
        .iter()
        .map(crate::tokens::estimate_message)
        .sum();
    let raw = (raw as f64 * ratio) as usize;
    let fixed = crate::tokens::estimate_fixed(&request) as f64 * ratio;
    StepRequest {
        fixed: fixed as usize,
        budget: shares.input,
        distilled,
        over_budget,
        needs_cut: over_budget || raw > shares.raw,
        raw_target: shares.raw / 2,
        estimate,
        request,
        stubbed,
    }
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
        if content.chars().count() <= super::distill::STUB_OVER_CHARS {
            continue;
        }
        let whereabouts = match crate::tools::truncate::keep_whole(content, &dir, call_id) {
            Ok(path) => format!("in {} (read it with offset/limit)", path.display()),
            Err(_) => "in the session log".to_string(),
        };
        let stub = super::distill::stub(name, content, !*is_error, &whereabouts);
        total =
            total.saturating_sub(crate::tokens::estimate(content)) + crate::tokens::estimate(&stub);
        *content = stub;
        stubbed += 1;
    }
    stubbed
}
