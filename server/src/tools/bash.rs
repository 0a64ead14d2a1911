//! `bash`: runs a command in its own process group, stdout and stderr merged in order.
//! On timeout or cancel the whole group gets SIGTERM, then SIGKILL after a grace period;
//! processes the command left running in the background are ended the same way when it
//! exits, so nothing outlives the call.

use std::io::Read as _;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::{Need, Prepared, ToolContext, ToolError, ToolOutput, TypedTool};
use crate::editor::PermissionRequest;
use crate::permission::boundary::Boundary;

const DEFAULT_TIMEOUT_MS: u64 = 120_000;
const MAX_TIMEOUT_MS: u64 = 600_000;
const GRACE: Duration = Duration::from_secs(2);
/// Output kept in memory; the rest is dropped with a note (truncation keeps far less anyway).
const MAX_CAPTURE: usize = 64 * 1024 * 1024;

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Args {
    /// The command line, run with `bash -c`.
    pub command: String,
    /// What the command does, in five to ten words.
    #[serde(default)]
    pub description: Option<String>,
    /// Timeout in milliseconds (default 120000, at most 600000).
    #[serde(default)]
    pub timeout: Option<u64>,
    /// The folder to run in (default: the workspace root); must be inside the workspace.
    #[serde(default)]
    pub workdir: Option<String>,
}

pub struct Bash;

/// Programs whose first argument names a sub-command ("git status", "cargo test").
const TWO_WORD_PROGRAMS: &[&str] = &[
    "git",
    "cargo",
    "npm",
    "pnpm",
    "yarn",
    "bun",
    "go",
    "docker",
    "kubectl",
    "pip",
    "uv",
    "make",
    "just",
    "rustup",
    "npx",
    "dotnet",
    "mvn",
    "gradle",
    "poetry",
    "deno",
    "helm",
    "brew",
    "apt",
    "apt-get",
    "systemctl",
];

/// The "always" pattern for a segment: its command family, e.g. `git status *`.
pub fn family(segment: &str) -> String {
    let words: Vec<&str> = segment.split_whitespace().collect();
    let n = match words.first() {
        Some(w)
            if TWO_WORD_PROGRAMS.contains(w) && words.len() > 1 && !words[1].starts_with('-') =>
        {
            2
        }
        _ => 1,
    };
    format!("{} *", words[..n.min(words.len())].join(" "))
}

/// Arguments that name paths outside the workspace (`cd /etc`, `cat ~/.ssh/id_rsa`,
/// `> /tmp/x`). The usual device files are not worth a flag.
pub fn external_paths(command: &str, boundary: &Boundary, workdir: &Path) -> Vec<String> {
    let tokens = shlex::split(command)
        .unwrap_or_else(|| command.split_whitespace().map(String::from).collect());
    let mut out = Vec::new();
    for t in tokens {
        let t =
            t.trim_start_matches(|c: char| c.is_ascii_digit() || c == '>' || c == '<' || c == '&');
        let looks_like_path =
            t.starts_with('/') || t.starts_with('~') || t.starts_with("..") || t.contains("/..");
        if !looks_like_path || t.starts_with("/dev/") {
            continue;
        }
        let candidate = if t.starts_with('/') || t.starts_with('~') {
            t.to_string()
        } else {
            workdir.join(t).to_string_lossy().into_owned()
        };
        if let Ok(r) = boundary.resolve(&candidate)
            && !r.inside
        {
            let shown = r.path.to_string_lossy().into_owned();
            if !out.contains(&shown) {
                out.push(shown);
            }
        }
    }
    out
}

fn group_alive(pgid: Pid) -> bool {
    killpg(pgid, None).is_ok()
}

/// SIGTERM to the group, then SIGKILL to whatever is left after the grace period.
async fn end_group(pgid: Pid) {
    if killpg(pgid, Signal::SIGTERM).is_err() {
        return; // already gone
    }
    let deadline = tokio::time::Instant::now() + GRACE;
    while tokio::time::Instant::now() < deadline {
        if !group_alive(pgid) {
            return;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let _ = killpg(pgid, Signal::SIGKILL);
}

enum Ending {
    Exited(Option<i32>),
    TimedOut,
    Cancelled,
}

impl TypedTool for Bash {
    type Args = Args;
    const NAME: &'static str = "bash";
    const CHANGES_UNREPORTED_FILES: bool = true;

    fn description(&self, _: &ToolContext) -> String {
        "Runs a shell command (bash -c) in the workspace and returns its combined output and \
         exit code. Default timeout 2 minutes (at most 10). Long output is cut, keeping the \
         start and the end. Do not use it to read, search or edit files: use the read, grep, \
         glob and edit tools. Use it to build, test, lint and inspect (git status, \
         git diff); no interactive commands; never commit or push unless the user asks."
            .into()
    }

    fn prepare(&self, args: Args, ctx: &ToolContext) -> Result<Prepared, ToolError> {
        if args.command.trim().is_empty() {
            return Err(ToolError::new("the command is empty"));
        }
        let mut needs = Vec::new();
        let workdir = ctx.resolve(
            args.workdir.as_deref().unwrap_or("."),
            false,
            &mut needs,
            Self::NAME,
        )?;
        if !workdir.real.is_dir() {
            return Err(ToolError::new(format!(
                "workdir {} is not a folder",
                ctx.display(&workdir)
            )));
        }
        // One parse of the line: every command anywhere in it, what cannot be known before it
        // runs, and the files its redirections write.
        let analysis = crate::permission::shell::analyse(&args.command);
        let mut patterns = analysis.commands.clone();
        patterns.extend(analysis.opaque.iter().map(|o| o.pattern.clone()));
        patterns.dedup();
        // "Always" saves a command's family, and an opaque command only as itself.
        let mut always: Vec<String> = analysis.commands.iter().map(|s| family(s)).collect();
        always.extend(analysis.opaque.iter().map(|o| o.pattern.clone()));
        always.dedup();
        let why = analysis.opaque.first().map(|o| o.why);
        let title = args
            .description
            .clone()
            .unwrap_or_else(|| args.command.clone());
        needs.push(Need {
            request: PermissionRequest {
                permission: "bash".into(),
                tool: Self::NAME.into(),
                title: match why {
                    Some(why) => format!("{title} (not checkable before it runs: {why})"),
                    None => title,
                },
                patterns: if patterns.is_empty() {
                    vec![args.command.clone()]
                } else {
                    patterns
                },
                always,
                command: Some(args.command.clone()),
                workdir: Some(workdir.path.clone()),
                external_paths: external_paths(&args.command, &ctx.boundary, &workdir.path),
                opaque: analysis.opaque,
                ..Default::default()
            },
        });
        // A redirection or `tee` writes a file: an edit, checked as one.
        for target in &analysis.writes {
            let r = ctx.resolve(
                &workdir.path.join(target).to_string_lossy(),
                false,
                &mut needs,
                Self::NAME,
            )?;
            let shown = ctx.display(&r);
            needs.push(Need {
                request: PermissionRequest {
                    permission: "edit".into(),
                    tool: Self::NAME.into(),
                    title: format!("bash writes {shown}"),
                    patterns: vec![shown.clone()],
                    always: vec![shown],
                    command: Some(args.command.clone()),
                    ..Default::default()
                },
            });
        }
        let timeout = Duration::from_millis(
            args.timeout
                .unwrap_or(DEFAULT_TIMEOUT_MS)
                .clamp(1, MAX_TIMEOUT_MS),
        );
        Ok(Prepared::new(needs, move |ctx| {
            Box::pin(async move { run(&args.command, &workdir.real, timeout, ctx).await })
        }))
    }
}

async fn run(
    command: &str,
    workdir: &Path,
    timeout: Duration,
    ctx: &ToolContext,
) -> Result<ToolOutput, ToolError> {
    let (mut reader, writer) = std::io::pipe()?;
    let mut cmd = tokio::process::Command::new("bash");
    cmd.arg("-c")
        .arg(command)
        .current_dir(workdir)
        .stdin(std::process::Stdio::null())
        .stdout(writer.try_clone()?)
        .stderr(writer)
        .process_group(0);
    // No provider or cloud credentials in what the model can print.
    ctx.secrets.scrub(&mut cmd);
    let mut child = cmd
        .spawn()
        .map_err(|e| ToolError::new(format!("cannot start bash: {e}")))?;
    drop(cmd); // closes our copies of the pipe's write end
    let pgid = Pid::from_raw(child.id().unwrap_or(0) as i32);

    let captured = Arc::new(Mutex::new(Vec::new()));
    let sink = captured.clone();
    let reading = tokio::task::spawn_blocking(move || {
        let mut buf = [0u8; 64 * 1024];
        let mut dropped = 0usize;
        while let Ok(n) = reader.read(&mut buf) {
            if n == 0 {
                break;
            }
            let mut out = sink.lock().unwrap_or_else(|p| p.into_inner());
            let room = MAX_CAPTURE.saturating_sub(out.len());
            out.extend_from_slice(&buf[..n.min(room)]);
            dropped += n.saturating_sub(room);
        }
        dropped
    });

    let ending = tokio::select! {
        status = child.wait() => Ending::Exited(status.ok().and_then(|s| s.code())),
        _ = tokio::time::sleep(timeout) => Ending::TimedOut,
        _ = ctx.cancel.cancelled() => Ending::Cancelled,
    };
    // Whatever is still running in the group (the command itself after a timeout or cancel,
    // or background jobs it left) is ended, so the pipe closes and nothing is orphaned.
    end_group(pgid).await;
    let _ = child.wait().await;
    let dropped = tokio::time::timeout(GRACE, reading)
        .await
        .ok()
        .and_then(|r| r.ok())
        .unwrap_or(0);

    let bytes = std::mem::take(&mut *captured.lock().unwrap_or_else(|p| p.into_inner()));
    let mut output = String::from_utf8_lossy(&bytes).into_owned();
    if dropped > 0 {
        output.push_str(&format!("\n({dropped} more bytes of output were not kept)"));
    }
    let (note, code) = match ending {
        Ending::Exited(Some(code)) => (format!("exit code {code}"), Some(code)),
        Ending::Exited(None) => ("killed by a signal".to_string(), None),
        Ending::TimedOut => (
            format!(
                "timed out after {} ms; the command was stopped",
                timeout.as_millis()
            ),
            None,
        ),
        Ending::Cancelled => {
            return Err(ToolError::new(format!(
                "interrupted: the command was cancelled\n{output}"
            )));
        }
    };
    if !output.is_empty() && !output.ends_with('\n') {
        output.push('\n');
    }
    output.push_str(&format!("({note})"));
    Ok(ToolOutput {
        title: command.to_string(),
        output,
        metadata: json!({"exitCode": code}),
        keep_tail: true,
        ..Default::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_and_families() {
        let commands = |line| crate::permission::shell::analyse(line).commands;
        assert_eq!(
            commands("git status && rm -rf build; ls | wc -l"),
            ["git status", "rm -rf build", "ls", "wc -l"]
        );
        let a =
            crate::permission::shell::analyse("echo \"a;b\" && make 2>&1 | tee log &\ncargo test");
        assert_eq!(a.commands, ["echo a;b", "make", "tee log", "cargo test"]);
        assert_eq!(a.writes, ["log"]);
        assert_eq!(family("git status --short"), "git status *");
        assert_eq!(family("git --no-pager log"), "git *");
        assert_eq!(family("ls -la"), "ls *");
        assert_eq!(family("npm run build"), "npm run *");
    }

    #[test]
    fn flags_paths_outside() {
        let dir = tempfile::tempdir().unwrap();
        let b = Boundary::new(dir.path());
        let flagged = external_paths(
            "cd /etc && cat ~/.ssh/id_rsa > /tmp/x 2>/dev/null; cat src/a ../up",
            &b,
            b.root(),
        );
        assert!(flagged.contains(&"/etc".to_string()), "{flagged:?}");
        assert!(
            flagged.iter().any(|p| p.ends_with(".ssh/id_rsa")),
            "{flagged:?}"
        );
        assert!(flagged.contains(&"/tmp/x".to_string()), "{flagged:?}");
        assert!(
            flagged
                .iter()
                .any(|p| !p.starts_with(dir.path().to_str().unwrap()) && p.ends_with("/up")),
            "{flagged:?}"
        );
        assert!(
            !flagged.iter().any(|p| p.starts_with("/dev")),
            "{flagged:?}"
        );
    }
}
