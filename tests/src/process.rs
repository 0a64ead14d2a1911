//! Finding and starting the binaries under test, each in an isolated environment.

use std::io::BufRead;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};

use serde_json::{Value, json};

use crate::fake_llm::Recorded;

/// A binary of this workspace, next to the running test or binary (target/<profile>/NAME), or from
/// `$AGENT_LSP_BIN` for `agent-lsp`.
pub fn workspace_bin(name: &str) -> PathBuf {
    if name == "agent-lsp"
        && let Some(path) = std::env::var_os("AGENT_LSP_BIN")
    {
        return PathBuf::from(path);
    }
    let exe = std::env::current_exe().expect("current_exe");
    // target/<profile>/deps/test-xxxx (a test) or target/<profile>/NAME (a bin of ours) →
    // target/<profile>/NAME
    let dir = exe.parent().expect("a binary lives in a folder");
    let profile_dir = if dir.ends_with("deps") {
        dir.parent().expect("target/<profile>/deps")
    } else {
        dir
    };
    let path = profile_dir.join(name);
    assert!(
        path.exists(),
        "{} is not built; run `cargo build --workspace --bins` first (or set AGENT_LSP_BIN)",
        path.display()
    );
    path
}

pub fn agent_lsp_bin() -> PathBuf {
    workspace_bin("agent-lsp")
}

/// The repository's top folder (editors, fixtures).
pub fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the tests crate sits in the workspace")
        .to_path_buf()
}

/// The model's side of "make the answer 42" (the editor tests' task): an edit of
/// src/lib.rs, then, once the edit's result is back, a closing line.
pub fn answer_edit_turns() -> Vec<Value> {
    vec![
        json!({"reply": {"text": "Fixing it.", "tool_calls": [{"name": "edit", "arguments": {
            "filePath": "src/lib.rs", "oldString": "    41", "newString": "    42"}}]}}),
        json!({"expect": {"last_message_contains": "Edited src/lib.rs"},
               "reply": {"text": "The answer is now 42."}}),
    ]
}

/// Private HOME, config and data folders, so a test never reads or writes the user's.
pub struct TestEnv {
    pub dir: tempfile::TempDir,
}

impl Default for TestEnv {
    fn default() -> Self {
        Self::new()
    }
}

impl TestEnv {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        for sub in ["home", "config", "data", "workspace"] {
            std::fs::create_dir_all(dir.path().join(sub)).unwrap();
        }
        Self { dir }
    }

    pub fn home(&self) -> PathBuf {
        self.dir.path().join("home")
    }

    /// `$XDG_CONFIG_HOME`; the user config file is `config_home()/agent-lsp/config.toml`.
    pub fn config_home(&self) -> PathBuf {
        self.dir.path().join("config")
    }

    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    pub fn database(&self) -> PathBuf {
        self.data_dir().join("agent-lsp.db")
    }

    /// A folder to use as the workspace.
    pub fn workspace(&self) -> PathBuf {
        self.dir.path().join("workspace")
    }

    /// The editor tests' workspace: the user config points at `llm` (OpenAI format, key in
    /// `$FAKE_KEY`) and src/lib.rs says the answer is 41. Returns src/lib.rs.
    pub fn answer_workspace(&self, llm: &FakeLlm) -> PathBuf {
        self.write_user_config(&ModelServer::fake(llm, "openai").config());
        let file = self.workspace().join("src/lib.rs");
        std::fs::create_dir_all(file.parent().expect("src")).unwrap();
        std::fs::write(&file, "pub fn answer() -> u32 {\n    41\n}\n").unwrap();
        file
    }

    pub fn write_user_config(&self, toml: &str) {
        let dir = self.config_home().join("agent-lsp");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("config.toml"), toml).unwrap();
    }

    pub fn apply(&self, cmd: &mut Command) {
        cmd.env("HOME", self.home())
            .env("XDG_CONFIG_HOME", self.config_home())
            .env("XDG_DATA_HOME", self.dir.path().join("xdg-data"))
            .env("AGENT_LSP_DATA_DIR", self.data_dir())
            .env_remove("AGENT_LSP_LOG")
            .env_remove("OPENAI_API_KEY")
            .env_remove("ANTHROPIC_API_KEY");
    }

    /// `agent-lsp ARGS` in this environment.
    pub fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(agent_lsp_bin());
        cmd.args(args);
        self.apply(&mut cmd);
        cmd
    }

    /// Runs `agent-lsp ARGS` to completion: (exit code, stdout, stderr).
    pub fn run(&self, args: &[&str]) -> (i32, String, String) {
        let out = self
            .command(args)
            .stdin(Stdio::null())
            .output()
            .expect("run agent-lsp");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
}

/// The model server the agent under test is pointed at.
#[derive(Debug, Clone)]
pub struct ModelServer {
    /// `provider` in the agent's configuration: "openai" (any compatible server) or
    /// "anthropic".
    pub provider: String,
    pub base_url: String,
    pub model: String,
    /// The variable holding the server's key, if it needs one.
    pub api_key_env: Option<String>,
}

impl ModelServer {
    /// `llm`, speaking `format` ("openai" or "anthropic"), its key in `$FAKE_KEY`.
    pub fn fake(llm: &FakeLlm, format: &str) -> Self {
        Self {
            provider: format.into(),
            base_url: if format == "openai" {
                format!("{}/v1", llm.url)
            } else {
                llm.url.clone()
            },
            model: "fake-model".into(),
            api_key_env: Some("FAKE_KEY".into()),
        }
    }

    /// The server's key variable and its value for the agent's environment: fake-llm's
    /// test key, or the variable's value here (TestEnv clears the usual key variables).
    pub fn key(&self) -> Option<(String, String)> {
        let var = self.api_key_env.clone()?;
        let value = match var.as_str() {
            "FAKE_KEY" => "test-key".to_string(),
            _ => std::env::var(&var).ok()?,
        };
        Some((var, value))
    }

    /// The user-configuration lines that point the agent at this server.
    pub fn config(&self) -> String {
        let mut toml = format!(
            "provider = \"{}\"\nmodel = \"{}\"\nbase_url = \"{}\"\n",
            self.provider, self.model, self.base_url
        );
        if let Some(key) = &self.api_key_env {
            toml.push_str(&format!("api_key_env = \"{key}\"\n"));
        }
        toml
    }
}

/// Runs `git ARGS` in `dir` as a fixed author (new repositories on `main`); panics on failure; returns its stdout.
pub fn git(dir: &Path, args: &[&str]) -> String {
    let out = Command::new("git")
        .args(["-c", "init.defaultBranch=main"])
        .args(args)
        .current_dir(dir)
        .env("GIT_AUTHOR_NAME", "t")
        .env("GIT_AUTHOR_EMAIL", "t@example.com")
        .env("GIT_COMMITTER_NAME", "t")
        .env("GIT_COMMITTER_EMAIL", "t@example.com")
        .output()
        .expect("run git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A running `fake-llm`, killed when dropped.
pub struct FakeLlm {
    child: Child,
    pub url: String,
    record: PathBuf,
    _dir: tempfile::TempDir,
}

impl FakeLlm {
    /// Starts `fake-llm` on a free loopback port with `script` in `format` ("openai" or
    /// "anthropic").
    pub fn start(script: &Value, format: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let script_path = dir.path().join("script.json");
        std::fs::write(&script_path, script.to_string()).unwrap();
        let record = dir.path().join("requests.jsonl");
        let mut child = Command::new(workspace_bin("fake-llm"))
            .arg(&script_path)
            .args(["--format", format, "--port", "0", "--record"])
            .arg(&record)
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("start fake-llm");
        let mut first = String::new();
        std::io::BufReader::new(child.stdout.take().unwrap())
            .read_line(&mut first)
            .unwrap();
        let url = first
            .trim()
            .strip_prefix("listening on ")
            .unwrap_or_else(|| panic!("fake-llm said {first:?}"))
            .to_string();
        Self {
            child,
            url,
            record,
            _dir: dir,
        }
    }

    /// Every request received so far.
    pub fn requests(&self) -> Vec<Recorded> {
        read_records(&self.record)
    }
}

pub fn read_records(path: &Path) -> Vec<Recorded> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).expect("a recorded request"))
        .collect()
}

impl Drop for FakeLlm {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
