//! `agent-lsp doctor`: what is configured, where data lives, whether it all works.

use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use serde::Serialize;

use crate::config::{Config, ConfigLayer, LayerSource, LayerState, Layers, ProviderKind};
use crate::store::Store;

#[derive(Debug, Serialize)]
struct Check {
    name: std::borrow::Cow<'static, str>,
    ok: bool,
    detail: String,
}

#[derive(Debug, Serialize)]
struct Report {
    version: &'static str,
    workspace: PathBuf,
    layers: Vec<LayerState>,
    effective: Config,
    /// Each MCP server: its transport, state and tool count.
    mcp: Vec<crate::mcp::Report>,
    checks: Vec<Check>,
}

pub async fn run(cwd: Option<PathBuf>, json: bool, settings: Option<&str>) -> anyhow::Result<i32> {
    let cwd = match cwd {
        Some(dir) => dir,
        None => std::env::current_dir()?,
    };
    let workspace = crate::workspace::root_for_file(&cwd.join("."));
    let mut layers = Layers::default();
    let mut config_errors = layers.load_files(Some(&workspace));
    if let Some(text) = settings {
        let parsed = serde_json::from_str(text)
            .map_err(|e| format!("--settings is not JSON: {e}"))
            .and_then(|value| ConfigLayer::from_json(&value));
        if let Err(e) = layers.set(LayerSource::InitializationOptions, None, parsed) {
            config_errors.push(e);
        }
    }
    let effective = layers.effective();

    let mut checks = vec![Check {
        name: "config".into(),
        ok: config_errors.is_empty(),
        detail: if config_errors.is_empty() {
            format!("{} layer(s) read", layers.states().len())
        } else {
            config_errors.join("; ")
        },
    }];
    checks.push(data_dir_check());
    checks.push(database_check());
    if let Some(check) = api_key_check(&effective) {
        checks.push(check);
    }
    checks.push(provider_check(&effective).await);
    if let Some(check) = window_check(&effective).await {
        checks.push(check);
    }
    let mcp = crate::mcp::check_all(&effective.mcp).await;
    checks.extend(mcp.iter().map(mcp_check));

    let report = Report {
        version: env!("CARGO_PKG_VERSION"),
        workspace,
        layers: layers.states().to_vec(),
        effective,
        mcp,
        checks,
    };
    let mut out = std::io::stdout().lock();
    if json {
        serde_json::to_writer_pretty(&mut out, &report)?;
        writeln!(out)?;
    } else {
        write_report(&mut out, &report)?;
    }
    Ok(if report.checks.iter().all(|c| c.ok) {
        0
    } else {
        1
    })
}

fn write_report(out: &mut impl Write, r: &Report) -> std::io::Result<()> {
    writeln!(out, "agent-lsp {}", r.version)?;
    writeln!(out, "workspace      {}", r.workspace.display())?;
    writeln!(
        out,
        "user config    {}",
        crate::paths::user_config_file().display()
    )?;
    for l in &r.layers {
        let path = l
            .path
            .as_ref()
            .map(|p| format!(" {}", p.display()))
            .unwrap_or_default();
        let state = l.error.as_deref().unwrap_or("ok");
        writeln!(out, "  layer {:?}{path} ({state})", l.source)?;
    }
    let c = &r.effective;
    let provider = c
        .provider
        .map(|p| format!("{p:?}").to_lowercase())
        .unwrap_or_else(|| "none (the offline demo uses the scripted model)".into());
    writeln!(out, "provider       {provider}")?;
    if let Some(m) = &c.model {
        writeln!(out, "model          {m}")?;
    }
    if let Some(u) = &c.base_url {
        writeln!(out, "base url       {u}")?;
    }
    writeln!(
        out,
        "mode           {}  (max {} steps)",
        c.mode, c.max_steps
    )?;
    writeln!(out, "data dir       {}", crate::paths::data_dir().display())?;
    for check in &r.checks {
        let mark = if check.ok { "ok  " } else { "FAIL" };
        writeln!(out, "[{mark}] {:<9} {}", check.name, check.detail)?;
    }
    Ok(())
}

/// The server writes its database, snapshots and logs here; a read-only home breaks all of it.
/// One MCP server's line: started and its tools counted, or why not.
fn mcp_check(r: &crate::mcp::Report) -> Check {
    let detail = match (r.state, &r.reason) {
        ("failed", Some(why)) => format!("{} failed: {why}", r.transport),
        ("running", _) => format!("{}, {} tool(s)", r.transport, r.tools),
        (state, _) => format!("{}, {state}", r.transport),
    };
    Check {
        name: format!("mcp {}", r.name).into(),
        ok: r.state != "failed",
        detail,
    }
}

fn data_dir_check() -> Check {
    let dir = crate::paths::data_dir();
    let probe = dir.join(format!(".doctor-{}", std::process::id()));
    let result = std::fs::create_dir_all(&dir)
        .and_then(|()| std::fs::write(&probe, b"ok"))
        .and_then(|()| std::fs::remove_file(&probe));
    Check {
        name: "data dir".into(),
        ok: result.is_ok(),
        detail: match result {
            Ok(()) => format!("{} is writable", dir.display()),
            Err(e) => format!("{} is not writable: {e}", dir.display()),
        },
    }
}

/// The variable named by `api_key_env`, in the environment the server would run in. A
/// server on this machine (Ollama, llama.cpp…) usually needs no key, so there it only informs.
fn api_key_check(c: &Config) -> Option<Check> {
    let var = c.api_key_env.as_deref()?;
    let set = std::env::var_os(var).is_some_and(|v| !v.is_empty());
    let local = c.base_url.as_deref().is_some_and(is_loopback);
    let detail = match (set, local) {
        (true, _) => format!("${var} is set"),
        (false, true) => format!("${var} is not set (a local server usually needs none)"),
        (false, false) => {
            format!("${var} is not set in this environment (the editor's, when it runs the check)")
        }
    };
    Some(Check {
        name: "api key".into(),
        ok: set || local,
        detail,
    })
}

fn is_loopback(url: &str) -> bool {
    reqwest::Url::parse(url).is_ok_and(|u| match u.host() {
        Some(url::Host::Domain(d)) => d == "localhost",
        Some(url::Host::Ipv4(ip)) => ip.is_loopback(),
        Some(url::Host::Ipv6(ip)) => ip.is_loopback(),
        None => false,
    })
}

fn database_check() -> Check {
    let result = Store::open_default().and_then(|store| {
        let health = store.integrity_check()?;
        let events = store.event_count()?;
        let sessions = store.sessions()?.len();
        Ok((store.path().to_path_buf(), health, events, sessions))
    });
    match result {
        Ok((path, health, events, sessions)) => Check {
            name: "database".into(),
            ok: health == "ok",
            detail: format!(
                "{}: integrity {health}, {events} events, {sessions} sessions",
                path.display()
            ),
        },
        Err(e) => Check {
            name: "database".into(),
            ok: false,
            detail: e.to_string(),
        },
    }
}

/// The model's window and where it comes from: the configuration, the server, or the
/// model's name (nothing for the scripted model).
async fn window_check(c: &Config) -> Option<Check> {
    if matches!(c.provider, None | Some(ProviderKind::Scripted)) {
        return None;
    }
    let model = c.model.clone().unwrap_or_else(|| "default".into());
    let probe = match (c.context_window, crate::provider::from_config(c)) {
        (None, Ok(provider)) => provider.window(&model).await,
        _ => None,
    };
    let found = probe.as_ref().and_then(|p| p.window);
    let limits =
        crate::tokens::Limits::for_model(&model, c.context_window.or(found), c.max_output_tokens);
    let source = match (&probe, found) {
        _ if c.context_window.is_some() => "configured".to_string(),
        (Some(p), Some(_)) => format!("from {}", p.source),
        _ if limits.known => "from the model's name".to_string(),
        (Some(p), None) => format!("unknown: {}; assumed, set context_window", p.source),
        (None, _) => "unknown; assumed, set context_window".to_string(),
    };
    let mut detail = format!(
        "{} tokens ({source}), answers up to {}",
        limits.context_window, limits.max_output_tokens
    );
    let warning = probe.and_then(|p| p.warning);
    if let Some(w) = &warning {
        detail.push_str(": ");
        detail.push_str(w);
    }
    Some(Check {
        name: "window".into(),
        ok: warning.is_none(),
        detail,
    })
}

async fn provider_check(c: &Config) -> Check {
    let fail = |detail: String| Check {
        name: "provider".into(),
        ok: false,
        detail,
    };
    let Some(kind) = c.provider else {
        return Check {
            name: "provider".into(),
            ok: true,
            detail: "none configured".into(),
        };
    };
    if kind == ProviderKind::Scripted {
        return match &c.script {
            Some(path) if path.is_file() => Check {
                name: "provider".into(),
                ok: true,
                detail: format!("scripted: {}", path.display()),
            },
            Some(path) => fail(format!("scripted: {} is not a file", path.display())),
            None => fail("scripted provider without `script`".into()),
        };
    }
    let Some(base) = &c.base_url else {
        return fail("no base_url".into());
    };
    let key = c
        .api_key_env
        .as_deref()
        .and_then(|var| std::env::var(var).ok())
        .filter(|k| !k.is_empty());
    let url = match kind {
        ProviderKind::Anthropic => format!("{}/v1/models", base.trim_end_matches('/')),
        _ => format!("{}/models", base.trim_end_matches('/')),
    };
    let client = match reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
    {
        Ok(c) => c,
        Err(e) => return fail(format!("cannot build an HTTP client: {e}")),
    };
    let mut request = client.get(&url);
    if let Some(key) = key {
        request = match kind {
            ProviderKind::Anthropic => request
                .header("x-api-key", key)
                .header("anthropic-version", "2023-06-01"),
            _ => request.bearer_auth(key),
        };
    }
    let started = Instant::now();
    match request.send().await {
        Ok(resp) => {
            let status = resp.status();
            let ms = started.elapsed().as_millis();
            let auth_hint = match (status.as_u16(), &c.api_key_env) {
                (401 | 403, Some(var)) => format!(" (check ${var})"),
                _ => String::new(),
            };
            Check {
                name: "provider".into(),
                ok: status.is_success(),
                detail: format!("GET {url}: HTTP {status} in {ms} ms{auth_hint}"),
            }
        }
        Err(e) => fail(format!("GET {url}: not reachable: {e}")),
    }
}
