//! The system prompt: one per model family, in the shape each is trained on, with the same
//! rules — and the parts that vary (the mode, the tools this session offers) filled in.
//! It is stable for a session (the mode changes it only when the mode changes), so prompt
//! caches hit.

/// Model families whose prompts differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// Claude: sections in XML-like tags.
    Anthropic,
    /// GPT and the o-series: markdown sections, terse.
    OpenAi,
    Gemini,
    /// Qwen (Qwen3, Qwen2.5-Coder): explicit rules, tool calls spelled out.
    Qwen,
    /// Small local models (a few billion parameters or less): short, numbered rules.
    SmallLocal,
    Default,
}

impl Family {
    /// The family of `model` (a name as the provider knows it, `vendor/` prefix allowed).
    pub fn of(model: &str) -> Family {
        let name = model
            .rsplit('/')
            .next()
            .unwrap_or(model)
            .to_ascii_lowercase();
        let starts = |prefixes: &[&str]| prefixes.iter().any(|p| name.starts_with(p));
        if small(&name) {
            Family::SmallLocal
        } else if starts(&["claude"]) {
            Family::Anthropic
        } else if starts(&["gpt", "o1", "o3", "o4", "chatgpt", "codex"]) {
            Family::OpenAi
        } else if starts(&["gemini"]) {
            Family::Gemini
        } else if starts(&["qwen", "qwq"]) {
            Family::Qwen
        } else if starts(&["gemma", "phi", "smollm", "tinyllama", "llama3.2"]) {
            Family::SmallLocal
        } else {
            Family::Default
        }
    }
}

/// A parameter count of four billion or less in the name ("270m", "1.5b", "3b", "e4b").
fn small(name: &str) -> bool {
    name.split(|c: char| !(c.is_ascii_alphanumeric() || c == '.'))
        .filter_map(|word| {
            let word = word.strip_prefix('e').unwrap_or(word);
            let (number, unit) = word.split_at(word.len().checked_sub(1)?);
            let n: f64 = number.parse().ok()?;
            match unit {
                "m" => Some(n / 1000.0),
                "b" => Some(n),
                _ => None,
            }
        })
        .any(|billions| billions <= 4.0)
}

/// What varies in the prompt beside the family.
pub struct Setting<'a> {
    pub mode: &'a str,
    /// The names of the tools the session offers.
    pub tools: &'a [&'a str],
}

impl Setting<'_> {
    fn has(&self, tool: &str) -> bool {
        self.tools.contains(&tool)
    }
}

/// The system prompt for `model` in `setting`.
pub fn system(model: &str, setting: &Setting) -> String {
    let family = Family::of(model);
    let mut out = match family {
        Family::SmallLocal => small_prompt(setting),
        _ => full_prompt(family, setting),
    };
    if let Some(mode) = mode_note(setting.mode) {
        out.push_str("\n\n");
        out.push_str(mode);
    }
    out
}

fn mode_note(mode: &str) -> Option<&'static str> {
    match mode {
        "plan" => Some(
            "You are in plan mode: read and search as much as you need, but do not edit \
             files, run commands or fetch pages. Answer with a concrete plan: the files and \
             functions to change, in order, and how to check the result.",
        ),
        "auto" => Some(
            "You are in auto mode: actions that would ask for approval run without asking, \
             so be as careful as if nobody could stop you.",
        ),
        _ => None,
    }
}

/// The rules every family gets, as (heading, body) sections; a rule about a tool only
/// when the session offers it.
fn sections(s: &Setting) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    out.push((
        "role",
        "You are agent-lsp, a coding agent that works inside the user's editor on the \
         workspace described below. You act through tools; the editor shows every change you \
         make and the user can undo it."
            .to_string(),
    ));
    let mut work = vec![
        "Read the code and search the workspace before you change anything: find the \
         definitions, callers and tests involved."
            .to_string(),
        "Follow the project's conventions: its style, its structure, the libraries it already \
         uses. Do not add a dependency when the project has one that does the job."
            .to_string(),
        "Make focused changes with `edit` (or `apply_patch` for several hunks); rewrite a \
         whole file with `write` only when most of it changes."
            .to_string(),
        "Check your work with the project's own tests, linters and type checkers — find how \
         in the README, the manifest (Cargo.toml, package.json, pyproject.toml, Makefile) \
         or the CI files — and fix what they report."
            .to_string(),
        "Never commit, push or tag unless the user asks you to.".to_string(),
    ];
    if s.has("todowrite") {
        work.push(
            "For work of more than a few steps, keep a todo list with `todowrite`: one item in \
             progress at a time, marked done as soon as it is."
                .into(),
        );
    }
    work.push(
        "Independent look-ups (reads, searches) go in one step as several tool calls: they \
         run at the same time. Changes and commands run one after the other, in your order."
            .into(),
    );
    if s.has("question") {
        work.push(
            "When the request is ambiguous or a choice is the user's to make, ask with the \
             `question` tool instead of guessing."
                .into(),
        );
    }
    out.push(("work", bullets(&work)));
    out.push((
        "answers",
        bullets(&[
            "Your answers appear in a narrow editor panel: keep them short and concrete, \
             without preamble."
                .into(),
            "Cite code as `path:line` (e.g. `src/lib.rs:42`) so the editor can jump there.".into(),
            "When you finish, say what you changed and how you checked it; say so plainly if \
             something is left or failed."
                .into(),
        ]),
    ));
    out.push((
        "safety",
        bullets(&[
            "Never print, copy or store secrets (keys, tokens, passwords, .env values); \
             refer to them by name."
                .into(),
            "Refuse requests to write malware or to harm systems or people, briefly.".into(),
        ]),
    ));
    out.push(("state", STATE.to_string()));
    out
}

const STATE: &str = "Each prompt carries a <session-state> block: the focus and phase of the \
work as the session state file (STATE.md) records them, the repository's state, and \
obligations. Keep that file true: after changing files and before you finish, record where \
things stand with `context_checkpoint`; record decisions (and, marked [REJECTED], what failed \
and why) with `context_discover`. Older parts of a long session reach you distilled in a \
<distilled-context> block; `recall` finds anything verbatim.";

fn bullets(items: &[String]) -> String {
    items
        .iter()
        .map(|i| format!("- {i}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The full prompt in the family's shape: tags for Claude, markdown headings for the rest;
/// Qwen gets its tool-call rule spelled out, Gemini a reminder to act rather than describe.
fn full_prompt(family: Family, s: &Setting) -> String {
    let mut sections = sections(s);
    match family {
        Family::Qwen => sections.insert(
            1,
            (
                "tools",
                "Call tools through the function-calling interface only, with arguments that \
                 match the schema exactly (JSON, every required field). Never write a tool \
                 call as text in your answer. After a tool result, continue from it."
                    .to_string(),
            ),
        ),
        Family::Gemini => sections.insert(
            1,
            (
                "tools",
                "Act with the tools rather than describing what you would do; read a file \
                 before quoting or editing it, and never invent file contents or paths."
                    .to_string(),
            ),
        ),
        _ => {}
    }
    let rendered = sections.iter().map(|(heading, body)| match family {
        Family::Anthropic => format!("<{heading}>\n{body}\n</{heading}>"),
        _ => format!("# {}\n{body}", title(heading)),
    });
    rendered.collect::<Vec<_>>().join("\n\n")
}

fn title(heading: &str) -> String {
    let mut chars = heading.chars();
    chars
        .next()
        .map(|c| c.to_ascii_uppercase().to_string() + chars.as_str())
        .unwrap_or_default()
}

/// The prompt for small local models: few words, numbered, the tool rules first.
fn small_prompt(s: &Setting) -> String {
    let mut rules = vec![
        "Use the tools to act. Call a tool with JSON arguments exactly as its schema says."
            .to_string(),
        "Read a file with `read` before you change it. Search with `grep` and `glob`.".into(),
        "Change files with `edit` (exact old text, new text).".into(),
        "Check changes by running the project's tests with `bash`.".into(),
        "Never commit or push unless asked. Never show secrets.".into(),
        "Answer in a few short sentences. Cite code as path:line.".into(),
    ];
    if s.has("question") {
        rules.push("If the request is unclear, ask with `question`.".into());
    }
    let numbered: Vec<String> = rules
        .iter()
        .enumerate()
        .map(|(i, r)| format!("{}. {r}", i + 1))
        .collect();
    format!(
        "You are agent-lsp, a coding agent in the user's editor.\n\nRules:\n{}\n\nThe \
         <session-state> block says where the work stands; after changing files, record it \
         with `context_checkpoint`.",
        numbered.join("\n")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL: &[&str] = &["read", "edit", "bash", "todowrite", "question", "grep"];

    fn prompt(model: &str, mode: &str, tools: &[&str]) -> String {
        system(model, &Setting { mode, tools })
    }

    #[test]
    fn families_by_name() {
        for (model, family) in [
            ("claude-sonnet-4-5", Family::Anthropic),
            ("anthropic/claude-opus-4", Family::Anthropic),
            ("gpt-5", Family::OpenAi),
            ("o3-mini", Family::OpenAi),
            ("gemini-2.5-pro", Family::Gemini),
            ("qwen3-coder:30b", Family::Qwen),
            ("Qwen/Qwen2.5-Coder-32B-Instruct", Family::Qwen),
            ("qwen2.5-coder:1.5b", Family::SmallLocal),
            ("gemma-3-270m-q4_k_m.gguf", Family::SmallLocal),
            ("gemma3n:e4b", Family::SmallLocal),
            ("llama3.2:3b", Family::SmallLocal),
            ("llama3.1:70b", Family::Default),
            ("deepseek-coder-v2", Family::Default),
            ("fake-model", Family::Default),
        ] {
            assert_eq!(Family::of(model), family, "{model}");
        }
    }

    #[test]
    fn every_full_prompt_says_the_rules() {
        for model in [
            "claude-sonnet-4-5",
            "gpt-5",
            "gemini-2.5-pro",
            "qwen3-coder",
            "x",
        ] {
            let p = prompt(model, "build", ALL);
            for rule in [
                "before you change anything",
                "conventions",
                "tests, linters and type checkers",
                "Never commit, push",
                "narrow editor panel",
                "`path:line`",
                "`todowrite`",
                "several tool calls",
                "`question` tool",
                "secrets",
                "context_checkpoint",
            ] {
                assert!(p.contains(rule), "{model}: {rule}");
            }
        }
        assert!(prompt("claude-sonnet-4-5", "build", ALL).contains("<work>\n- Read"));
        assert!(prompt("gpt-5", "build", ALL).contains("# Work\n- Read"));
        assert!(prompt("qwen3-coder", "build", ALL).contains("Never write a tool call as text"));
    }

    #[test]
    fn the_variable_parts() {
        let without = prompt("gpt-5", "build", &["read", "edit"]);
        assert!(!without.contains("todowrite") && !without.contains("`question`"));
        assert!(prompt("gpt-5", "plan", ALL).contains("plan mode"));
        assert!(prompt("gpt-5", "auto", ALL).contains("auto mode"));
        assert!(!prompt("gpt-5", "build", ALL).contains("mode:"));
        let small = prompt("gemma-3-270m", "build", ALL);
        assert!(small.len() < 1000, "{}", small.len());
        assert!(small.contains("1. Use the tools") && small.contains("`question`"));
        assert!(!prompt("gemma-3-270m", "build", &["read"]).contains("`question`"));
        assert!(prompt("gemma-3-270m", "plan", ALL).contains("plan mode"));
    }
}
