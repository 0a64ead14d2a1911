//! The command line around the server: --version, --help, doctor, session list.

use agent_lsp_tests::cli_run::point_at;
use agent_lsp_tests::process::{FakeLlm, TestEnv};
use serde_json::{Value, json};

#[test]
fn version_and_help() {
    let env = TestEnv::new();
    let (code, out, _) = env.run(&["--version"]);
    assert_eq!(code, 0);
    assert_eq!(
        out.trim(),
        format!("agent-lsp {}", env!("CARGO_PKG_VERSION"))
    );
    let (code, out, _) = env.run(&["--help"]);
    assert_eq!(code, 0);
    for word in ["lsp", "session", "doctor", "AGENT_LSP_LOG", "--log-file"] {
        assert!(out.contains(word), "--help mentions {word}: {out}");
    }
    let (code, _, err) = env.run(&["session", "frobnicate"]);
    assert_eq!(code, 2, "usage errors exit 2");
    assert!(err.contains("frobnicate"));
}

#[test]
fn session_list_on_a_fresh_data_dir() {
    let env = TestEnv::new();
    let (code, out, _) = env.run(&["session", "list"]);
    assert_eq!(code, 0);
    assert_eq!(out.trim(), "no sessions yet");
    let (code, out, _) = env.run(&["session", "list", "--json"]);
    assert_eq!(code, 0);
    assert_eq!(serde_json::from_str::<Value>(&out).unwrap(), json!([]));
    assert!(
        env.database().exists(),
        "the database is created on first use"
    );
}

#[test]
fn doctor_reports_layers_database_and_a_reachable_provider() {
    let env = TestEnv::new();
    let llm = FakeLlm::start(&json!({"turns": []}), "openai");
    point_at(&env, &llm, "");
    let (code, out, err) = env.run(&["doctor", "--cwd", env.workspace().to_str().unwrap()]);
    assert_eq!(code, 0, "{out}\n{err}");
    assert!(out.contains("provider       openai"), "{out}");
    assert!(
        out.contains("[ok  ] api key   $FAKE_KEY is not set (a local server usually needs none)"),
        "{out}"
    );
    assert!(out.contains("[ok  ] data dir"), "{out}");
    assert!(out.contains("[ok  ] database"), "{out}");
    assert!(out.contains("integrity ok"), "{out}");
    assert!(out.contains("[ok  ] provider  GET "), "{out}");
    assert!(out.contains("HTTP 200"), "{out}");

    let (code, out, _) = env.run(&[
        "doctor",
        "--json",
        "--cwd",
        env.workspace().to_str().unwrap(),
    ]);
    assert_eq!(code, 0);
    let report: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(report["effective"]["model"], "fake-model");
    assert!(
        report["checks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["ok"] == true)
    );
}

#[test]
fn doctor_fails_on_a_bad_config_and_an_unreachable_provider() {
    let env = TestEnv::new();
    // A port nothing listens on: bind, note it, close.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    env.write_user_config(&format!(
        "provider = \"ollama\"\nbase_url = \"http://127.0.0.1:{port}/v1\"\n"
    ));
    std::fs::write(
        env.workspace().join(".agent-lsp.toml"),
        "mood = \"happy\"\n",
    )
    .unwrap();
    let (code, out, _) = env.run(&["doctor", "--cwd", env.workspace().to_str().unwrap()]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("[FAIL] config"), "{out}");
    assert!(out.contains("mood"), "the bad key is named: {out}");
    assert!(out.contains("[FAIL] provider"), "{out}");
    assert!(out.contains("not reachable"), "{out}");
}

#[test]
fn doctor_layers_the_editors_settings_and_names_what_is_missing() {
    // How the editors' health checks run it: their settings over the files.
    let env = TestEnv::new();
    let llm = FakeLlm::start(&json!({"turns": []}), "openai");
    point_at(&env, &llm, "");
    let ws = env.workspace();
    let doctor = |settings: &str| {
        let (code, out, _) = env.run(&[
            "doctor",
            "--json",
            "--cwd",
            ws.to_str().unwrap(),
            "--settings",
            settings,
        ]);
        let report: Value = serde_json::from_str(&out).unwrap();
        (code, report)
    };
    let check = |report: &Value, name: &str| {
        report["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("no {name} check: {report}"))
    };

    let (code, report) = doctor(r#"{"model": "from-the-editor"}"#);
    assert_eq!(code, 0, "{report}");
    assert_eq!(report["effective"]["model"], "from-the-editor");

    // A remote provider whose key variable is unset: named, and the exit code says so.
    let (code, report) = doctor(
        r#"{"base_url": "https://models.example.invalid/v1", "api_key_env": "NO_SUCH_KEY_VAR"}"#,
    );
    assert_eq!(code, 1);
    let key = check(&report, "api key");
    assert_eq!(key["ok"], false);
    assert!(
        key["detail"]
            .as_str()
            .unwrap()
            .contains("$NO_SUCH_KEY_VAR is not set"),
        "{key}"
    );

    let (code, report) = doctor("{not json");
    assert_eq!(code, 1);
    let config = check(&report, "config");
    assert_eq!(config["ok"], false);
    assert!(
        config["detail"]
            .as_str()
            .unwrap()
            .contains("--settings is not JSON"),
        "{config}"
    );

    let (code, report) = doctor(r#"{"provider": "telepathy"}"#);
    assert_eq!(code, 1);
    assert!(
        check(&report, "config")["detail"]
            .as_str()
            .unwrap()
            .contains("telepathy"),
        "{report}"
    );
}

#[test]
fn a_scripted_run_warns_about_nothing() {
    // The demo's path: the scripted model has no window to guess, so no warning about one.
    let env = TestEnv::new();
    let script = agent_lsp_tests::process::repo_root().join("fixtures/scripts/demo.json");
    let work = env.workspace();
    let sample = agent_lsp_tests::process::repo_root().join("fixtures/sample-workspace");
    assert!(
        std::process::Command::new("cp")
            .args([
                "-r",
                &format!("{}/.", sample.display()),
                work.to_str().unwrap()
            ])
            .status()
            .unwrap()
            .success()
    );
    let (code, _, err) = env.run(&[
        "run",
        "--cwd",
        work.to_str().unwrap(),
        "--script",
        script.to_str().unwrap(),
        "--yes",
        "make it greet the reader",
    ]);
    assert_eq!(code, 0, "{err}");
    assert!(
        !err.contains("WARN") && !err.contains("unknown model"),
        "{err}"
    );
}
