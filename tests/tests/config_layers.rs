//! Configuration layers through the real server: files, initializationOptions,
//! didChangeConfiguration, bad files, and a client that names no workspace (as Helix does
//! outside a repository).

use agent_lsp_tests::lsp_client::{LspClient, file_uri, initialize_params};
use agent_lsp_tests::process::TestEnv;
use serde_json::{Value, json};

async fn effective(client: &LspClient) -> Value {
    client.request("agent/config", json!({})).await.unwrap()
}

#[tokio::test]
async fn four_layers_later_wins() {
    let env = TestEnv::new();
    env.write_user_config(
        "provider = \"anthropic\"\nmodel = \"user-model\"\nmax_steps = 9\n[permission]\nbash = \"deny\"\n",
    );
    std::fs::write(
        env.workspace().join(".agent-lsp.toml"),
        "model = \"workspace-model\"\nmode = \"plan\"\n[permission]\nedit = \"allow\"\n",
    )
    .unwrap();
    let client = LspClient::spawn(&env, &[]);
    let mut params = initialize_params(&env.workspace());
    params["initializationOptions"] = json!({"model": "init-model", "snapshot": false});
    client.initialize(params).await;

    let c = effective(&client).await;
    let e = &c["effective"];
    assert_eq!(e["provider"], "anthropic");
    assert_eq!(e["model"], "init-model");
    assert_eq!(e["mode"], "plan");
    assert_eq!(e["max_steps"], 9);
    assert_eq!(e["snapshot"], false);
    assert_eq!(e["api_key_env"], "ANTHROPIC_API_KEY");
    assert_eq!(e["permission"], json!({"bash": "deny", "edit": "allow"}));
    let sources: Vec<&str> = c["layers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l["source"].as_str().unwrap())
        .collect();
    assert_eq!(sources, ["user", "workspace", "initialization_options"]);

    client
        .notify(
            "workspace/didChangeConfiguration",
            json!({"settings": {"agent-lsp": {"model": "live-model", "provider": "ollama"}}}),
        )
        .await;
    let e = effective(&client).await["effective"].clone();
    assert_eq!(e["model"], "live-model");
    assert_eq!(e["base_url"], "http://127.0.0.1:11434/v1");
    assert_eq!(client.shutdown_and_exit().await, 0);
}

#[tokio::test]
async fn a_bad_file_is_reported_and_the_server_runs_on_the_good_layers() {
    let env = TestEnv::new();
    env.write_user_config("model = \"user-model\"\n");
    std::fs::write(
        env.workspace().join(".agent-lsp.toml"),
        "model = \"x\"\nmax_stepz = 3\n",
    )
    .unwrap();
    let client = LspClient::spawn(&env, &[]);
    client.initialize(initialize_params(&env.workspace())).await;
    let msg = client
        .wait_for("window/showMessage", |m| {
            m["params"]["message"]
                .as_str()
                .unwrap_or_default()
                .contains("max_stepz")
        })
        .await;
    assert_eq!(msg["params"]["type"], 2, "a warning");
    let text = msg["params"]["message"].as_str().unwrap();
    assert!(text.contains(".agent-lsp.toml"), "{text}");
    let c = effective(&client).await;
    assert_eq!(c["effective"]["model"], "user-model");

    // Bad live settings: reported, last good kept.
    client
        .notify(
            "workspace/didChangeConfiguration",
            json!({"settings": {"model": "good"}}),
        )
        .await;
    client
        .notify(
            "workspace/didChangeConfiguration",
            json!({"settings": {"provider": "gpt-9000"}}),
        )
        .await;
    client
        .wait_for("window/showMessage", |m| {
            m["params"]["message"]
                .as_str()
                .unwrap_or_default()
                .contains("gpt-9000")
        })
        .await;
    assert_eq!(effective(&client).await["effective"]["model"], "good");
    assert!(env.dir.path().exists());
    assert_eq!(client.shutdown_and_exit().await, 0);
}

#[tokio::test]
async fn without_a_workspace_the_first_document_decides_it() {
    let env = TestEnv::new();
    // A project with a marker, and a nested file; the client sends rootUri null and no folders.
    let project = env.workspace().join("proj");
    std::fs::create_dir_all(project.join(".helix")).unwrap();
    std::fs::create_dir_all(project.join("src")).unwrap();
    std::fs::write(
        project.join(".agent-lsp.toml"),
        "model = \"from-project\"\n",
    )
    .unwrap();
    let file = project.join("src/main.rs");
    std::fs::write(&file, "fn main() {}\n").unwrap();

    // Helix's own capabilities, as it sends them when no root marker is found.
    let mut helix: Value = serde_json::from_str(
        &std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../fixtures/clients/helix.json"
        ))
        .unwrap(),
    )
    .unwrap();
    helix["rootUri"] = Value::Null;
    helix["rootPath"] = Value::Null;
    helix["workspaceFolders"] = json!([]);
    let client = LspClient::spawn(&env, &[]);
    client.initialize(helix).await;
    assert!(effective(&client).await["root"].is_null());
    client
        .notify(
            "textDocument/didOpen",
            json!({"textDocument": {"uri": file_uri(&file), "languageId": "rust", "version": 0, "text": "fn main() {}\n"}}),
        )
        .await;
    let c = effective(&client).await;
    assert_eq!(c["root"], project.to_str().unwrap());
    assert_eq!(c["effective"]["model"], "from-project");
    assert_eq!(client.shutdown_and_exit().await, 0);
}
