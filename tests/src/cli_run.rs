//! `agent-lsp run --json` driven from tests: a workspace pointed at fake-llm, the run's
//! JSON lines, and the stored session.

use std::process::{Child, Stdio};

use serde_json::Value;

use crate::process::{FakeLlm, TestEnv};

pub const FORMATS: [&str; 2] = ["openai", "anthropic"];

/// A test workspace pointed at `llm` in `format`.
pub fn setup(llm: &FakeLlm, format: &str, extra: &str) -> TestEnv {
    let env = TestEnv::new();
    let base = if format == "openai" {
        format!("{}/v1", llm.url)
    } else {
        llm.url.clone()
    };
    env.write_user_config(&format!(
        "provider = \"{format}\"\nmodel = \"fake-model\"\nbase_url = \"{base}\"\napi_key_env = \"FAKE_KEY\"\n{extra}"
    ));
    std::fs::create_dir_all(env.workspace().join("src")).unwrap();
    std::fs::write(
        env.workspace().join("src/lib.rs"),
        "pub fn answer() -> u32 {\n    41\n}\n",
    )
    .unwrap();
    env
}

/// Points the workspace's user configuration at another fake-llm (OpenAI format), as for
/// the isolated calls of a dream or a curation after the session's own turns; `extra` is
/// more of the configuration.
pub fn point_at(env: &TestEnv, llm: &FakeLlm, extra: &str) {
    env.write_user_config(&format!(
        "provider = \"openai\"\nmodel = \"fake-model\"\nbase_url = \"{}/v1\"\napi_key_env = \"FAKE_KEY\"\n{extra}",
        llm.url
    ));
}

pub struct Run {
    pub code: i32,
    pub lines: Vec<Value>,
    pub stderr: String,
}

impl Run {
    pub fn of_type(&self, t: &str) -> Vec<&Value> {
        self.lines.iter().filter(|l| l["type"] == t).collect()
    }
    pub fn text(&self) -> String {
        self.of_type("text")
            .iter()
            .map(|l| l["text"].as_str().unwrap())
            .collect()
    }
    pub fn done(&self) -> &Value {
        let last = self.lines.last().expect("some output");
        assert_eq!(last["type"], "done", "the last line is done: {last}");
        last
    }
    /// The message of the run's first error line.
    pub fn error(&self) -> String {
        let errors = self.of_type("error");
        let first = errors
            .first()
            .unwrap_or_else(|| panic!("no error line: {:?}", self.lines));
        first["message"].as_str().unwrap_or_default().to_string()
    }

    pub fn session(&self) -> String {
        self.lines[0]["session_id"].as_str().unwrap().to_string()
    }
}

pub fn spawn(env: &TestEnv, args: &[&str]) -> Child {
    let mut cmd = env.command(&["run", "--json", "--cwd", env.workspace().to_str().unwrap()]);
    cmd.args(args)
        .env("FAKE_KEY", "test-key")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd.spawn().expect("spawn agent-lsp run")
}

pub fn finish(child: Child) -> Run {
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines = stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    Run {
        code: out.status.code().unwrap_or(-1),
        lines,
        stderr: String::from_utf8_lossy(&out.stderr).into(),
    }
}

pub fn run(env: &TestEnv, args: &[&str]) -> Run {
    finish(spawn(env, args))
}

pub fn show(env: &TestEnv, session: &str) -> Value {
    let (code, out, err) = env.run(&["session", "show", session, "--json"]);
    assert_eq!(code, 0, "{err}");
    serde_json::from_str(&out).unwrap()
}

pub fn parts<'a>(view: &'a Value, kind: &str) -> Vec<&'a Value> {
    view["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["parts"].as_array().unwrap())
        .filter(|p| p["kind"] == kind)
        .collect()
}
