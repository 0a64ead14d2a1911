//! Keeping the agent's own secrets out of what the model sees.
//!
//! Commands the agent runs (`bash`, local MCP servers) start without the variables that hold
//! provider and cloud credentials, so `env` or `echo $OPENAI_API_KEY` has nothing to print.
//! The key values the agent itself holds are replaced by `[redacted]` in tool results and in
//! error messages before they are stored or sent.

use std::borrow::Cow;

/// Variables no command the agent runs inherits, beside the configured key variables and
/// the user's `scrub_env` additions.
pub const DEFAULT_SCRUBBED: &[&str] = &[
    "OPENAI_API_KEY",
    "ANTHROPIC_API_KEY",
    "AZURE_OPENAI_API_KEY",
    "GEMINI_API_KEY",
    "GOOGLE_API_KEY",
    "MISTRAL_API_KEY",
    "GROQ_API_KEY",
    "OPENROUTER_API_KEY",
    "DEEPSEEK_API_KEY",
    "XAI_API_KEY",
    "TOGETHER_API_KEY",
    "FIREWORKS_API_KEY",
    "COHERE_API_KEY",
    "HF_TOKEN",
    "HUGGING_FACE_HUB_TOKEN",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
    "AZURE_CLIENT_SECRET",
    "GOOGLE_APPLICATION_CREDENTIALS",
];

/// Values shorter than this are not redacted: they would match ordinary text.
const MIN_SECRET_LEN: usize = 8;

/// What commands must not inherit, and the values never to show.
#[derive(Debug, Clone, Default)]
pub struct Secrets {
    vars: Vec<String>,
    values: Vec<String>,
}

impl Secrets {
    pub fn from_config(config: &crate::config::Config) -> Self {
        let mut vars: Vec<String> = DEFAULT_SCRUBBED.iter().map(|v| v.to_string()).collect();
        vars.extend(config.api_key_env.iter().cloned());
        vars.extend(config.embeddings_api_key_env.iter().cloned());
        vars.extend(config.scrub_env.iter().cloned());
        vars.sort();
        vars.dedup();
        let mut values: Vec<String> = vars
            .iter()
            .filter_map(|v| std::env::var(v).ok())
            .map(|v| v.trim().to_string())
            .filter(|v| v.len() >= MIN_SECRET_LEN)
            .collect();
        // Longest first, so a key that contains another is replaced whole.
        values.sort_by_key(|v| std::cmp::Reverse(v.len()));
        values.dedup();
        Self { vars, values }
    }

    /// The variables a command must start without.
    pub fn vars(&self) -> &[String] {
        &self.vars
    }

    /// Removes the variables from a command's environment.
    pub fn scrub(&self, cmd: &mut tokio::process::Command) {
        for v in &self.vars {
            cmd.env_remove(v);
        }
    }

    /// `text` with every known secret value replaced by `[redacted]`.
    pub fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        if !self.values.iter().any(|v| text.contains(v.as_str())) {
            return Cow::Borrowed(text);
        }
        let mut out = text.to_string();
        for v in &self.values {
            out = out.replace(v.as_str(), "[redacted]");
        }
        Cow::Owned(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_redacted_and_short_ones_left() {
        let s = Secrets {
            vars: vec!["K".into()],
            values: vec!["sk-abcdefgh12345".into()],
        };
        assert_eq!(
            s.redact("401: bad key sk-abcdefgh12345 (sk-abcdefgh12345)"),
            "401: bad key [redacted] ([redacted])"
        );
        assert!(matches!(s.redact("nothing here"), Cow::Borrowed(_)));
    }
}
