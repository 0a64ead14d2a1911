//! Permission rules: which tool calls run, which are refused, and which ask the user.
//!
//! Rules come from configuration: per permission key (`read`, `edit`, `bash`, ...), one
//! action or a map of wildcard pattern → action. For a call, the most specific matching
//! pattern wins: the catch-all `*` last, otherwise fewest wildcards, then the longest literal
//! text; ties resolve deny > ask > allow; no match asks. A saved "always" grant turns an ask into an allow, never a deny.
//! The mode applies last: `plan` denies edits, bash and webfetch; `auto` turns asks into
//! allows; an unknown mode denies everything.

pub mod boundary;
pub mod shell;
pub mod wildcard;

use std::collections::BTreeMap;

use crate::config::{Action, PermissionRule};

/// How the agent works in a session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Build,
    /// Read-only: edit, bash and webfetch are denied.
    Plan,
    /// Asks become allows; denies stay.
    Auto,
    /// A mode this version does not know: everything is denied.
    Unknown,
}

impl Mode {
    pub fn parse(name: &str) -> Self {
        match name {
            "build" => Self::Build,
            "plan" => Self::Plan,
            "auto" => Self::Auto,
            _ => Self::Unknown,
        }
    }
}

/// The default read patterns for secret files, matched whatever the case of the path.
const SECRET_PATTERNS: &[&str] = &["*.env", "*.env.*", "*.env.example"];

/// Permission keys that `plan` mode denies.
const WRITING_KEYS: &[&str] = &["edit", "bash", "webfetch"];

/// The built-in rules that configuration is merged over.
pub fn default_rules() -> BTreeMap<String, PermissionRule> {
    use Action::*;
    let one = |a| PermissionRule::Action(a);
    let map = |pairs: &[(&str, Action)]| {
        PermissionRule::Patterns(pairs.iter().map(|(p, a)| (p.to_string(), *a)).collect())
    };
    [
        (
            "read",
            map(&[
                ("*", Allow),
                (SECRET_PATTERNS[0], Ask),
                (SECRET_PATTERNS[1], Ask),
                (SECRET_PATTERNS[2], Allow),
            ]),
        ),
        ("edit", one(Ask)),
        ("glob", one(Allow)),
        ("grep", one(Allow)),
        ("bash", one(Ask)),
        ("webfetch", one(Ask)),
        ("question", one(Allow)),
        ("skill", one(Allow)),
        ("todo", one(Allow)),
        ("external_directory", one(Deny)),
        ("doom_loop", one(Ask)),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_string(), v))
    .collect()
}

/// Configuration over the defaults. A pattern map merges into the default map (same
/// pattern: configuration wins); a single action replaces the key's rules.
pub fn merge_rules(config: &BTreeMap<String, PermissionRule>) -> BTreeMap<String, PermissionRule> {
    let mut rules = default_rules();
    for (key, rule) in config {
        match (rules.get_mut(key), rule) {
            (Some(PermissionRule::Patterns(base)), PermissionRule::Patterns(over)) => {
                base.extend(over.iter().map(|(p, a)| (p.clone(), *a)));
            }
            (Some(PermissionRule::Action(base)), PermissionRule::Patterns(over)) => {
                let mut merged: BTreeMap<String, Action> =
                    [("*".to_string(), *base)].into_iter().collect();
                merged.extend(over.iter().map(|(p, a)| (p.clone(), *a)));
                rules.insert(key.clone(), PermissionRule::Patterns(merged));
            }
            _ => {
                rules.insert(key.clone(), rule.clone());
            }
        }
    }
    rules
}

/// The action the rules give one pattern of one key, before grants and mode.
pub fn rule_action(rules: &BTreeMap<String, PermissionRule>, key: &str, pattern: &str) -> Action {
    winning_rule(rules, key, pattern).1
}

/// The rule that decides one pattern of one key: its pattern (`None` for a key's single
/// action, which is a catch-all, or when no rule matches) and its action.
fn winning_rule<'r>(
    rules: &'r BTreeMap<String, PermissionRule>,
    key: &str,
    pattern: &str,
) -> (Option<&'r str>, Action) {
    match rules.get(key) {
        None => (None, Action::Ask),
        Some(PermissionRule::Action(a)) => (None, *a),
        Some(PermissionRule::Patterns(map)) => map
            .iter()
            .filter(|(p, _)| {
                wildcard::matches(p, pattern)
                    // `.ENV` and `.Env.local` are secrets as much as `.env`.
                    || SECRET_PATTERNS.contains(&p.as_str())
                        && wildcard::matches(p, &pattern.to_lowercase())
            })
            .max_by(|(pa, aa), (pb, ab)| {
                // A pattern of wildcards alone (`*`) is the catch-all and ranks last;
                // otherwise fewer wildcards, then more literal text, is more specific.
                let key = |p: &str| {
                    let (wild, literal) = wildcard::specificity(p);
                    (literal > 0, std::cmp::Reverse(wild), literal)
                };
                key(pa).cmp(&key(pb)).then(aa.cmp(ab)) // Deny > Ask > Allow on ties
            })
            .map(|(p, a)| (Some(p.as_str()), *a))
            .unwrap_or((None, Action::Ask)),
    }
}

/// Everything that decides a call: the merged rules, the mode, and saved grants
/// (`(permission key, pattern)` pairs answered "always" for this project).
#[derive(Debug, Clone)]
pub struct Policy {
    pub rules: BTreeMap<String, PermissionRule>,
    pub mode: Mode,
    pub grants: Vec<(String, String)>,
}

impl Policy {
    pub fn new(config: &crate::config::Config) -> Self {
        Self {
            rules: merge_rules(&config.permission),
            mode: Mode::parse(&config.mode),
            grants: Vec::new(),
        }
    }

    /// The decision for one pattern of one key.
    pub fn decide(&self, key: &str, pattern: &str) -> Action {
        self.decide_named(key, pattern, &|_| true)
    }

    /// The decision for an opaque shell command (see [`shell::Opaque`]): a rule or a saved
    /// answer allows it only when `names` accepts that rule's pattern; one that matched it
    /// by a wildcard alone asks instead. A deny denies as always.
    pub fn decide_opaque(&self, key: &str, opaque: &shell::Opaque) -> Action {
        self.decide_named(key, &opaque.pattern, &|p| opaque.named_by(p))
    }

    fn decide_named(&self, key: &str, pattern: &str, names: &dyn Fn(&str) -> bool) -> Action {
        if self.mode == Mode::Unknown {
            return Action::Deny;
        }
        if self.mode == Mode::Plan && WRITING_KEYS.contains(&key) {
            return Action::Deny;
        }
        let mut action = match winning_rule(&self.rules, key, pattern) {
            // A key's single action is a catch-all.
            (rule, Action::Allow) if !names(rule.unwrap_or("*")) => Action::Ask,
            (_, action) => action,
        };
        if action == Action::Ask
            && self
                .grants
                .iter()
                .any(|(k, p)| k == key && wildcard::matches(p, pattern) && names(p))
        {
            action = Action::Allow;
        }
        if action == Action::Ask && self.mode == Mode::Auto {
            // Nobody watches an auto turn: a model repeating itself is stopped, not waved on.
            action = if key == "doom_loop" {
                Action::Deny
            } else {
                Action::Allow
            };
        }
        action
    }

    /// The decision for a call with several patterns: any deny denies, else any ask asks.
    pub fn decide_all<'a>(&self, key: &str, patterns: impl IntoIterator<Item = &'a str>) -> Action {
        patterns
            .into_iter()
            .map(|p| self.decide(key, p))
            .max()
            .unwrap_or_else(|| self.decide(key, "*"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::ConfigLayer;
    use Action::*;

    fn policy(toml: &str, mode: &str) -> Policy {
        let layer = ConfigLayer::from_toml(toml).unwrap();
        let config = crate::config::Config {
            permission: layer.permission.unwrap_or_default(),
            mode: mode.into(),
            ..Default::default()
        };
        Policy::new(&config)
    }

    #[test]
    fn the_default_secret_patterns_ignore_case() {
        let p = policy("", "build");
        for path in [
            ".env",
            "prod.ENV",
            "x.ENV.local",
            "a/.Env.local",
            "b/.env.production",
        ] {
            assert_eq!(p.decide("read", path), Ask, "{path}");
        }
        assert_eq!(p.decide("read", "x.ENV.example"), Allow);
        assert_eq!(p.decide("read", "src/environment.rs"), Allow);
    }

    #[test]
    fn evaluation_table() {
        let p = policy(
            r#"
            [permission]
            bash = { "*" = "ask", "git status*" = "allow", "git *" = "ask", "rm -rf *" = "deny", "rm -rf /tmp/x" = "allow" }
            edit = { "*" = "ask", "docs/*" = "allow", "secrets/*" = "deny" }
            webfetch = "deny"
            "#,
            "build",
        );
        let table: &[(&str, &str, Action)] = &[
            ("bash", "ls", Ask),
            ("bash", "git status", Allow),
            ("bash", "git status --short", Allow),
            ("bash", "git push", Ask),
            ("bash", "rm -rf build", Deny),
            // More specific (no wildcard) beats the deny.
            ("bash", "rm -rf /tmp/x", Allow),
            ("edit", "src/main.rs", Ask),
            ("edit", "docs/guide.md", Allow),
            ("edit", "secrets/key.pem", Deny),
            ("webfetch", "https://example.com", Deny),
            // Defaults survive a config that does not mention the key.
            ("read", "src/lib.rs", Allow),
            ("read", ".env", Ask),
            ("read", "config/.env.local", Ask),
            ("read", ".env.example", Allow),
            ("external_directory", "/etc/passwd", Deny),
            ("question", "*", Allow),
            ("doom_loop", "read", Ask),
            ("no_such_key", "x", Ask),
        ];
        for (key, pattern, want) in table {
            assert_eq!(p.decide(key, pattern), *want, "{key} {pattern}");
        }
        println!("permission table: {} cases", table.len());
    }

    #[test]
    fn ties_resolve_deny_over_ask_over_allow() {
        let p = policy(
            r#"
            [permission]
            bash = { "a*" = "allow", "*b" = "deny", "*c" = "ask" }
            "#,
            "build",
        );
        // "ab": "a*" and "*b" both one wildcard, one literal char: deny wins.
        assert_eq!(p.decide("bash", "ab"), Deny);
        assert_eq!(p.decide("bash", "ac"), Ask);
    }

    #[test]
    fn saved_always_never_beats_a_configured_deny() {
        let mut p = policy(
            r#"
            [permission]
            bash = { "*" = "ask", "rm *" = "deny" }
            "#,
            "build",
        );
        p.grants.push(("bash".into(), "*".into()));
        p.grants.push(("bash".into(), "rm *".into()));
        assert_eq!(
            p.decide("bash", "cargo test"),
            Allow,
            "grant turns ask into allow"
        );
        assert_eq!(
            p.decide("bash", "rm -rf src"),
            Deny,
            "grant never beats deny"
        );
        assert_eq!(p.decide("edit", "x"), Ask, "grants are per key");
    }

    #[test]
    fn modes() {
        let plan = policy("", "plan");
        assert_eq!(plan.decide("edit", "a.rs"), Deny);
        assert_eq!(plan.decide("bash", "ls"), Deny);
        assert_eq!(plan.decide("webfetch", "https://x"), Deny);
        assert_eq!(plan.decide("read", "a.rs"), Allow);
        let auto = policy(
            r#"
            [permission]
            bash = { "*" = "ask", "rm *" = "deny" }
            "#,
            "auto",
        );
        assert_eq!(auto.decide("bash", "ls"), Allow);
        assert_eq!(auto.decide("bash", "rm x"), Deny);
        assert_eq!(auto.decide("external_directory", "/etc"), Deny);
        assert_eq!(auto.decide("doom_loop", "read"), Deny, "a loop is stopped");
        let allowed = policy("[permission]\ndoom_loop = \"allow\"\n", "auto");
        assert_eq!(
            allowed.decide("doom_loop", "read"),
            Allow,
            "unless the user says"
        );
        let unknown = policy("", "yolo");
        assert_eq!(unknown.decide("read", "a.rs"), Deny);
        assert_eq!(unknown.decide("question", "*"), Deny);
    }

    #[test]
    fn several_patterns_take_the_strictest() {
        let p = policy("", "build");
        assert_eq!(p.decide_all("read", ["a.rs", "b.rs"]), Allow);
        assert_eq!(p.decide_all("read", ["a.rs", ".env"]), Ask);
        assert_eq!(p.decide_all("external_directory", ["/x"]), Deny);
    }

    #[test]
    fn single_action_in_config_replaces_the_default_map() {
        let p = policy("[permission]\nread = \"allow\"\n", "build");
        assert_eq!(p.decide("read", ".env"), Allow);
        let p = policy(
            "[permission]\nread = { \"secret/*\" = \"deny\" }\n",
            "build",
        );
        assert_eq!(p.decide("read", ".env"), Ask, "map merges into defaults");
        assert_eq!(p.decide("read", "secret/a"), Deny);
        let p = policy("[permission]\nedit = { \"docs/*\" = \"allow\" }\n", "build");
        assert_eq!(
            p.decide("edit", "src/a.rs"),
            Ask,
            "the default action stays as *"
        );
    }
}
