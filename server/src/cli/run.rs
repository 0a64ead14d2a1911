//! `agent-lsp run`: one agent turn from the terminal (or a script), headless.
//!
//! Text streams to stdout as it arrives; each tool call gets one line. With `--json`, every
//! update is one JSON object per line, ending with `{"type":"done",...}`. Permission asks go
//! to the terminal when there is one; otherwise they are refused unless `--yes` or
//! `--mode auto`. Ctrl-C cancels the turn cleanly and exits 130.

use std::io::{BufRead, IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use crate::agent::{Agent, TurnEnd};
use crate::config::{ConfigLayer, LayerSource, Layers, ProviderKind};
use crate::editor::{BufferEdit, EditorPort, PermissionReply, PermissionRequest, Question, Update};
use crate::status::{PartStatus, SessionStatus};
use crate::store::Store;

#[derive(Debug, clap::Args)]
pub struct RunArgs {
    /// The workspace (default: the current directory's project).
    #[arg(long, value_name = "DIR")]
    pub cwd: Option<PathBuf>,
    /// openai, anthropic, ollama or scripted.
    #[arg(long)]
    pub provider: Option<String>,
    #[arg(long)]
    pub model: Option<String>,
    #[arg(long, value_name = "URL")]
    pub base_url: Option<String>,
    /// Replay this model script offline (implies --provider scripted).
    #[arg(long, value_name = "FILE")]
    pub script: Option<PathBuf>,
    /// build, plan or auto.
    #[arg(long)]
    pub mode: Option<String>,
    /// Continue this session (a unique prefix of its id is enough).
    #[arg(long, value_name = "ID")]
    pub session: Option<String>,
    /// One JSON object per line on stdout.
    #[arg(long)]
    pub json: bool,
    /// Allow every permission ask once (without a terminal, asks are refused otherwise).
    #[arg(long)]
    pub yes: bool,
    /// What to ask the agent.
    pub prompt: Vec<String>,
}

/// The terminal as the agent's editor.
struct Terminal {
    json: bool,
    yes: bool,
    tty: bool,
    out: Mutex<std::io::Stdout>,
    /// Whether the last thing written to stdout ended a line.
    at_line_start: Mutex<bool>,
    /// A spinner on stderr while the model or a tool is working (only on a terminal).
    spinner: Option<Spinner>,
}

/// The working indicator: shown while waiting, cleared before any output is written.
struct Spinner(Mutex<Option<indicatif::ProgressBar>>);

impl Spinner {
    fn show(&self, message: String) {
        let mut slot = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let bar = slot.get_or_insert_with(|| {
            let bar = indicatif::ProgressBar::new_spinner();
            bar.enable_steady_tick(std::time::Duration::from_millis(100));
            bar
        });
        bar.set_message(message);
    }

    fn clear(&self) {
        if let Some(bar) = self.0.lock().unwrap_or_else(|p| p.into_inner()).take() {
            bar.finish_and_clear();
        }
    }
}

impl Terminal {
    fn line(&self, value: serde_json::Value) {
        let mut out = self.out.lock().unwrap_or_else(|p| p.into_inner());
        let _ = writeln!(out, "{value}");
        let _ = out.flush();
    }

    fn text(&self, s: &str) {
        if let Some(spinner) = &self.spinner {
            spinner.clear();
        }
        let mut out = self.out.lock().unwrap_or_else(|p| p.into_inner());
        let _ = write!(out, "{s}");
        let _ = out.flush();
        *self.at_line_start.lock().unwrap_or_else(|p| p.into_inner()) = s.ends_with('\n');
    }

    fn own_line(&self, s: &str) {
        let start = *self.at_line_start.lock().unwrap_or_else(|p| p.into_inner());
        self.text(&format!("{}{s}\n", if start { "" } else { "\n" }));
    }
}

/// Asks on /dev/tty: y (once), a (always), n (reject), or a reason.
fn ask_tty(req: &PermissionRequest) -> PermissionReply {
    let Ok(mut tty) = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/tty")
    else {
        return PermissionReply::Reject {
            message: Some("no terminal to ask for permission".into()),
        };
    };
    let mut prompt = format!("\n{} wants permission: {}\n", req.tool, req.title);
    if let Some(diff) = &req.diff {
        prompt.push_str(diff);
    }
    if let Some(cmd) = &req.command {
        prompt.push_str(&format!("$ {cmd}\n"));
    }
    for p in &req.external_paths {
        prompt.push_str(&format!("  outside the workspace: {p}\n"));
    }
    prompt.push_str("[y] once  [a] always  [n] no  (or type a reason to refuse): ");
    let _ = tty.write_all(prompt.as_bytes());
    let mut answer = String::new();
    let _ = std::io::BufReader::new(&tty).read_line(&mut answer);
    match answer.trim() {
        "y" | "yes" => PermissionReply::Once,
        "a" | "always" => PermissionReply::Always,
        "n" | "no" | "" => PermissionReply::Reject { message: None },
        reason => PermissionReply::Reject {
            message: Some(reason.to_string()),
        },
    }
}

impl EditorPort for Terminal {
    fn publish(&self, update: Update) {
        if self.json {
            let mut v = serde_json::to_value(&update).unwrap_or_default();
            if let Update::ToolCall { .. } | Update::ToolResult { .. } = update {
                v["type"] = json!(if matches!(update, Update::ToolCall { .. }) {
                    "tool_call"
                } else {
                    "tool_result"
                });
            }
            self.line(v);
            return;
        }
        if let Some(spinner) = &self.spinner {
            match &update {
                Update::Status { status, .. } if *status == SessionStatus::Busy => {
                    spinner.show("thinking…".into())
                }
                Update::ToolResult { .. } => spinner.show("thinking…".into()),
                Update::Status { .. } | Update::Error { .. } => spinner.clear(),
                _ => {}
            }
        }
        match update {
            Update::Text { text, .. } => self.text(&text),
            Update::ToolCall {
                name,
                input,
                status: PartStatus::Running,
                ..
            } => {
                let shown = input
                    .get("filePath")
                    .or_else(|| input.get("command"))
                    .or_else(|| input.get("pattern"))
                    .or_else(|| input.get("url"))
                    .and_then(|v| v.as_str())
                    .unwrap_or("");
                self.own_line(&format!("→ {name} {shown}"));
                if let Some(spinner) = &self.spinner {
                    spinner.show(format!("running {name}…"));
                }
            }
            Update::ToolResult { status, output, .. } if status != PartStatus::Completed => {
                let first = output.lines().next().unwrap_or("");
                self.own_line(&format!("  ✗ {status}: {first}"));
            }
            Update::Retry {
                attempt,
                wait_ms,
                reason,
                ..
            } => {
                eprintln!(
                    "agent-lsp: {reason}; retry {attempt} in {:.1} s",
                    wait_ms as f64 / 1000.0
                );
            }
            Update::Error { message, .. } => eprintln!("agent-lsp: {message}"),
            _ => {}
        }
    }

    fn buffer_text(&self, _: &Path) -> Option<String> {
        None
    }

    fn apply_to_buffer<'a>(&'a self, _: &'a Path, _: &'a str) -> BoxFuture<'a, BufferEdit> {
        Box::pin(async { BufferEdit::NotOpen })
    }

    fn ask_permission<'a>(
        &'a self,
        request: &'a PermissionRequest,
    ) -> BoxFuture<'a, PermissionReply> {
        Box::pin(async move {
            if self.json {
                self.line(json!({"type": "permission", "event": "asked", "request": request}));
            }
            let reply = if self.yes && request.permission == "doom_loop" {
                // --yes approves actions, not a model stuck in a loop: it reads why and
                // has to try something else.
                PermissionReply::Reject {
                    message: Some(
                        "under --yes a call repeated three times is refused; try something else"
                            .into(),
                    ),
                }
            } else if self.yes {
                PermissionReply::Once
            } else if self.tty {
                if let Some(spinner) = &self.spinner {
                    spinner.clear();
                }
                let req = request.clone();
                tokio::task::spawn_blocking(move || ask_tty(&req))
                    .await
                    .unwrap_or(PermissionReply::Reject { message: None })
            } else {
                PermissionReply::Reject {
                    message: Some("permission could not be asked: no terminal (run with --yes or --mode auto to allow)".into()),
                }
            };
            if self.json {
                self.line(json!({"type": "permission", "event": "answered", "permission": request.permission, "reply": reply}));
            }
            reply
        })
    }

    fn ask_questions<'a>(
        &'a self,
        questions: &'a [Question],
    ) -> BoxFuture<'a, Result<Vec<Vec<String>>, crate::editor::Unanswered>> {
        Box::pin(async move {
            if !self.tty {
                return Err("no terminal to ask questions in".into());
            }
            let qs = questions.to_vec();
            tokio::task::spawn_blocking(move || {
                let mut tty = std::fs::OpenOptions::new()
                    .read(true)
                    .write(true)
                    .open("/dev/tty")
                    .map_err(|e| e.to_string())?;
                let mut answers = Vec::new();
                for q in qs {
                    let mut prompt = format!("\n{}\n", q.question);
                    for (i, o) in q.options.iter().enumerate() {
                        prompt.push_str(&format!("  {}. {} {}\n", i + 1, o.label, o.description));
                    }
                    prompt.push_str("> ");
                    tty.write_all(prompt.as_bytes())
                        .map_err(|e| e.to_string())?;
                    let mut line = String::new();
                    std::io::BufReader::new(&tty)
                        .read_line(&mut line)
                        .map_err(|e| e.to_string())?;
                    let line = line.trim();
                    let picked: Vec<String> = line
                        .split(',')
                        .filter_map(|s| s.trim().parse::<usize>().ok())
                        .filter_map(|n| q.options.get(n.wrapping_sub(1)).map(|o| o.label.clone()))
                        .collect();
                    answers.push(if picked.is_empty() {
                        vec![line.to_string()]
                    } else {
                        picked
                    });
                }
                Ok(answers)
            })
            .await
            .map_err(|e| e.to_string())?
        })
    }
}

/// Runs the command; returns the exit code (0 done, 1 error, 2 usage, 130 cancelled).
pub async fn run(args: RunArgs) -> anyhow::Result<i32> {
    let prompt = args.prompt.join(" ");
    if prompt.trim().is_empty() && args.session.is_none() {
        eprintln!("agent-lsp run: give a prompt (or --session ID to run its pending input)");
        return Ok(2);
    }
    let cwd = match &args.cwd {
        Some(d) => d.clone(),
        None => std::env::current_dir()?,
    };
    let cwd = std::fs::canonicalize(&cwd).map_err(|e| anyhow::anyhow!("{}: {e}", cwd.display()))?;
    let workspace = crate::workspace::root_for_file(&cwd.join("."));

    let mut layers = Layers::default();
    for problem in layers.load_files(Some(&workspace)) {
        eprintln!("{problem}");
    }
    let provider = match (&args.script, &args.provider) {
        (Some(_), _) => Some(ProviderKind::Scripted),
        (None, Some(name)) => match serde_json::from_value::<ProviderKind>(json!(name)) {
            Ok(kind) => Some(kind),
            Err(_) => {
                eprintln!(
                    "agent-lsp run: unknown provider {name:?} (openai, anthropic, ollama, scripted)"
                );
                return Ok(2);
            }
        },
        (None, None) => None,
    };
    let cli_layer = ConfigLayer {
        provider,
        model: args.model.clone(),
        base_url: args.base_url.clone(),
        script: args.script.clone(),
        mode: args.mode.clone(),
        ..Default::default()
    };
    // Command-line flags are the top layer.
    let _ = layers.set(LayerSource::CommandLine, None, Ok(cli_layer));
    let config = layers.effective();
    let provider = match crate::provider::from_config(&config) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("agent-lsp run: {e}");
            return Ok(
                if config.provider.is_none() || config.provider == Some(ProviderKind::Scripted) {
                    2
                } else {
                    1
                },
            );
        }
    };
    let terminal = Arc::new(Terminal {
        json: args.json,
        yes: args.yes,
        tty: std::io::stdin().is_terminal() && std::io::stderr().is_terminal(),
        out: Mutex::new(std::io::stdout()),
        at_line_start: Mutex::new(true),
        spinner: (!args.json && std::io::stderr().is_terminal()).then(|| Spinner(Mutex::new(None))),
    });
    let store = Arc::new(Mutex::new(Store::open_default()?));
    let agent = Agent::new(
        store.clone(),
        config,
        &workspace,
        Some(Arc::from(provider)),
        terminal.clone(),
    );
    let recovered = agent.recover().map_err(|e| anyhow::anyhow!(e))?;
    if recovered > 0 {
        tracing::info!(
            recovered,
            "marked tool calls interrupted by a previous crash as failed"
        );
    }
    let session = match &args.session {
        Some(prefix) => Some(super::session::resolve_id(
            &store.lock().unwrap_or_else(|p| p.into_inner()),
            prefix,
        )?),
        None => None,
    };
    let sid = if prompt.trim().is_empty() {
        session.expect("checked above")
    } else {
        agent
            .prompt(session.as_deref(), &prompt, None)
            .await
            .map_err(|e| anyhow::anyhow!(e))?
            .0
    };
    terminal.publish(Update::Session {
        session_id: sid.clone(),
    });

    let cancel = CancellationToken::new();
    let on_signal = cancel.clone();
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            on_signal.cancel();
        }
    });
    let outcome = agent.drive(&sid, &cancel).await;
    let end = if cancel.is_cancelled() {
        TurnEnd::Cancelled
    } else {
        outcome.end
    };
    if args.json {
        terminal.line(
            json!({"type": "done", "session_id": sid, "stop_reason": end, "error": outcome.error}),
        );
    } else {
        terminal.own_line("");
        if let (TurnEnd::Cancelled | TurnEnd::MaxTokens | TurnEnd::Refusal, Some(e)) =
            (end, &outcome.error)
        {
            eprintln!("agent-lsp: {e}");
        }
    }
    Ok(match end {
        TurnEnd::EndTurn | TurnEnd::MaxSteps => 0,
        TurnEnd::MaxTokens => 3,
        TurnEnd::Refusal => 4,
        TurnEnd::Cancelled => 130,
        TurnEnd::Error => 1,
    })
}
