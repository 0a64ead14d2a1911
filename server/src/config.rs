//! Layered configuration.
//!
//! Layers, later wins: built-in defaults < user file (`$XDG_CONFIG_HOME/agent-lsp/config.toml`)
//! < workspace file (`<root>/.agent-lsp.toml`) < `initializationOptions` <
//! `workspace/didChangeConfiguration`. Every layer is one [`ConfigLayer`]: TOML files and
//! JSON from the client share the same serde schema, which refuses unknown keys by name.
//! A layer that fails to parse keeps its last good value, so a typo never takes the server down.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// Which model API to talk to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProviderKind {
    /// OpenAI Chat Completions and every server that speaks it.
    Openai,
    Anthropic,
    /// OpenAI-compatible, at Ollama's default address.
    Ollama,
    /// A model script replayed in process (offline demo, tests).
    Scripted,
}

impl ProviderKind {
    pub fn default_base_url(self) -> Option<&'static str> {
        match self {
            Self::Openai => Some("https://api.openai.com/v1"),
            Self::Anthropic => Some("https://api.anthropic.com"),
            Self::Ollama => Some("http://127.0.0.1:11434/v1"),
            Self::Scripted => None,
        }
    }

    /// The environment variable that holds the key unless `api_key_env` names another.
    pub fn default_api_key_env(self) -> Option<&'static str> {
        match self {
            Self::Openai => Some("OPENAI_API_KEY"),
            Self::Anthropic => Some("ANTHROPIC_API_KEY"),
            Self::Ollama | Self::Scripted => None,
        }
    }
}

/// What a permission rule decides.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    Allow,
    Ask,
    Deny,
}

/// One permission key's rule: a single action, or glob pattern → action.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum PermissionRule {
    Action(Action),
    Patterns(BTreeMap<String, Action>),
}

/// One configuration layer; every key optional. Keys are snake_case in TOML and JSON.
/// One MCP server: a local process on stdio, or a remote one over Streamable HTTP.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum McpServer {
    Local {
        /// The program and its arguments.
        command: Vec<String>,
        /// Variables added to the server's environment.
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        environment: BTreeMap<String, String>,
        #[serde(default = "yes")]
        enabled: bool,
        /// How long starting it and each call may take (10,000 ms).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        timeout_ms: Option<u64>,
    },
    Remote {
        url: String,
        /// Sent with every request; `{env:NAME}` is replaced by that variable (secrets stay
        /// in the environment).
        #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
        headers: BTreeMap<String, String>,
        #[serde(default = "yes")]
        enabled: bool,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        timeout_ms: Option<u64>,
    },
}

fn yes() -> bool {
    true
}

impl McpServer {
    pub const DEFAULT_TIMEOUT_MS: u64 = 10_000;

    pub fn enabled(&self) -> bool {
        match self {
            Self::Local { enabled, .. } | Self::Remote { enabled, .. } => *enabled,
        }
    }

    pub fn timeout(&self) -> std::time::Duration {
        let ms = match self {
            Self::Local { timeout_ms, .. } | Self::Remote { timeout_ms, .. } => *timeout_ms,
        };
        std::time::Duration::from_millis(ms.unwrap_or(Self::DEFAULT_TIMEOUT_MS).max(1))
    }

    /// `stdio` or `http`, for reports.
    pub fn transport(&self) -> &'static str {
        match self {
            Self::Local { .. } => "stdio",
            Self::Remote { .. } => "http",
        }
    }

    fn validate(&self) -> Result<(), String> {
        match self {
            Self::Local { command, .. } if command.first().is_none_or(|c| c.is_empty()) => Err(
                "`command` needs the program to run, e.g. [\"npx\", \"-y\", \"some-server\"]"
                    .into(),
            ),
            Self::Remote { url, .. }
                if !(url.starts_with("http://") || url.starts_with("https://")) =>
            {
                Err(format!("`url` must be an http(s) URL, not {url:?}"))
            }
            _ => Ok(()),
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ConfigLayer {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub provider: Option<ProviderKind>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub model: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// The name of the environment variable that holds the API key (never the key itself).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    /// The model script for the `scripted` provider.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub script: Option<PathBuf>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_steps: Option<u32>,
    /// `build`, `plan` or `auto`; any other value denies every tool.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mode: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<bool>,
    /// Folder names snapshots do not enter (dependencies, build output, caches); a revert
    /// names what a turn changed in them as not restorable.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snapshot_skip: Option<Vec<String>>,
    /// Files that git does not track and that are larger than this are not snapshotted
    /// (2 MiB); a revert names them as not restorable.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub snapshot_max_file_bytes: Option<u64>,
    /// More environment variables that commands the agent runs never inherit (beside the
    /// provider and cloud credential variables, see `secrets.rs`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scrub_env: Option<Vec<String>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub permission: Option<BTreeMap<String, PermissionRule>>,
    /// Hosts webfetch may reach even though they resolve to private or loopback addresses.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub webfetch_allow_hosts: Option<Vec<String>>,
    /// Tools to leave out of every request (`[tools] webfetch = false`): fewer definitions
    /// for a small window or a model that misuses them.
    pub tools: Option<BTreeMap<String, bool>>,
    /// MCP servers by name (`[mcp.NAME]`); a higher layer's entry replaces a lower one's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mcp: Option<BTreeMap<String, McpServer>>,
    /// The model's context window in tokens (default: known from the model's name, else
    /// 32,768).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_window: Option<u32>,
    /// The most tokens one answer may take (default: from the model's name, else 4,096;
    /// never more than half the window).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_output_tokens: Option<u32>,
    /// The model of the observer and reflector calls (default: the session's model).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub distill_model: Option<String>,
    /// How many undistilled messages make a distillation due after a turn (8).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub distill_min_messages: Option<u32>,
    /// The most messages one observer call distils (50).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub distill_max_segment: Option<u32>,
    /// Whether the LSP server dreams (extracts memory facts from a session) when a session
    /// goes idle and every `dream_after_turns` turns (true).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dream: Option<bool>,
    /// How long a session is quiet before it is dreamt on, in seconds (300).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dream_idle_seconds: Option<u64>,
    /// How many turns since the last dream make one due even without a pause (8).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub dream_after_turns: Option<u32>,
    /// The embeddings model that reranks surfaced memory facts (none: no rerank), e.g.
    /// `nomic-embed-text` on Ollama.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub embeddings_model: Option<String>,
    /// Where its OpenAI-compatible `/embeddings` endpoint is (default: `base_url`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub embeddings_base_url: Option<String>,
    /// The variable that holds its API key (default: `api_key_env`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub embeddings_api_key_env: Option<String>,
    /// How a request shares the model's window, as fractions of it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context_budget: Option<BudgetLayer>,
    /// The journal (`[journal] enabled = true`; off by default).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub journal: Option<JournalLayer>,
    /// Long-term knowledge: the curator, its note and the agents file export.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub knowledge: Option<KnowledgeLayer>,
    /// The session state file, relative to the workspace (`.agent-lsp/STATE.md`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state_file: Option<PathBuf>,
}

/// The journal's keys, each optional in a layer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct JournalLayer {
    /// Whether the model has the journal tools (false: silent collection is worse than
    /// explicit collection).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
}

/// Long-term knowledge's keys, each optional in a layer.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct KnowledgeLayer {
    /// The curator, the knowledge note and the export (true; recall and distillation stay
    /// either way).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub enabled: Option<bool>,
    /// The file of the export, relative to the workspace (`AGENTS.md`; e.g. `CLAUDE.md`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agents_file: Option<PathBuf>,
    /// Whether a curation that added entries exports them too (false: the server does not
    /// write into the repository unasked).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub auto_export: Option<bool>,
    /// Whether entries that hold in every project are shown in each (true).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cross_project: Option<bool>,
    /// How many prompts since the last curation make one due (10).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub curate_after_turns: Option<u32>,
    /// How many entries a project holds before the curator merges them (25).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub consolidate_at: Option<u32>,
}

/// The shares of the window, each optional in a layer.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BudgetLayer {
    #[serde(skip_serializing_if = "Option::is_none")]
    pub distilled: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub raw: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub output: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub knowledge: Option<f64>,
}

/// How a request shares the window: the distilled prefix, the raw recent messages, the
/// answer's reserve, and long-term knowledge (the stable prefix: instructions, memory).
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Budget {
    pub distilled: f64,
    pub raw: f64,
    pub output: f64,
    pub knowledge: f64,
}

impl Default for Budget {
    fn default() -> Self {
        Self {
            distilled: 0.25,
            raw: 0.40,
            output: 0.25,
            knowledge: 0.10,
        }
    }
}

impl Budget {
    fn from_layer(layer: Option<BudgetLayer>) -> Self {
        let d = Self::default();
        let l = layer.unwrap_or_default();
        let b = Self {
            distilled: l.distilled.unwrap_or(d.distilled),
            raw: l.raw.unwrap_or(d.raw),
            output: l.output.unwrap_or(d.output),
            knowledge: l.knowledge.unwrap_or(d.knowledge),
        };
        // Shares that add up to more than the window are scaled down to fit it.
        let sum = b.distilled + b.raw + b.output + b.knowledge;
        if sum <= 1.0 + 1e-9 {
            return b;
        }
        tracing::warn!("context_budget adds up to {sum:.2} of the window: scaled to 1.0");
        Self {
            distilled: b.distilled / sum,
            raw: b.raw / sum,
            output: b.output / sum,
            knowledge: b.knowledge / sum,
        }
    }
}

impl ConfigLayer {
    pub fn from_toml(text: &str) -> Result<Self, String> {
        let layer: Self = toml::from_str(text).map_err(|e| e.to_string().trim_end().to_string())?;
        layer.validate()
    }

    /// Values serde cannot check: the budget's shares.
    fn validate(self) -> Result<Self, String> {
        for (name, server) in self.mcp.iter().flatten() {
            server
                .validate()
                .map_err(|why| format!("mcp.{name}: {why}"))?;
        }
        if let Some(b) = &self.context_budget {
            let shares = [
                ("distilled", b.distilled),
                ("raw", b.raw),
                ("output", b.output),
                ("knowledge", b.knowledge),
            ];
            for (name, share) in shares {
                if let Some(v) = share
                    && !(v > 0.0 && v < 1.0)
                {
                    return Err(format!(
                        "context_budget.{name} = {v}: a share of the window is between 0 and 1"
                    ));
                }
            }
        }
        Ok(self)
    }

    /// Client settings. `null` is an empty layer; settings nested under an `agent-lsp` key
    /// (as some clients send `workspace/didChangeConfiguration`) are unwrapped.
    pub fn from_json(value: &serde_json::Value) -> Result<Self, String> {
        let value = match value {
            serde_json::Value::Null => return Ok(Self::default()),
            serde_json::Value::Object(map) if map.len() == 1 => map
                .get("agent-lsp")
                .or_else(|| map.get("agent_lsp"))
                .unwrap_or(value),
            _ => value,
        };
        let layer: Self = serde_json::from_value(value.clone()).map_err(|e| e.to_string())?;
        layer.validate()
    }

    /// `other` on top of `self`: its set keys win; permission maps merge per key.
    fn overlay(&mut self, other: &ConfigLayer) {
        macro_rules! take {
            ($($field:ident),*) => {$(
                if other.$field.is_some() {
                    self.$field = other.$field.clone();
                }
            )*};
        }
        take!(
            provider,
            model,
            base_url,
            api_key_env,
            script,
            max_steps,
            mode,
            snapshot,
            snapshot_skip,
            snapshot_max_file_bytes,
            scrub_env,
            webfetch_allow_hosts,
            context_window,
            max_output_tokens,
            distill_model,
            distill_min_messages,
            distill_max_segment,
            dream,
            dream_idle_seconds,
            dream_after_turns,
            embeddings_model,
            embeddings_base_url,
            embeddings_api_key_env,
            state_file
        );
        if let Some(b) = &other.context_budget {
            let merged = self.context_budget.get_or_insert_with(BudgetLayer::default);
            merged.distilled = b.distilled.or(merged.distilled);
            merged.raw = b.raw.or(merged.raw);
            merged.output = b.output.or(merged.output);
            merged.knowledge = b.knowledge.or(merged.knowledge);
        }
        if let Some(j) = &other.journal {
            let merged = self.journal.get_or_insert_with(JournalLayer::default);
            merged.enabled = j.enabled.or(merged.enabled);
        }
        if let Some(k) = &other.knowledge {
            let merged = self.knowledge.get_or_insert_with(KnowledgeLayer::default);
            merged.enabled = k.enabled.or(merged.enabled);
            merged.agents_file = k.agents_file.clone().or(merged.agents_file.take());
            merged.auto_export = k.auto_export.or(merged.auto_export);
            merged.cross_project = k.cross_project.or(merged.cross_project);
            merged.curate_after_turns = k.curate_after_turns.or(merged.curate_after_turns);
            merged.consolidate_at = k.consolidate_at.or(merged.consolidate_at);
        }
        if let Some(servers) = &other.mcp {
            let merged = self.mcp.get_or_insert_with(BTreeMap::new);
            merged.extend(servers.iter().map(|(k, v)| (k.clone(), v.clone())));
        }
        if let Some(tools) = &other.tools {
            let merged = self.tools.get_or_insert_with(BTreeMap::new);
            merged.extend(tools.iter().map(|(k, v)| (k.clone(), *v)));
        }
        if let Some(rules) = &other.permission {
            let merged = self.permission.get_or_insert_with(BTreeMap::new);
            for (key, rule) in rules {
                merged.insert(key.clone(), rule.clone());
            }
        }
    }
}

/// The effective configuration after all layers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Config {
    /// `None` until someone configures a provider; the CLI then offers the offline demo.
    pub provider: Option<ProviderKind>,
    pub model: Option<String>,
    pub base_url: Option<String>,
    pub api_key_env: Option<String>,
    pub script: Option<PathBuf>,
    pub max_steps: u32,
    pub mode: String,
    pub snapshot: bool,
    pub snapshot_skip: Vec<String>,
    pub snapshot_max_file_bytes: u64,
    pub scrub_env: Vec<String>,
    pub permission: BTreeMap<String, PermissionRule>,
    pub webfetch_allow_hosts: Vec<String>,
    /// Tool name → offered; a tool absent here is offered.
    pub tools: BTreeMap<String, bool>,
    /// MCP servers by name.
    pub mcp: BTreeMap<String, McpServer>,
    pub context_window: Option<u32>,
    pub max_output_tokens: Option<u32>,
    pub distill_model: Option<String>,
    pub distill_min_messages: u32,
    pub distill_max_segment: u32,
    pub dream: bool,
    pub dream_idle_seconds: u64,
    pub dream_after_turns: u32,
    pub embeddings_model: Option<String>,
    pub embeddings_base_url: Option<String>,
    pub embeddings_api_key_env: Option<String>,
    pub budget: Budget,
    /// Whether the model has the journal tools.
    pub journal: bool,
    pub knowledge: Knowledge,
    /// Relative to the workspace.
    pub state_file: PathBuf,
}

impl Default for Config {
    fn default() -> Self {
        Self::from_layer(ConfigLayer::default())
    }
}

impl Config {
    pub const DEFAULT_MAX_STEPS: u32 = 50;

    fn from_layer(layer: ConfigLayer) -> Self {
        let base_url = layer.base_url.or_else(|| {
            layer
                .provider
                .and_then(|p| p.default_base_url().map(String::from))
        });
        let api_key_env = layer.api_key_env.or_else(|| {
            layer
                .provider
                .and_then(|p| p.default_api_key_env().map(String::from))
        });
        Self {
            provider: layer.provider,
            model: layer.model,
            base_url,
            api_key_env,
            script: layer.script,
            max_steps: layer.max_steps.unwrap_or(Self::DEFAULT_MAX_STEPS),
            mode: layer.mode.unwrap_or_else(|| "build".into()),
            snapshot: layer.snapshot.unwrap_or(true),
            snapshot_skip: layer.snapshot_skip.unwrap_or_else(|| {
                crate::snapshot::meta::DEFAULT_SKIP
                    .iter()
                    .map(|s| s.to_string())
                    .collect()
            }),
            snapshot_max_file_bytes: layer
                .snapshot_max_file_bytes
                .unwrap_or(crate::snapshot::MAX_UNTRACKED_BYTES),
            scrub_env: layer.scrub_env.unwrap_or_default(),
            permission: layer.permission.unwrap_or_default(),
            webfetch_allow_hosts: layer.webfetch_allow_hosts.unwrap_or_default(),
            tools: layer.tools.unwrap_or_default(),
            mcp: layer.mcp.unwrap_or_default(),
            context_window: layer.context_window,
            max_output_tokens: layer.max_output_tokens,
            distill_model: layer.distill_model,
            distill_min_messages: layer.distill_min_messages.unwrap_or(8).max(1),
            distill_max_segment: layer.distill_max_segment.unwrap_or(50).max(1),
            dream: layer.dream.unwrap_or(true),
            dream_idle_seconds: layer.dream_idle_seconds.unwrap_or(300),
            dream_after_turns: layer.dream_after_turns.unwrap_or(8).max(1),
            embeddings_model: layer.embeddings_model,
            embeddings_base_url: layer.embeddings_base_url,
            embeddings_api_key_env: layer.embeddings_api_key_env,
            budget: Budget::from_layer(layer.context_budget),
            journal: layer.journal.and_then(|j| j.enabled).unwrap_or(false),
            knowledge: Knowledge::from_layer(layer.knowledge.unwrap_or_default()),
            state_file: layer
                .state_file
                .unwrap_or_else(|| PathBuf::from(".agent-lsp/STATE.md")),
        }
    }
}

/// Long-term knowledge's effective settings.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Knowledge {
    pub enabled: bool,
    /// Relative to the workspace.
    pub agents_file: PathBuf,
    pub auto_export: bool,
    pub cross_project: bool,
    pub curate_after_turns: u32,
    pub consolidate_at: u32,
}

impl Knowledge {
    fn from_layer(l: KnowledgeLayer) -> Self {
        Self {
            enabled: l.enabled.unwrap_or(true),
            agents_file: l.agents_file.unwrap_or_else(|| PathBuf::from("AGENTS.md")),
            auto_export: l.auto_export.unwrap_or(false),
            cross_project: l.cross_project.unwrap_or(true),
            curate_after_turns: l.curate_after_turns.unwrap_or(10).max(1),
            consolidate_at: l.consolidate_at.unwrap_or(25).max(2),
        }
    }
}

/// Where a layer came from, in precedence order (later wins).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LayerSource {
    User,
    Workspace,
    InitializationOptions,
    DidChangeConfiguration,
    /// `agent-lsp run`'s flags (`--model`, `--mode`, …).
    CommandLine,
}

/// The state of one layer: its last good value and the latest problem, if any.
#[derive(Debug, Clone, Serialize)]
pub struct LayerState {
    pub source: LayerSource,
    /// The file, for file layers.
    pub path: Option<PathBuf>,
    pub layer: ConfigLayer,
    pub error: Option<String>,
}

/// All layers, and the configuration they add up to.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Layers {
    layers: Vec<LayerState>,
}

impl Layers {
    /// Sets one layer. On error the layer keeps its last good value, and the returned message
    /// says what is wrong and where, for the user.
    pub fn set(
        &mut self,
        source: LayerSource,
        path: Option<PathBuf>,
        parsed: Result<ConfigLayer, String>,
    ) -> Result<(), String> {
        let pos = self.layers.iter().position(|l| l.source == source);
        let state = match pos {
            Some(i) => &mut self.layers[i],
            None => {
                self.layers.push(LayerState {
                    source,
                    path: None,
                    layer: ConfigLayer::default(),
                    error: None,
                });
                self.layers.sort_by_key(|l| l.source);
                let i = self.layers.iter().position(|l| l.source == source);
                &mut self.layers[i.expect("just inserted")]
            }
        };
        state.path = path;
        match parsed {
            Ok(layer) => {
                state.layer = layer;
                state.error = None;
                Ok(())
            }
            Err(e) => {
                let place = match &state.path {
                    Some(p) => p.display().to_string(),
                    None => format!("{source:?}"),
                };
                let msg = format!("agent-lsp: bad configuration in {place}: {e}");
                state.error = Some(msg.clone());
                Err(msg)
            }
        }
    }

    /// Reads a TOML file layer. A missing file is an empty layer, not an error.
    pub fn load_file(&mut self, source: LayerSource, path: &Path) -> Result<(), String> {
        let parsed = match std::fs::read_to_string(path) {
            Ok(text) => ConfigLayer::from_toml(&text),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                self.layers.retain(|l| l.source != source);
                return Ok(());
            }
            Err(e) => Err(format!("cannot read: {e}")),
        };
        self.set(source, Some(path.to_path_buf()), parsed)
    }

    /// Loads the two file layers (user, then the workspace's if a root is known).
    pub fn load_files(&mut self, workspace_root: Option<&Path>) -> Vec<String> {
        let mut errors = Vec::new();
        if let Err(e) = self.load_file(LayerSource::User, &crate::paths::user_config_file()) {
            errors.push(e);
        }
        if let Some(root) = workspace_root
            && let Err(e) = self.load_file(
                LayerSource::Workspace,
                &root.join(crate::paths::WORKSPACE_CONFIG_FILE),
            )
        {
            errors.push(e);
        }
        errors
    }

    pub fn states(&self) -> &[LayerState] {
        &self.layers
    }

    pub fn effective(&self) -> Config {
        let mut merged = ConfigLayer::default();
        for state in &self.layers {
            merged.overlay(&state.layer);
        }
        Config::from_layer(merged)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn mcp_servers_read_from_toml_and_json_and_merge_per_name() {
        let file = ConfigLayer::from_toml(
            r#"
[mcp.everything]
type = "local"
command = ["npx", "-y", "@modelcontextprotocol/server-everything"]
environment = { FOO = "bar" }
timeout_ms = 5000

[mcp.docs]
type = "remote"
url = "https://example.com/mcp"
headers = { Authorization = "Bearer {env:DOCS_TOKEN}" }
"#,
        )
        .unwrap();
        let client = ConfigLayer::from_json(&json!({"mcp": {
            "docs": {"type": "remote", "url": "https://example.com/mcp", "enabled": false}}}))
        .unwrap();
        let mut layers = Layers::default();
        let _ = layers.set(LayerSource::User, None, Ok(file));
        let _ = layers.set(LayerSource::InitializationOptions, None, Ok(client));
        let config = layers.effective();
        let everything = &config.mcp["everything"];
        assert!(everything.enabled());
        assert_eq!(everything.transport(), "stdio");
        assert_eq!(everything.timeout(), std::time::Duration::from_millis(5000));
        assert!(
            !config.mcp["docs"].enabled(),
            "the client's entry replaces the file's"
        );

        let bad = ConfigLayer::from_toml("[mcp.x]\ntype = \"local\"\ncommand = []\n");
        assert!(
            bad.unwrap_err()
                .contains("mcp.x: `command` needs the program")
        );
        let bad = ConfigLayer::from_toml("[mcp.y]\ntype = \"remote\"\nurl = \"ftp://h\"\n");
        assert!(
            bad.unwrap_err()
                .contains("mcp.y: `url` must be an http(s) URL")
        );
    }

    /// The README's example configuration is one this version reads, key for key.
    #[test]
    fn the_readmes_example_parses() {
        let readme = include_str!("../../README.md");
        let start = readme.find("```toml\nprovider = ").expect("the example") + 8;
        let end = start + readme[start..].find("```").unwrap();
        let layer = ConfigLayer::from_toml(&readme[start..end]).unwrap();
        let config = Config::from_layer(layer);
        assert!(!config.journal);
        assert_eq!(config.knowledge.agents_file, PathBuf::from("AGENTS.md"));
        assert_eq!(config.knowledge.curate_after_turns, 10);
    }

    #[test]
    fn later_layers_win_and_permissions_merge_per_key() {
        let mut layers = Layers::default();
        layers
            .set(
                LayerSource::User,
                None,
                ConfigLayer::from_toml(
                    "provider = \"anthropic\"\nmodel = \"a\"\nmax_steps = 7\n[permission]\nedit = \"ask\"\nbash = { \"*\" = \"ask\", \"git status*\" = \"allow\" }\n",
                ),
            )
            .unwrap();
        layers
            .set(
                LayerSource::InitializationOptions,
                None,
                ConfigLayer::from_json(&json!({"model": "b", "permission": {"edit": "allow"}})),
            )
            .unwrap();
        layers
            .set(
                LayerSource::Workspace,
                None,
                ConfigLayer::from_toml("model = \"w\"\nmode = \"plan\""),
            )
            .unwrap();
        let c = layers.effective();
        assert_eq!(c.provider, Some(ProviderKind::Anthropic));
        assert_eq!(c.model.as_deref(), Some("b"));
        assert_eq!(c.mode, "plan");
        assert_eq!(c.max_steps, 7);
        assert_eq!(c.api_key_env.as_deref(), Some("ANTHROPIC_API_KEY"));
        assert_eq!(c.base_url.as_deref(), Some("https://api.anthropic.com"));
        assert_eq!(c.permission["edit"], PermissionRule::Action(Action::Allow));
        assert!(matches!(c.permission["bash"], PermissionRule::Patterns(_)));
    }

    #[test]
    fn the_command_line_is_its_own_top_layer() {
        let mut layers = Layers::default();
        let layer = |model: &str| ConfigLayer::from_json(&json!({ "model": model }));
        layers
            .set(LayerSource::CommandLine, None, layer("flag"))
            .unwrap();
        layers
            .set(LayerSource::DidChangeConfiguration, None, layer("client"))
            .unwrap();
        assert_eq!(layers.effective().model.as_deref(), Some("flag"));
        let sources: Vec<_> = layers.states().iter().map(|l| l.source).collect();
        assert_eq!(
            sources,
            [
                LayerSource::DidChangeConfiguration,
                LayerSource::CommandLine
            ]
        );
        assert_eq!(
            serde_json::to_value(LayerSource::CommandLine).unwrap(),
            "command_line"
        );
    }

    #[test]
    fn unknown_keys_are_named_in_both_formats() {
        let e = ConfigLayer::from_toml("modle = \"x\"").unwrap_err();
        assert!(e.contains("modle"), "{e}");
        let e = ConfigLayer::from_json(&json!({"max_stepz": 3})).unwrap_err();
        assert!(e.contains("max_stepz"), "{e}");
        let e = ConfigLayer::from_json(&json!({"provider": "gpt"})).unwrap_err();
        assert!(e.contains("gpt"), "{e}");
    }

    #[test]
    fn a_bad_layer_keeps_its_last_good_value() {
        let mut layers = Layers::default();
        layers
            .set(
                LayerSource::Workspace,
                None,
                ConfigLayer::from_toml("model = \"good\""),
            )
            .unwrap();
        let err = layers
            .set(
                LayerSource::Workspace,
                None,
                ConfigLayer::from_toml("model = "),
            )
            .unwrap_err();
        assert!(err.contains("bad configuration"), "{err}");
        assert_eq!(layers.effective().model.as_deref(), Some("good"));
    }

    #[test]
    fn ollama_defaults_and_nested_client_settings() {
        let layer = ConfigLayer::from_json(&json!({"agent-lsp": {"provider": "ollama"}})).unwrap();
        let mut layers = Layers::default();
        layers
            .set(LayerSource::DidChangeConfiguration, None, Ok(layer))
            .unwrap();
        let c = layers.effective();
        assert_eq!(c.base_url.as_deref(), Some("http://127.0.0.1:11434/v1"));
        assert_eq!(c.api_key_env, None);
        assert_eq!(Config::default().max_steps, 50);
        assert!(Config::default().snapshot);
    }
}
