//! The model's context window, asked of the server that runs it rather than guessed from
//! its name: llama.cpp (`/props`), vLLM and OpenRouter (`/v1/models`), LM Studio
//! (`/api/v0/models/…`) and Ollama (`/api/show`, `/api/ps`). Each probe is short and its
//! failure silent; the first that answers wins.

use std::time::Duration;

use serde::Serialize;
use serde_json::{Value, json};

/// How long one probe may take: the server is usually on this machine.
const PROBE_TIMEOUT: Duration = Duration::from_secs(3);

/// What Ollama uses when neither the model nor the server sets `num_ctx`.
pub const OLLAMA_DEFAULT_NUM_CTX: u32 = 4_096;

/// What the server said about the window.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Probe {
    /// The tokens a request may take, as the server will really use them.
    pub window: Option<u32>,
    /// Where it came from ("llama.cpp /props n_ctx").
    pub source: String,
    /// Something the user should know (Ollama cutting prompts at a smaller `num_ctx`).
    pub warning: Option<String>,
}

impl Probe {
    fn found(window: u64, source: &str) -> Option<Probe> {
        let window = u32::try_from(window).ok().filter(|&w| w > 0)?;
        Some(Probe {
            window: Some(window),
            source: source.into(),
            warning: None,
        })
    }
}

/// Asks the OpenAI-compatible server at `base_url` (ending in `/v1` as configured) about
/// `model`'s window; `ollama` tries Ollama's API first.
pub async fn probe(
    http: &reqwest::Client,
    base_url: &str,
    api_key: Option<&str>,
    model: &str,
    ollama: bool,
) -> Probe {
    let base = base_url.trim_end_matches('/');
    let root = base.strip_suffix("/v1").unwrap_or(base);
    let get = |url: String| {
        let mut r = http.get(url).timeout(PROBE_TIMEOUT);
        if let Some(key) = api_key {
            r = r.bearer_auth(key);
        }
        fetch(r)
    };
    if ollama && let Some(p) = ollama_probe(http, root, model).await {
        return p;
    }
    let models = match get(format!("{base}/models")).await {
        Ok(models) => models,
        // Nothing answers there: the other probes would only wait too.
        Err(e) => {
            return Probe {
                source: format!("{base} did not answer: {e}"),
                ..Probe::default()
            };
        }
    };
    if let Some(p) = models.and_then(|m| from_model_list(&m, model)) {
        return p;
    }
    if let Ok(Some(props)) = get(format!("{root}/props")).await {
        let settings = &props["default_generation_settings"];
        let n_ctx = settings["n_ctx"].as_u64().or(props["n_ctx"].as_u64());
        if let Some(p) = n_ctx.and_then(|n| Probe::found(n, "llama.cpp /props n_ctx")) {
            return p;
        }
    }
    if let Ok(Some(info)) = get(format!("{root}/api/v0/models/{model}")).await {
        let loaded = info["loaded_context_length"].as_u64();
        let found = match loaded {
            Some(n) => Probe::found(n, "LM Studio loaded_context_length"),
            None => info["max_context_length"]
                .as_u64()
                .and_then(|n| Probe::found(n, "LM Studio max_context_length")),
        };
        if let Some(p) = found {
            return p;
        }
    }
    if !ollama && let Some(p) = ollama_probe(http, root, model).await {
        return p;
    }
    Probe {
        source: format!("nothing at {base} said"),
        ..Probe::default()
    }
}

/// `/v1/models`: vLLM's `max_model_len`, OpenRouter's `context_length`, llama.cpp's
/// `meta.n_ctx` — for the entry named `model`, or the only one a single-model server lists.
fn from_model_list(list: &Value, model: &str) -> Option<Probe> {
    let data = list["data"].as_array()?;
    let entry = data
        .iter()
        .find(|m| m["id"].as_str() == Some(model))
        .or_else(|| (data.len() == 1).then(|| &data[0]))?;
    let fields: [(&Value, &str); 4] = [
        (&entry["max_model_len"], "vLLM /v1/models max_model_len"),
        (&entry["context_length"], "/v1/models context_length"),
        (
            &entry["top_provider"]["context_length"],
            "OpenRouter top_provider.context_length",
        ),
        (&entry["meta"]["n_ctx"], "llama.cpp /v1/models meta.n_ctx"),
    ];
    fields
        .iter()
        .find_map(|(v, source)| v.as_u64().and_then(|n| Probe::found(n, source)))
}

/// Ollama: the loaded model's context (`/api/ps`), else the model's `num_ctx` parameter
/// (`/api/show`), else Ollama's default — and a warning when that is below what the model
/// takes, since Ollama cuts longer prompts without a word (the tools go first).
async fn ollama_probe(http: &reqwest::Client, root: &str, model: &str) -> Option<Probe> {
    let show = fetch(
        http.post(format!("{root}/api/show"))
            .json(&json!({ "model": model }))
            .timeout(PROBE_TIMEOUT),
    )
    .await
    .ok()
    .flatten()?;
    let trained = show["model_info"].as_object().and_then(|info| {
        info.iter()
            .find(|(k, _)| k.ends_with(".context_length"))
            .and_then(|(_, v)| v.as_u64())
    });
    let num_ctx = show["parameters"].as_str().and_then(|p| {
        p.lines().find_map(|line| {
            let mut words = line.split_whitespace();
            (words.next() == Some("num_ctx"))
                .then(|| words.next()?.parse::<u64>().ok())
                .flatten()
        })
    });
    let loaded = fetch(http.get(format!("{root}/api/ps")).timeout(PROBE_TIMEOUT))
        .await
        .ok()
        .flatten()
        .and_then(|ps| {
            ps["models"].as_array()?.iter().find_map(|m| {
                let named = m["name"].as_str() == Some(model) || m["model"].as_str() == Some(model);
                named.then(|| m["context_length"].as_u64()).flatten()
            })
        });
    let (window, source) = match (loaded, num_ctx) {
        (Some(n), _) => (n, "Ollama /api/ps context_length"),
        (None, Some(n)) => (n, "Ollama /api/show num_ctx"),
        (None, None) => (
            u64::from(OLLAMA_DEFAULT_NUM_CTX),
            "Ollama's default num_ctx",
        ),
    };
    let mut probe = Probe::found(window, source)?;
    if let Some(trained) = trained.filter(|&t| t > window) {
        probe.warning = Some(format!(
            "Ollama runs {model} with a {window}-token context although the model takes \
             {trained}; it cuts longer prompts silently. Raise it (OLLAMA_CONTEXT_LENGTH, or \
             PARAMETER num_ctx in a Modelfile) and set context_window to match."
        ));
    }
    Some(probe)
}

/// A JSON answer; `None` for an answer of another kind (an error status, not JSON); an
/// error when nothing answered.
async fn fetch(request: reqwest::RequestBuilder) -> Result<Option<Value>, reqwest::Error> {
    let resp = request.send().await?;
    if !resp.status().is_success() {
        return Ok(None);
    }
    Ok(resp.json::<Value>().await.ok())
}

/// The window a context-overflow error names (llama.cpp's `n_ctx`), if it does.
pub fn in_overflow_error(body: &str) -> Option<u32> {
    let v: Value = serde_json::from_str(body).ok()?;
    let n = v["error"]["n_ctx"].as_u64()?;
    u32::try_from(n).ok().filter(|&n| n > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn model_lists_of_each_server() {
        let vllm = json!({"data": [{"id": "Qwen/Qwen3-8B", "max_model_len": 32768}]});
        assert_eq!(
            from_model_list(&vllm, "Qwen/Qwen3-8B").unwrap().window,
            Some(32_768)
        );
        let openrouter = json!({"data": [
            {"id": "a/b", "context_length": 1000},
            {"id": "qwen/qwen3-coder", "context_length": 262144}
        ]});
        let p = from_model_list(&openrouter, "qwen/qwen3-coder").unwrap();
        assert_eq!(p.window, Some(262_144));
        assert!(from_model_list(&openrouter, "missing").is_none());
        let lmstudio = json!({"data": [{"id": "x"}, {"id": "y"}]});
        assert!(from_model_list(&lmstudio, "x").is_none());
    }

    #[test]
    fn llama_cpp_names_its_window_in_the_overflow_error() {
        let body = r#"{"error":{"code":400,"message":"the request exceeds the available context size. try increasing the context size or enable context shift","type":"exceed_context_size_error","n_prompt_tokens":14429,"n_ctx":8192}}"#;
        assert_eq!(in_overflow_error(body), Some(8_192));
        assert_eq!(in_overflow_error("{}"), None);
    }
}
