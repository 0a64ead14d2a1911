//! What a shell command line will run, read with a real bash grammar (tree-sitter-bash), for
//! the `bash` permission rules.
//!
//! Every simple command anywhere in the tree is found — at the top, in pipelines and lists,
//! inside command and process substitutions, parameter expansions, arithmetic, strings,
//! here-documents and here-strings, subshells, groups, `if`/`for`/`while`/`case` and function
//! bodies — and becomes a pattern the rules are checked against, its words unquoted.
//! Wrappers that run their arguments (`env`, `sudo`, `xargs`, `timeout`, `find -exec`, ...)
//! are looked through: the wrapped command is checked too. A command word that is a path is
//! also checked by its file name (`/bin/rm` is `rm`).
//!
//! What cannot be known before running — `bash -c` of a string built at run time, `eval`,
//! `source` of a file outside the workspace, a command word made from a variable or a
//! substitution, an interpreter given code (`python -c`), a line the grammar cannot read —
//! is *opaque*: a rule allows it only if its literal text names it (see
//! [`Opaque::named_by`]). Output redirections (`>`, `>>`, `&>`, `>|`) and `tee` files are
//! writes, which the caller checks as edits.

use std::cell::RefCell;

use tree_sitter::{Node, Parser};

/// What a command line will do, as far as can be known before it runs.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Analysis {
    /// Each simple command (and each wrapped one) as the text rules match: its words,
    /// unquoted, joined by single spaces.
    pub commands: Vec<String>,
    /// What cannot be known before running.
    pub opaque: Vec<Opaque>,
    /// Files written by output redirections and `tee`, as written (relative to the workdir).
    pub writes: Vec<String>,
}

/// A command whose effect cannot be known from its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Opaque {
    /// The pattern the rules are checked against (the command's text).
    pub pattern: String,
    /// The words a rule's literal text must begin with to allow it (`python3 -c`, `eval`).
    pub key: String,
    /// Why it cannot be known, for the person asked.
    pub why: &'static str,
}

impl Opaque {
    /// Whether a rule's pattern names this command: its literal text before the first
    /// wildcard begins with the key. `*` or `python3 *` allow nothing opaque; `python3 -c *`
    /// allows `python3 -c ...`.
    pub fn named_by(&self, pattern: &str) -> bool {
        let literal = pattern.split(['*', '?']).next().unwrap_or("");
        pattern == self.pattern || literal.starts_with(&self.key)
    }
}

thread_local! {
    static PARSER: RefCell<Option<Parser>> = const { RefCell::new(None) };
}

/// Parses `command` once and walks it (see the module's doc).
pub fn analyse(command: &str) -> Analysis {
    let mut out = Analysis::default();
    analyse_into(command, &mut out, 0);
    out.commands.dedup();
    out
}

/// Nested `bash -c '...'` strings are parsed too, this deep at most.
const MAX_NESTING: usize = 4;

fn analyse_into(command: &str, out: &mut Analysis, depth: usize) {
    let tree = PARSER.with(|cell| {
        let mut slot = cell.borrow_mut();
        let parser = slot.get_or_insert_with(|| {
            let mut p = Parser::new();
            p.set_language(&tree_sitter_bash::LANGUAGE.into())
                .expect("the bash grammar matches the tree-sitter version");
            p
        });
        parser.parse(command, None)
    });
    let Some(tree) = tree.filter(|t| !t.root_node().has_error()) else {
        out.opaque.push(Opaque {
            pattern: normalise_line(command),
            key: normalise_line(command),
            why: "the shell grammar cannot read this line",
        });
        return;
    };
    let mut walker = Walker {
        src: command.as_bytes(),
        out,
        depth,
    };
    walker.visit(tree.root_node());
}

fn normalise_line(command: &str) -> String {
    command.split_whitespace().collect::<Vec<_>>().join(" ")
}

struct Walker<'a> {
    src: &'a [u8],
    out: &'a mut Analysis,
    depth: usize,
}

/// A word as the shell would see it, when that is known from the text alone.
#[derive(Clone)]
enum Word {
    Literal(String),
    /// Built at run time (an expansion or a substitution); its source text.
    Dynamic(String),
}

impl Word {
    fn text(&self) -> &str {
        match self {
            Self::Literal(t) | Self::Dynamic(t) => t,
        }
    }
}

impl Walker<'_> {
    fn text(&self, node: Node<'_>) -> String {
        String::from_utf8_lossy(&self.src[node.byte_range()]).into_owned()
    }

    fn visit(&mut self, node: Node<'_>) {
        match node.kind() {
            "command" => self.command(node),
            "file_redirect" => self.redirect(node),
            // Inside `${...}` the grammar leaves a backtick substitution (and others after a
            // pattern operator) as plain text, which bash still runs: read it as a script.
            "word" | "regex" | "extglob_pattern" if node.child_count() == 0 => {
                let text = self.text(node);
                if ["`", "$(", "<(", ">("].iter().any(|s| text.contains(s)) {
                    self.nested(&text, &text);
                }
            }
            _ => {}
        }
        let mut cursor = node.walk();
        for child in node.children(&mut cursor) {
            self.visit(child);
        }
    }

    /// The value of a word node: literal when it holds no expansion or substitution.
    fn word(&self, node: Node<'_>) -> Word {
        match node.kind() {
            "word" | "number" => Word::Literal(unescape(&self.text(node))),
            "raw_string" => {
                let t = self.text(node);
                Word::Literal(t.trim_matches('\'').to_string())
            }
            "ansi_c_string" => Word::Dynamic(self.text(node)),
            "string" => {
                let mut cursor = node.walk();
                let mut literal = String::new();
                for part in node.named_children(&mut cursor) {
                    if part.kind() == "string_content" {
                        literal += &unescape_in_quotes(&self.text(part));
                    } else {
                        let t = self.text(node);
                        return Word::Dynamic(t.trim_matches('"').to_string());
                    }
                }
                Word::Literal(literal)
            }
            "concatenation" => {
                let mut cursor = node.walk();
                let mut literal = String::new();
                for part in node.named_children(&mut cursor) {
                    match self.word(part) {
                        Word::Literal(t) => literal += &t,
                        Word::Dynamic(_) => return Word::Dynamic(self.dynamic_text(node)),
                    }
                }
                Word::Literal(literal)
            }
            _ => Word::Dynamic(self.dynamic_text(node)),
        }
    }

    /// The source text of a word built at run time, without its outer double quotes.
    fn dynamic_text(&self, node: Node<'_>) -> String {
        let t = self.text(node);
        match t.strip_prefix('"').and_then(|t| t.strip_suffix('"')) {
            Some(inner) => inner.to_string(),
            None => t,
        }
    }

    fn command(&mut self, node: Node<'_>) {
        let mut words = Vec::new();
        if let Some(inner) = node
            .child_by_field_name("name")
            .and_then(|name| name.named_child(0))
        {
            words.push(self.word(inner));
        }
        let mut cursor = node.walk();
        for arg in node.children_by_field_name("argument", &mut cursor) {
            words.push(self.word(arg));
        }
        self.simple(words);
    }

    /// One simple command's words: its pattern, and what its command word implies.
    fn simple(&mut self, words: Vec<Word>) {
        let Some(first) = words.first() else { return };
        let pattern = words.iter().map(Word::text).collect::<Vec<_>>().join(" ");
        self.out.commands.push(pattern.clone());
        let name = match first {
            Word::Literal(name) => name.clone(),
            Word::Dynamic(_) => {
                self.out.opaque.push(Opaque {
                    key: first.text().to_string(),
                    pattern,
                    why: "the command word is built when it runs (a variable or a substitution)",
                });
                return;
            }
        };
        // `/bin/rm` is `rm` too.
        let base = name.rsplit('/').next().unwrap_or(&name).to_string();
        if base != name && !base.is_empty() {
            let rest: Vec<&str> = words[1..].iter().map(Word::text).collect();
            self.out.commands.push(
                [base.as_str()]
                    .iter()
                    .chain(&rest)
                    .copied()
                    .collect::<Vec<_>>()
                    .join(" "),
            );
        }
        let args = &words[1..];
        self.implications(&base, args, &pattern);
    }

    /// What a known command word implies: wrapped commands, code run from a string, files
    /// written.
    fn implications(&mut self, base: &str, args: &[Word], pattern: &str) {
        let opaque = |key: String, why| Opaque {
            pattern: pattern.to_string(),
            key,
            why,
        };
        match base {
            "eval" => self.out.opaque.push(opaque(
                "eval".into(),
                "eval runs a string built at run time",
            )),
            "source" | "." => {
                // Its file is read as commands: known only when it is the workspace's own,
                // which the caller decides (the pattern names the file).
                self.out.opaque.push(opaque(
                    format!("{base} {}", args.first().map(Word::text).unwrap_or("")),
                    "source runs a file's commands",
                ));
            }
            "bash" | "sh" | "zsh" | "dash" | "ksh" | "fish" => {
                self.shell_string(base, args, pattern)
            }
            "tee" => {
                for a in args.iter().filter(|a| !a.text().starts_with('-')) {
                    self.write_target(a, pattern);
                }
            }
            "find" => self.find(args),
            "watch" => {
                let rest = skip_options(args, &["-n", "--interval", "-q", "--equexit"]);
                let script: Vec<&str> = rest.iter().map(Word::text).collect();
                if !script.is_empty() {
                    self.nested(&script.join(" "), pattern);
                }
            }
            _ => {
                if let Some(key) = interpreter_code(base, args) {
                    self.out.opaque.push(opaque(
                        key,
                        "an interpreter runs code given on the command line",
                    ));
                } else if let Some(wrapped) = wrapped(base, args).filter(|w| !w.is_empty()) {
                    self.simple(wrapped.to_vec());
                }
            }
        }
    }

    /// `bash -c STRING`: the string is parsed too when it is literal, else opaque.
    fn shell_string(&mut self, base: &str, args: &[Word], pattern: &str) {
        let Some(at) = args.iter().position(|a| {
            let t = a.text();
            t.starts_with('-') && !t.starts_with("--") && t.contains('c')
        }) else {
            return; // a script file or stdin: the file is the workspace's business
        };
        match args.get(at + 1) {
            Some(Word::Literal(script)) => self.nested(script, pattern),
            _ => self.out.opaque.push(Opaque {
                pattern: pattern.to_string(),
                key: format!("{base} {}", args[at].text()),
                why: "a shell runs a string built at run time",
            }),
        }
    }

    fn nested(&mut self, script: &str, pattern: &str) {
        if self.depth >= MAX_NESTING {
            self.out.opaque.push(Opaque {
                pattern: pattern.to_string(),
                key: pattern.to_string(),
                why: "shells nested too deep to read",
            });
            return;
        }
        analyse_into(script, self.out, self.depth + 1);
    }

    /// `find ... -exec CMD ... ;` runs CMD; `-delete` deletes (checked as `rm`).
    fn find(&mut self, args: &[Word]) {
        let texts: Vec<&str> = args.iter().map(Word::text).collect();
        let mut i = 0;
        while i < args.len() {
            match texts[i] {
                "-exec" | "-execdir" | "-ok" | "-okdir" => {
                    let end = (i + 1..args.len())
                        .find(|&j| matches!(texts[j], ";" | "\\;" | "+"))
                        .unwrap_or(args.len());
                    if end > i + 1 {
                        self.simple(args[i + 1..end].to_vec());
                    }
                    i = end;
                }
                "-delete" => {
                    let paths: Vec<&str> = texts
                        .iter()
                        .take_while(|t| !t.starts_with('-'))
                        .copied()
                        .collect();
                    let rm = format!("rm -r {}", paths.join(" "));
                    self.out.commands.push(rm.trim_end().to_string());
                }
                _ => {}
            }
            i += 1;
        }
    }

    fn redirect(&mut self, node: Node<'_>) {
        let mut op = String::new();
        let mut cursor = node.walk();
        for child in node.children(&mut cursor) {
            if !child.is_named() {
                op += child.kind();
            }
        }
        if !matches!(op.as_str(), ">" | ">>" | "&>" | "&>>" | ">|") {
            return; // input, or a descriptor duplication (`2>&1`)
        }
        let Some(dest) = node.child_by_field_name("destination") else {
            return;
        };
        let word = self.word(dest);
        let pattern = self.text(node);
        self.write_target(&word, &pattern);
    }

    fn write_target(&mut self, target: &Word, pattern: &str) {
        match target {
            Word::Literal(path) if is_device(path) => {}
            Word::Literal(path) => self.out.writes.push(path.clone()),
            Word::Dynamic(_) => self.out.opaque.push(Opaque {
                pattern: pattern.to_string(),
                key: pattern.to_string(),
                why: "output goes to a file named when it runs",
            }),
        }
    }
}

fn is_device(path: &str) -> bool {
    matches!(
        path,
        "/dev/null" | "/dev/stdout" | "/dev/stderr" | "/dev/tty" | "-"
    ) || path.starts_with("/dev/fd/")
}

/// A bare word's backslash escapes removed (`\;` → `;`).
fn unescape(word: &str) -> String {
    let mut out = String::with_capacity(word.len());
    let mut chars = word.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            if let Some(n) = chars.next() {
                out.push(n);
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Inside double quotes only `\"`, `\\`, `\$` and `` \` `` are escapes.
fn unescape_in_quotes(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' && matches!(chars.peek(), Some('"' | '\\' | '$' | '`')) {
            out.push(chars.next().unwrap_or('\\'));
        } else {
            out.push(c);
        }
    }
    out
}

/// Options of a wrapper that take a value (so the value is not the wrapped command).
fn skip_options<'w>(args: &'w [Word], with_value: &[&str]) -> &'w [Word] {
    let mut i = 0;
    while i < args.len() {
        let t = args[i].text();
        if t == "--" {
            return &args[i + 1..];
        }
        if !t.starts_with('-') || t == "-" {
            break;
        }
        i += if with_value.contains(&t) { 2 } else { 1 };
    }
    &args[i.min(args.len())..]
}

/// The command a wrapper runs, if `base` is one and names one.
fn wrapped<'w>(base: &str, args: &'w [Word]) -> Option<&'w [Word]> {
    let rest = match base {
        "env" => {
            let rest = skip_options(args, &["-u", "--unset", "-C", "--chdir"]);
            let n = rest
                .iter()
                .take_while(
                    |w| matches!(w, Word::Literal(t) if t.contains('=') && !t.starts_with('=')),
                )
                .count();
            &rest[n..]
        }
        "command" | "builtin" | "nohup" | "setsid" => skip_options(args, &[]),
        "exec" => skip_options(args, &["-a"]),
        "nice" => skip_options(args, &["-n", "--adjustment"]),
        "ionice" => skip_options(args, &["-c", "-n", "-p", "-P", "-u"]),
        "time" => skip_options(args, &["-f", "--format", "-o", "--output"]),
        "stdbuf" => skip_options(args, &["-i", "-o", "-e"]),
        "timeout" => {
            let rest = skip_options(args, &["-s", "--signal", "-k", "--kill-after"]);
            rest.get(1..).unwrap_or(&[]) // the duration
        }
        "xargs" => skip_options(
            args,
            &[
                "-I",
                "-i",
                "-n",
                "-P",
                "-d",
                "-L",
                "-l",
                "-s",
                "-E",
                "-e",
                "-a",
                "--arg-file",
                "--delimiter",
                "--max-args",
                "--max-procs",
            ],
        ),
        "sudo" | "doas" => skip_options(
            args,
            &["-u", "-g", "-C", "-D", "-h", "-p", "-r", "-t", "-T", "-U"],
        ),
        "coproc" => args,
        _ => return None,
    };
    Some(rest)
}

/// `python -c CODE`, `node -e CODE`, ...: the words a rule must name to allow it.
fn interpreter_code(base: &str, args: &[Word]) -> Option<String> {
    let flags: &[&str] = if base.starts_with("python") || base == "pypy" || base == "pypy3" {
        &["-c"]
    } else {
        match base {
            "node" | "nodejs" | "bun" => &["-e", "--eval", "-p", "--print"],
            "deno" => &["eval"],
            "perl" => &["-e", "-E"],
            "ruby" | "lua" => &["-e"],
            "php" => &["-r"],
            "osascript" => &["-e"],
            _ => return None,
        }
    };
    let flag = args.iter().map(Word::text).find(|t| {
        flags.contains(t)
            || flags.iter().any(|f| {
                f.len() == 2 && t.starts_with('-') && !t.starts_with("--") && t.ends_with(&f[1..])
            })
    })?;
    Some(format!("{base} {flag}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn has(a: &Analysis, command: &str) -> bool {
        a.commands.iter().any(|c| c == command)
    }

    /// Every place a command substitution can hide: the smuggled `rm -rf x` is found.
    #[test]
    fn substitutions_are_found_wherever_they_hide() {
        let forms = [
            "ls $(rm -rf x)",
            "ls `rm -rf x`",
            "echo \"$(rm -rf x)\"",
            "echo \"a `rm -rf x` b\"",
            "ls $(echo $(rm -rf x))",
            "echo ${X:-$(rm -rf x)}",
            "echo ${X:=`rm -rf x`}",
            "echo $(( $(rm -rf x) + 1 ))",
            "cat <<< $(rm -rf x)",
            "cat <<< \"$(rm -rf x)\"",
            "diff <(rm -rf x) a",
            "tee >(rm -rf x) < a",
            "X=$(rm -rf x) ls",
            "export X=$(rm -rf x)",
            "local X=$(rm -rf x)",
            "ls; rm -rf x",
            "ls && rm -rf x",
            "ls || rm -rf x",
            "ls | rm -rf x",
            "ls & rm -rf x",
            "ls\nrm -rf x",
            "(rm -rf x)",
            "{ rm -rf x; }",
            "if true; then rm -rf x; fi",
            "if rm -rf x; then ls; fi",
            "for f in a; do rm -rf x; done",
            "for f in $(rm -rf x); do ls; done",
            "while rm -rf x; do break; done",
            "until false; do rm -rf x; done",
            "case a in a) rm -rf x;; esac",
            "case $(rm -rf x) in a) ls;; esac",
            "f() { rm -rf x; }; f",
            "! rm -rf x",
            "[[ $(rm -rf x) ]]",
            "test $(rm -rf x)",
            "cat <<EOF\n$(rm -rf x)\nEOF",
            "ls > $(rm -rf x)",
            "echo [$(rm -rf x)]",
            "echo a$(rm -rf x)b",
        ];
        for form in forms {
            let a = analyse(form);
            assert!(has(&a, "rm -rf x"), "{form:?} → {a:?}");
        }
    }

    #[test]
    fn wrappers_are_looked_through() {
        let forms = [
            "env rm -rf x",
            "env -i FOO=1 rm -rf x",
            "env -u HOME rm -rf x",
            "command rm -rf x",
            "builtin rm -rf x",
            "exec rm -rf x",
            "nice -n 5 rm -rf x",
            "nohup rm -rf x",
            "timeout 5 rm -rf x",
            "timeout -s KILL 5 rm -rf x",
            "stdbuf -oL rm -rf x",
            "setsid rm -rf x",
            "xargs rm -rf x",
            "xargs -I {} rm -rf x",
            "sudo rm -rf x",
            "sudo -u root rm -rf x",
            "doas rm -rf x",
            "time rm -rf x",
            "watch -n 1 rm -rf x",
            "find . -exec rm -rf x \\;",
            "find . -execdir rm -rf x +",
            "find . -ok rm -rf x \\;",
            "bash -c 'rm -rf x'",
            "sh -c \"rm -rf x\"",
            "bash -lc 'ls; rm -rf x'",
            "env sudo nice rm -rf x",
        ];
        for form in forms {
            let a = analyse(form);
            assert!(has(&a, "rm -rf x"), "{form:?} → {a:?}");
        }
        let a = analyse("find . -name '*.o' -delete");
        assert!(has(&a, "rm -r ."), "{a:?}");
    }

    #[test]
    fn a_path_as_command_word_is_its_file_name_too() {
        for form in [
            "/bin/rm -rf x",
            "/usr/bin/rm -rf x",
            "./rm -rf x",
            "'/bin/rm' -rf x",
        ] {
            let a = analyse(form);
            assert!(has(&a, "rm -rf x"), "{form:?} → {a:?}");
        }
    }

    #[test]
    fn what_cannot_be_known_is_opaque() {
        let cases = [
            ("R=rm; $R -rf x", "$R"),
            ("$(echo rm) -rf x", "$(echo rm)"),
            ("\"$CMD\" x", "$CMD"),
            ("eval \"rm -rf x\"", "eval"),
            ("bash -c \"$S\"", "bash -c"),
            ("sh -c $S", "sh -c"),
            ("python3 -c 'import os'", "python3 -c"),
            ("python -c 'x'", "python -c"),
            ("node -e 'x'", "node -e"),
            ("perl -e 'x'", "perl -e"),
            ("ruby -e 'x'", "ruby -e"),
            ("source ~/.bashrc", "source ~/.bashrc"),
            (". /tmp/x.sh", ". /tmp/x.sh"),
        ];
        for (form, key) in cases {
            let a = analyse(form);
            assert!(a.opaque.iter().any(|o| o.key == key), "{form:?} → {a:?}");
        }
        // The grammar cannot read it: the whole line.
        let a = analyse("ls $(");
        assert_eq!(a.opaque.len(), 1, "{a:?}");
        assert_eq!(a.opaque[0].key, "ls $(");
    }

    #[test]
    fn a_rule_names_an_opaque_command_only_by_its_literal_text() {
        let a = analyse("python3 -c 'print(1)'");
        let o = &a.opaque[0];
        assert!(o.named_by("python3 -c *"));
        assert!(o.named_by("python3 -c 'print(1)'") || o.named_by(&o.pattern));
        assert!(!o.named_by("*"));
        assert!(!o.named_by("python3 *"));
        assert!(!o.named_by("py*"));
    }

    #[test]
    fn output_redirections_and_tee_are_writes() {
        let cases = [
            ("echo x > out.txt", "out.txt"),
            ("cat a >> log.txt", "log.txt"),
            ("ls &> all.txt", "all.txt"),
            ("ls >| forced.txt", "forced.txt"),
            ("ls 2> err.txt", "err.txt"),
            ("echo x | tee copy.txt", "copy.txt"),
            ("echo x | tee -a appended.txt", "appended.txt"),
            ("echo x > 'quoted name.txt'", "quoted name.txt"),
            ("(echo x) > sub.txt", "sub.txt"),
            ("echo $(echo x > inner.txt)", "inner.txt"),
            ("echo x > /etc/passwd", "/etc/passwd"),
        ];
        for (form, target) in cases {
            let a = analyse(form);
            assert!(a.writes.iter().any(|w| w == target), "{form:?} → {a:?}");
        }
        for harmless in [
            "ls 2>&1",
            "ls > /dev/null",
            "cat < in.txt",
            "ls 2>/dev/null >&2",
        ] {
            let a = analyse(harmless);
            assert!(a.writes.is_empty(), "{harmless:?} → {a:?}");
        }
        let a = analyse("echo x > \"$F\"");
        assert!(a.writes.is_empty() && !a.opaque.is_empty(), "{a:?}");
    }

    #[test]
    fn ordinary_lines_read_as_they_look() {
        let a = analyse("git status && git diff");
        assert_eq!(a.commands, ["git status", "git diff"]);
        assert!(a.opaque.is_empty() && a.writes.is_empty());
        let a = analyse("echo \"$(date)\"");
        assert_eq!(a.commands, ["echo $(date)", "date"]);
        let a = analyse("cargo test -- --nocapture 'a b'");
        assert_eq!(a.commands, ["cargo test -- --nocapture a b"]);
        assert!(a.opaque.is_empty());
    }
}
