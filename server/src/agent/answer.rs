//! One streamed answer: retried while nothing came, written to the store in batches as it
//! streams, closed with a status whatever ends it.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use futures::StreamExt;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::{Agent, AgentError, MAX_ANSWER_BYTES, TurnOutcome, context};
use crate::editor::Update;
use crate::provider::{ProviderError, ProviderEvent, StopReason, retry};
use crate::status::{PartKind, PartStatus};
use crate::store::{Event, new_id};

/// Deltas are written in batches: at most this often, or when this much text waits.
const FLUSH_EVERY: Duration = Duration::from_millis(50);
const FLUSH_BYTES: usize = 8 * 1024;
/// An answer stopped at `length` after no more than this many tokens, well before its
/// limit, was stopped by a full context.
const FEW_TOKENS: u64 = 16;

/// A tool call as the model made it.
#[derive(Debug, Clone)]
pub struct PendingCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

pub struct Answer {
    pub calls: Vec<PendingCall>,
    /// Whether the answer stopped at the output limit (`finish_reason: "length"`): its
    /// text is cut off, and so may be the arguments of its last call.
    pub cut_off: bool,
    /// Whether the provider stopped the answer as a refusal: no call of it runs.
    pub refused: bool,
}

/// Why a step's answer did not come: the turn ends, or the request overflowed the context
/// (the loop compacts or squeezes and asks again).
pub(super) enum Interrupt {
    Outcome(TurnOutcome),
    /// The provider's context-overflow message, and the window it named, if any.
    Overflow {
        message: String,
        window: Option<u32>,
    },
}

impl From<TurnOutcome> for Interrupt {
    fn from(o: TurnOutcome) -> Self {
        Interrupt::Outcome(o)
    }
}

/// How one attempt at streaming ended.
enum Attempt {
    Finished,
    Failed(ProviderError),
    /// The answer could not be recorded: the turn ends (nothing unrecorded goes on).
    Unrecorded(AgentError),
    Cancelled,
}

impl Agent {
    /// Streams one answer with retries before output, persisting deltas in batches.
    pub(super) async fn stream_answer(
        &self,
        sid: &str,
        message_id: &str,
        step: &context::StepRequest,
        cancel: &CancellationToken,
    ) -> Result<Answer, Interrupt> {
        let mut attempt = 0;
        loop {
            let mut writer = AnswerWriter::new(self, sid, message_id, step.estimate);
            let error = match self.attempt(&mut writer, step, cancel).await {
                Attempt::Finished if writer.filled_the_window(step) => {
                    // The server stopped for want of room, not at our limit: the request
                    // (nearly) fills its context. What came is set aside, unsent.
                    writer.close_or_fail(PartStatus::Error)?;
                    return Err(Interrupt::Overflow {
                        message: "context too long: the model stopped after a few tokens, \
                                  its context full (finish_reason \"length\")"
                            .into(),
                        window: None,
                    });
                }
                Attempt::Finished => {
                    let cut_text =
                        writer.stop == Some(StopReason::MaxTokens) && writer.calls.is_empty();
                    let status = if cut_text {
                        PartStatus::Interrupted
                    } else {
                        PartStatus::Completed
                    };
                    writer.close_or_fail(status)?;
                    return Ok(writer.into_answer());
                }
                Attempt::Cancelled => {
                    writer.close_or_fail(PartStatus::Interrupted)?;
                    return Err(TurnOutcome::cancelled().into());
                }
                Attempt::Unrecorded(e) => return Err(self.fail(sid, e.to_string()).into()),
                Attempt::Failed(e) => e,
            };
            let had_output = writer.had_output();
            if let Some(wait) = retry_wait(&error, had_output, attempt) {
                attempt += 1;
                writer.close_or_fail(PartStatus::Error)?;
                self.editor.publish(Update::Retry {
                    session_id: sid.into(),
                    attempt,
                    wait_ms: wait.as_millis() as u64,
                    reason: error.to_string(),
                });
                tokio::select! {
                    _ = tokio::time::sleep(wait) => continue,
                    _ = cancel.cancelled() => return Err(TurnOutcome::cancelled().into()),
                }
            }
            let status = if had_output {
                PartStatus::Interrupted
            } else {
                PartStatus::Error
            };
            writer.close_or_fail(status)?;
            if let (false, ProviderError::ContextOverflow { window, .. }) = (had_output, &error) {
                return Err(Interrupt::Overflow {
                    message: error.to_string(),
                    window: *window,
                });
            }
            let message = failure_message(&error, had_output);
            return Err(self.answer_failed(sid, message_id, message).into());
        }
    }

    /// One request and its stream, fed to `writer`.
    async fn attempt(
        &self,
        writer: &mut AnswerWriter<'_>,
        step: &context::StepRequest,
        cancel: &CancellationToken,
    ) -> Attempt {
        let Some(provider) = &self.provider else {
            return Attempt::Failed(ProviderError::Other {
                message: "no model provider is configured".into(),
            });
        };
        let started = tokio::select! {
            s = provider.stream(&step.request) => s,
            _ = cancel.cancelled() => return Attempt::Cancelled,
        };
        let mut stream = match started {
            Ok(s) => s,
            Err(e) => return Attempt::Failed(e),
        };
        loop {
            let next = tokio::select! {
                n = stream.next() => n,
                _ = cancel.cancelled() => return Attempt::Cancelled,
            };
            match next {
                None => {
                    return Attempt::Failed(ProviderError::StreamBroken {
                        message: "the stream ended without a finish".into(),
                    });
                }
                Some(Ok(ProviderEvent::Finish(reason))) => {
                    writer.stop = Some(reason);
                    return Attempt::Finished;
                }
                Some(Ok(event)) => match writer.event(event) {
                    Ok(()) => {}
                    Err(WriteError::Provider(e)) => return Attempt::Failed(e),
                    Err(WriteError::Record(e)) => return Attempt::Unrecorded(e),
                },
                Some(Err(e)) => return Attempt::Failed(e),
            }
        }
    }

    /// Records why the answer failed (an error part) and ends the turn with it.
    pub(super) fn answer_failed(
        &self,
        sid: &str,
        message_id: &str,
        message: String,
    ) -> TurnOutcome {
        let event = Event::PartAdded {
            part_id: new_id(),
            message_id: message_id.into(),
            kind: PartKind::Error,
            data: json!({ "text": message }),
            status: None,
        };
        match self.append(sid, vec![event]) {
            Ok(()) => self.fail(sid, message),
            Err(e) => self.fail(sid, format!("{message} ({e})")),
        }
    }
}

/// Whether a reported input count is far below our estimate: the server did not see what
/// we sent (tokenisers differ by some tens of percent, not threefold).
fn dropped_input(reported: u64, estimate: usize) -> bool {
    reported > 0 && estimate >= 1_000 && (reported as usize) * 3 < estimate
}

/// What the user reads when an answer failed.
fn failure_message(error: &ProviderError, had_output: bool) -> String {
    match error {
        ProviderError::Retryable { .. } => {
            format!("{error} (gave up after {} retries)", retry::MAX_RETRIES)
        }
        ProviderError::StreamBroken { .. } | ProviderError::ContextOverflow { .. }
            if had_output =>
        {
            format!("{error}; the partial answer was kept")
        }
        _ => error.to_string(),
    }
}

/// How long to wait before trying again, if the error is worth another try: a retryable
/// error, or a stream that broke before anything came (a connection failure).
fn retry_wait(error: &ProviderError, had_output: bool, attempt: u32) -> Option<Duration> {
    let retryable = match error {
        ProviderError::Retryable { .. } => true,
        ProviderError::StreamBroken { .. } => !had_output,
        _ => false,
    };
    if !retryable || attempt >= retry::MAX_RETRIES {
        return None;
    }
    let after = match error {
        ProviderError::Retryable { retry_after, .. } => *retry_after,
        _ => None,
    };
    Some(retry::delay(attempt + 1, after))
}

/// Why the writer refused an event.
enum WriteError {
    /// The stream is garbage (an answer past [`MAX_ANSWER_BYTES`]).
    Provider(ProviderError),
    Record(AgentError),
}

/// Accumulates one streamed answer and writes it to the store in batches.
struct AnswerWriter<'a> {
    agent: &'a Agent,
    sid: &'a str,
    message_id: &'a str,
    /// Our token count of the request, kept with the provider's (calibration).
    estimate: usize,
    /// The open text and reasoning parts: (part id, text so far).
    text: Option<(String, String)>,
    reasoning: Option<(String, String)>,
    signature: Option<String>,
    pending: Vec<Event>,
    pending_bytes: usize,
    last_flush: Instant,
    calls: BTreeMap<usize, PendingCall>,
    output: bool,
    /// Why the answer stopped, once it did.
    stop: Option<StopReason>,
    /// The output tokens the provider reported.
    output_tokens: Option<u64>,
    /// The input tokens the provider reported.
    input_tokens: Option<u64>,
    /// Bytes of text, reasoning and tool arguments so far (see [`MAX_ANSWER_BYTES`]).
    size: usize,
}

impl<'a> AnswerWriter<'a> {
    fn new(agent: &'a Agent, sid: &'a str, message_id: &'a str, estimate: usize) -> Self {
        Self {
            agent,
            sid,
            message_id,
            estimate,
            text: None,
            reasoning: None,
            signature: None,
            pending: Vec::new(),
            pending_bytes: 0,
            last_flush: Instant::now(),
            calls: Default::default(),
            size: 0,
            output: false,
            stop: None,
            output_tokens: None,
            input_tokens: None,
        }
    }

    /// A stop at the output limit that came long before our limit, with the request
    /// filling the window: the server ran out of context (llama.cpp stops with `length`
    /// instead of refusing when the prompt nearly fills its context).
    fn filled_the_window(&self, step: &context::StepRequest) -> bool {
        if self.stop != Some(StopReason::MaxTokens) {
            return false;
        }
        let limit = u64::from(step.request.max_tokens);
        let output = self.output_tokens.unwrap_or((self.size as u64 / 4).max(1));
        let input = self.input_tokens.unwrap_or(step.estimate as u64);
        let window = u64::from(self.agent.limits().context_window);
        output < limit / 2 && (output <= FEW_TOKENS || (input + output) * 10 >= window * 9)
    }

    fn had_output(&self) -> bool {
        self.output
    }

    fn delta(&mut self, reasoning: bool, piece: String) -> Result<(), AgentError> {
        self.output = true;
        let kind = if reasoning {
            PartKind::Reasoning
        } else {
            PartKind::Text
        };
        let slot = if reasoning {
            &mut self.reasoning
        } else {
            &mut self.text
        };
        let opened = slot.is_none();
        let (part_id, all) = slot.get_or_insert_with(|| (new_id(), String::new()));
        all.push_str(&piece);
        let part_id = part_id.clone();
        if opened {
            self.pending.push(Event::PartAdded {
                part_id: part_id.clone(),
                message_id: self.message_id.into(),
                kind,
                data: json!({"text": ""}),
                status: Some(PartStatus::Streaming),
            });
        }
        let (session_id, message_id) = (self.sid.into(), self.message_id.into());
        let text = piece.clone();
        self.agent.editor.publish(if reasoning {
            Update::Reasoning {
                session_id,
                message_id,
                text,
            }
        } else {
            Update::Text {
                session_id,
                message_id,
                text,
            }
        });
        self.pending_bytes += piece.len();
        self.pending.push(Event::TextAppended {
            part_id,
            text: piece,
        });
        if self.pending_bytes >= FLUSH_BYTES || self.last_flush.elapsed() >= FLUSH_EVERY {
            self.flush()?;
        }
        Ok(())
    }

    /// Takes one event; an answer past [`MAX_ANSWER_BYTES`] (a runaway or garbage stream)
    /// is refused with the error that cuts it there.
    fn event(&mut self, event: ProviderEvent) -> Result<(), WriteError> {
        self.size += match &event {
            ProviderEvent::TextDelta(t) | ProviderEvent::ReasoningDelta(t) => t.len(),
            ProviderEvent::ToolCallDelta { arguments, .. } => arguments.len(),
            _ => 0,
        };
        if self.size > MAX_ANSWER_BYTES {
            return Err(WriteError::Provider(ProviderError::StreamBroken {
                message: format!(
                    "the model's answer passed {} MB and was cut there",
                    MAX_ANSWER_BYTES / (1024 * 1024)
                ),
            }));
        }
        match event {
            ProviderEvent::TextDelta(t) => self.delta(false, t).map_err(WriteError::Record)?,
            ProviderEvent::ReasoningDelta(t) => self.delta(true, t).map_err(WriteError::Record)?,
            ProviderEvent::ReasoningSignature(s) => self.signature = Some(s),
            ProviderEvent::ToolCallStart { index, id, name } => {
                self.output = true;
                let arguments = String::new();
                self.calls.insert(
                    index,
                    PendingCall {
                        id,
                        name,
                        arguments,
                    },
                );
            }
            ProviderEvent::ToolCallDelta { index, arguments } => {
                self.output = true;
                if let Some(c) = self.calls.get_mut(&index) {
                    c.arguments.push_str(&arguments);
                }
            }
            ProviderEvent::Usage(u) => self.usage(u),
            ProviderEvent::ToolCallEnd { .. } | ProviderEvent::Finish(_) => {}
        }
        Ok(())
    }

    fn usage(&mut self, u: crate::provider::Usage) {
        self.output_tokens = Some(u.output_tokens);
        self.input_tokens = Some(u.input_tokens).filter(|&n| n > 0);
        if dropped_input(u.input_tokens, self.estimate) {
            self.agent.warn_once(
                "input-underreported",
                &format!(
                    "the server counted {} input tokens for a request of about {}: its chat \
                     template may drop the tools or the system prompt (llama.cpp needs \
                     --jinja and a template with tool tags), or it cuts the prompt to a \
                     smaller context (Ollama's num_ctx)",
                    u.input_tokens, self.estimate
                ),
            );
        }
        self.agent.editor.publish(Update::Usage {
            session_id: self.sid.into(),
            input_tokens: u.input_tokens,
            output_tokens: u.output_tokens,
            cache_read_tokens: u.cache_read_tokens,
        });
        let mut data = serde_json::to_value(u).unwrap_or(Value::Null);
        data["estimate"] = json!(self.estimate);
        data["model"] = json!(self.agent.model());
        self.pending.push(Event::PartAdded {
            part_id: new_id(),
            message_id: self.message_id.into(),
            kind: PartKind::Usage,
            data,
            status: None,
        });
    }

    fn flush(&mut self) -> Result<(), AgentError> {
        self.pending_bytes = 0;
        self.last_flush = Instant::now();
        if self.pending.is_empty() {
            return Ok(());
        }
        let events = std::mem::take(&mut self.pending);
        self.agent.append(self.sid, events)
    }

    /// Writes what is left and gives the text and reasoning parts their final status.
    fn close(&mut self, status: PartStatus) -> Result<(), AgentError> {
        if let Some((part_id, _)) = self.text.take() {
            self.pending.push(Event::PartUpdated {
                part_id,
                data: None,
                status: Some(status),
            });
        }
        if let Some((part_id, text)) = self.reasoning.take() {
            let data = self
                .signature
                .as_ref()
                .map(|sig| json!({"text": text, "signature": sig}));
            self.pending.push(Event::PartUpdated {
                part_id,
                data,
                status: Some(status),
            });
        }
        self.flush()
    }

    /// [`close`](Self::close), where a record that cannot be written ends the turn.
    fn close_or_fail(&mut self, status: PartStatus) -> Result<(), Interrupt> {
        self.close(status)
            .map_err(|e| self.agent.fail(self.sid, e.to_string()).into())
    }

    fn into_answer(self) -> Answer {
        let calls = self.calls.into_values().map(|mut c| {
            if c.id.is_empty() {
                c.id = format!("call_{}", new_id());
            }
            c
        });
        Answer {
            calls: calls.collect(),
            cut_off: self.stop == Some(StopReason::MaxTokens),
            refused: self.stop == Some(StopReason::Refusal),
        }
    }
}
