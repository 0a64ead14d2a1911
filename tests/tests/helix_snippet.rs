//! The Helix snippet in editors/helix parses, and its settings are valid agent-lsp keys.

use agent_lsp::config::ConfigLayer;

#[test]
fn the_languages_toml_snippet_is_valid() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../editors/helix/languages.toml"
    ))
    .unwrap();
    let doc: toml::Table = toml::from_str(&text).expect("valid TOML");
    let server = &doc["language-server"]["agent-lsp"];
    assert_eq!(server["command"].as_str(), Some("agent-lsp"));
    // `config` reaches the server as initializationOptions: it must be a valid layer.
    let config = serde_json::to_value(&server["config"]).unwrap();
    let layer = ConfigLayer::from_json(&config).expect("the snippet's settings are valid keys");
    assert!(layer.provider.is_some());
    let languages = doc["language"].as_array().unwrap();
    assert!(!languages.is_empty());
    for lang in languages {
        let servers = lang["language-servers"].as_array().unwrap();
        assert!(
            servers.iter().any(|s| s.as_str() == Some("agent-lsp")),
            "{lang:?}"
        );
    }
}
