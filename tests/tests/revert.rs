//! Snapshots, revert, undo and redo through the real binary, with fake-llm scripts that
//! write, edit, delete, rename, chmod, create folders, binary files and symlinks.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use agent_lsp_tests::cli_run::point_at;
use agent_lsp_tests::process::{FakeLlm, TestEnv, git};
use serde_json::{Value, json};

fn files(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap().flatten() {
            let p = e.path();
            let ft = e.file_type().unwrap();
            if ft.is_symlink() {
                out.insert(
                    p.clone(),
                    format!("-> {}", std::fs::read_link(&p).unwrap().display()).into_bytes(),
                );
            } else if ft.is_dir() {
                // Folders count too: an empty one the turn made or removed must come back.
                out.insert(p.clone(), b"<folder>".to_vec());
                stack.push(p);
            } else {
                let mode = std::fs::metadata(&p).unwrap().permissions().mode() & 0o777;
                let mut bytes = std::fs::read(&p).unwrap();
                bytes.extend(format!(" [mode {mode:o}]").into_bytes());
                out.insert(p, bytes);
            }
        }
    }
    out
}

/// The work tree without `.git` and without agent-lsp's own folder (the first run seeds the
/// project's memory there; reverts leave it alone).
fn work_tree(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    files(dir)
        .into_iter()
        .filter(|(p, _)| !p.starts_with(dir.join(".git")) && !p.starts_with(dir.join(".agent-lsp")))
        .collect()
}

fn setup(llm: &FakeLlm, with_git: bool, extra: &str) -> TestEnv {
    let env = TestEnv::new();
    point_at(&env, llm, extra);
    let ws = env.workspace();
    std::fs::create_dir_all(ws.join("src")).unwrap();
    std::fs::write(ws.join("src/lib.rs"), "pub fn one() -> u32 { 1 }\n").unwrap();
    std::fs::write(ws.join("old-name.txt"), "to be renamed\n").unwrap();
    std::fs::write(ws.join("doomed.txt"), "to be deleted\n").unwrap();
    std::fs::write(ws.join("run.sh"), "echo hi\n").unwrap();
    std::fs::write(ws.join("notes 日本.md"), "unicode\n").unwrap();
    if with_git {
        std::fs::write(ws.join(".gitignore"), "build/\n").unwrap();
        git(&ws, &["init", "-q"]);
        git(&ws, &["add", "."]);
        git(&ws, &["commit", "-qm", "init"]);
    }
    env
}

fn run(env: &TestEnv, args: &[&str]) -> Vec<Value> {
    let out = env
        .command(&[
            "run",
            "--json",
            "--mode",
            "auto",
            "--cwd",
            env.workspace().to_str().unwrap(),
        ])
        .args(args)
        .env("FAKE_KEY", "k")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let lines: Vec<Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(
        out.status.success(),
        "{}\n{lines:?}",
        String::from_utf8_lossy(&out.stderr)
    );
    lines
}

fn session_json(env: &TestEnv, args: &[&str]) -> (i32, Value, String) {
    let (code, out, err) = env.run(&[&["session"], args, &["--json"]].concat());
    (code, serde_json::from_str(&out).unwrap_or(Value::Null), err)
}

fn show(env: &TestEnv, sid: &str) -> Value {
    session_json(env, &["show", sid]).1
}

fn user_messages(view: &Value) -> Vec<String> {
    view["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "user")
        .map(|m| m["messageId"].as_str().unwrap().to_string())
        .collect()
}

fn busy_script() -> Value {
    json!({"turns": [
        {"reply": {"tool_calls": [
            {"name": "edit", "arguments": {"filePath": "src/lib.rs", "oldString": "{ 1 }", "newString": "{ 2 }"}},
            {"name": "write", "arguments": {"filePath": "new/deep/folder/made.txt", "content": "made by the agent\n"}},
            {"name": "apply_patch", "arguments": {"patchText": "*** Begin Patch\n*** Update File: old-name.txt\n*** Move to: renamed.txt\n@@\n-to be renamed\n+renamed\n*** Delete File: doomed.txt\n*** End Patch"}}
        ]}},
        {"reply": {"tool_calls": [
            {"name": "bash", "arguments": {"command": "chmod +x run.sh && printf '\\x00\\x01\\x02binary' > blob.bin && ln -s src/lib.rs link.rs && mkdir -p build && echo ignored > build/out.txt"}}
        ]}},
        {"reply": {"text": "All done."}}
    ]})
}

#[test]
fn a_turn_full_of_changes_reverts_redoes_and_commits_without_touching_git() {
    for with_git in [true, false] {
        let llm = FakeLlm::start(&busy_script(), "openai");
        let env = setup(&llm, with_git, "");
        let ws = env.workspace();
        let git_before = if with_git {
            files(&ws.join(".git"))
        } else {
            BTreeMap::new()
        };
        let before = work_tree(&ws);

        let lines = run(&env, &["change many things"]);
        let sid = lines[0]["session_id"].as_str().unwrap().to_string();
        let after = work_tree(&ws);
        assert_ne!(before, after);
        assert!(ws.join("renamed.txt").exists() && !ws.join("doomed.txt").exists());
        assert!(
            std::fs::symlink_metadata(ws.join("link.rs"))
                .unwrap()
                .file_type()
                .is_symlink()
        );

        let view = show(&env, &sid);
        let patches: Vec<&Value> = view["messages"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|m| m["parts"].as_array().unwrap())
            .filter(|p| p["kind"] == "patch")
            .collect();
        assert_eq!(
            patches.len(),
            2,
            "one patch part per step that changed files"
        );
        let first_user = user_messages(&view)[0].clone();

        // Revert the whole turn: every file as before (build/ is ignored and stays).
        let (code, info, err) = session_json(&env, &["revert", &sid, &first_user]);
        assert_eq!(code, 0, "{err}");
        assert!(info["files"].as_array().unwrap().len() >= 7, "{info}");
        assert!(info["diff"].as_str().unwrap().contains("renamed"), "{info}");
        let reverted: BTreeMap<_, _> = work_tree(&ws)
            .into_iter()
            .filter(|(p, _)| !p.starts_with(ws.join("build")))
            .collect();
        assert_eq!(reverted, before, "with_git={with_git}");
        assert!(
            !ws.join("new").exists(),
            "folders the agent created are removed"
        );
        assert_eq!(
            show(&env, &sid)["messages"].as_array().unwrap().len(),
            view["messages"].as_array().unwrap().len(),
            "messages kept while staged"
        );

        // Redo, then revert again.
        let (code, _, err) = session_json(&env, &["unrevert", &sid]);
        assert_eq!(code, 0, "{err}");
        assert_eq!(work_tree(&ws), after);
        let (code, _, _) = session_json(&env, &["revert", &sid, &first_user]);
        assert_eq!(code, 0);

        // The next prompt commits the revert: the reverted messages are gone.
        let llm2 = FakeLlm::start(
            &json!({"turns": [{"reply": {"text": "fresh start"}}]}),
            "openai",
        );
        point_at(&env, &llm2, "");
        run(&env, &["--session", &sid, "try again"]);
        let view = show(&env, &sid);
        let texts: Vec<&str> = view["messages"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|m| m["parts"].as_array().unwrap())
            .filter_map(|p| p["data"]["text"].as_str())
            .collect();
        assert!(
            !texts.contains(&"change many things")
                && texts.contains(&"try again")
                && texts.contains(&"fresh start"),
            "{texts:?}"
        );
        assert!(view["revert"].is_null());
        // The request after the commit no longer carries the reverted turn.
        assert!(
            !llm2.requests()[0]
                .body
                .to_string()
                .contains("change many things")
        );

        // The first run seeded the project's memory in a folder that ignores itself.
        assert!(ws.join(".agent-lsp/memory/project.md").exists());
        assert_eq!(
            std::fs::read_to_string(ws.join(".agent-lsp/.gitignore")).unwrap(),
            "# agent-lsp's own files: kept out of git\n*\n"
        );
        if with_git {
            assert_eq!(
                files(&ws.join(".git")),
                git_before,
                "the user's .git is byte-for-byte unchanged (memory seeded, edits, revert, \
                 redo, revert, commit)"
            );
            // (Last: `git status` may refresh the index.) Git shows nothing of ours.
            let status = Command::new("git")
                .args(["status", "--porcelain", "--untracked-files=all"])
                .current_dir(&ws)
                .output()
                .unwrap();
            let status = String::from_utf8_lossy(&status.stdout);
            assert!(!status.contains(".agent-lsp"), "{status}");
        }
    }
}

#[test]
fn undo_reverts_the_last_turn_only_and_keeps_the_users_edits() {
    let script = json!({"turns": [
        {"reply": {"tool_calls": [{"name": "write", "arguments": {"filePath": "a.txt", "content": "turn one\n"}}]}},
        {"reply": {"text": "one"}},
        {"reply": {"tool_calls": [{"name": "write", "arguments": {"filePath": "c.txt", "content": "turn two\n"}},
                                  {"name": "edit", "arguments": {"filePath": "src/lib.rs", "oldString": "{ 1 }", "newString": "{ 3 }"}}]}},
        {"reply": {"text": "two"}}
    ]});
    let llm = FakeLlm::start(&script, "openai");
    let env = setup(&llm, true, "");
    let ws = env.workspace();
    let sid = run(&env, &["first prompt"])[0]["session_id"]
        .as_str()
        .unwrap()
        .to_string();
    // The user edits a file between the turns.
    std::fs::write(ws.join("user.txt"), "the user's own\n").unwrap();
    std::fs::write(ws.join("notes 日本.md"), "edited by the user\n").unwrap();
    run(&env, &["--session", &sid, "second prompt"]);

    let (code, info, err) = session_json(&env, &["undo", &sid]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        info["text"], "second prompt",
        "undo returns the prompt for the input box"
    );
    assert!(!ws.join("c.txt").exists());
    assert_eq!(
        std::fs::read_to_string(ws.join("src/lib.rs")).unwrap(),
        "pub fn one() -> u32 { 1 }\n"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("a.txt")).unwrap(),
        "turn one\n",
        "the first turn stays"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("user.txt")).unwrap(),
        "the user's own\n"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("notes 日本.md")).unwrap(),
        "edited by the user\n"
    );

    // Undo again moves the revert point to the first prompt.
    let (_, info, _) = session_json(&env, &["undo", &sid]);
    assert_eq!(info["text"], "first prompt");
    assert!(!ws.join("a.txt").exists());
    // Redo brings both turns back.
    let (code, _, _) = session_json(&env, &["redo", &sid]);
    assert_eq!(code, 0);
    assert!(ws.join("a.txt").exists() && ws.join("c.txt").exists());
    assert_eq!(
        std::fs::read_to_string(ws.join("user.txt")).unwrap(),
        "the user's own\n"
    );
    let (code, _, err) = session_json(&env, &["redo", &sid]);
    assert_eq!(code, 1);
    assert!(err.contains("nothing to redo"), "{err}");
}

#[test]
fn revert_is_refused_while_running_and_explains_when_snapshots_are_off() {
    let llm = FakeLlm::start(&json!({"turns": [{"reply": {"text": "hi"}}]}), "openai");
    let env = setup(&llm, false, "snapshot = false\n");
    let sid = run(&env, &["hello"])[0]["session_id"]
        .as_str()
        .unwrap()
        .to_string();
    let first = user_messages(&show(&env, &sid))[0].clone();
    let (code, _, err) = session_json(&env, &["revert", &sid, &first]);
    assert_eq!(code, 1);
    assert!(err.contains("snapshots are off"), "{err}");

    let llm = FakeLlm::start(&json!({"turns": [{"reply": {"text": "hi"}}]}), "openai");
    let env = setup(&llm, false, "");
    let sid = run(&env, &["hello"])[0]["session_id"]
        .as_str()
        .unwrap()
        .to_string();
    let first = user_messages(&show(&env, &sid))[0].clone();
    let mut store = agent_lsp::store::Store::open(&env.database()).unwrap();
    store
        .append(
            Some(&sid),
            &agent_lsp::store::Event::SessionStatus {
                status: agent_lsp::status::SessionStatus::Busy,
            },
        )
        .unwrap();
    let (code, _, err) = session_json(&env, &["revert", &sid, &first]);
    assert_eq!(code, 1);
    assert!(err.contains("running"), "{err}");
}

#[test]
fn two_processes_in_one_workspace_at_once() {
    let script = |name: &str| {
        json!({"turns": [
            {"reply": {"tool_calls": [{"name": "write", "arguments": {"filePath": format!("{name}.txt"), "content": name}}]}},
            {"reply": {"tool_calls": [{"name": "bash", "arguments": {"command": format!("echo more >> {name}.txt")}}]}},
            {"reply": {"text": "done"}}
        ]})
    };
    let a = FakeLlm::start(&script("alpha"), "openai");
    let b = FakeLlm::start(&script("beta"), "openai");
    let env = setup(&a, true, "");
    let spawn = |llm: &FakeLlm, prompt: &str| {
        let mut cmd = env.command(&[
            "run",
            "--json",
            "--mode",
            "auto",
            "--cwd",
            env.workspace().to_str().unwrap(),
            "--base-url",
            &format!("{}/v1", llm.url),
            prompt,
        ]);
        cmd.env("FAKE_KEY", "k")
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        cmd.spawn().unwrap()
    };
    let (pa, pb) = (spawn(&a, "alpha"), spawn(&b, "beta"));
    for p in [pa, pb] {
        let out = p.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let ws = env.workspace();
    assert_eq!(
        std::fs::read_to_string(ws.join("alpha.txt")).unwrap(),
        "alphamore\n"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("beta.txt")).unwrap(),
        "betamore\n"
    );
    let (code, list, _) = session_json(&env, &["list"]);
    assert_eq!(code, 0);
    for s in list.as_array().unwrap() {
        let view = show(&env, s["sessionId"].as_str().unwrap());
        let patches = view["messages"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|m| m["parts"].as_array().unwrap())
            .filter(|p| p["kind"] == "patch")
            .count();
        assert_eq!(patches, 2, "{}", s["title"]);
    }
}

#[test]
fn snapshot_stats_and_gc_from_the_command_line() {
    let llm = FakeLlm::start(&busy_script(), "openai");
    let env = setup(&llm, true, "");
    run(&env, &["change many things"]);
    let ws = env.workspace();
    let (code, out, err) = env.run(&["snapshot", "stats", "--cwd", ws.to_str().unwrap()]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("loose objects") && out.contains("packs"),
        "{out}"
    );
    let (code, out, _) = env.run(&["snapshot", "gc", "--cwd", ws.to_str().unwrap()]);
    assert_eq!(code, 0);
    assert_eq!(
        out.trim(),
        "removed 0 unreachable objects",
        "everything is young or referenced"
    );
}

/// A workspace with every kind of path an undo must bring back: nested files, a non-ASCII
/// name, an ignored `.env`, an empty folder, an executable.
fn exact_setup(llm: &FakeLlm, with_git: bool) -> TestEnv {
    let env = setup(llm, with_git, "");
    let ws = env.workspace();
    std::fs::write(ws.join("a.txt"), "alpha\n").unwrap();
    std::fs::create_dir_all(ws.join("src/deep")).unwrap();
    std::fs::write(ws.join("src/deep/x.rs"), "fn x() {}\n").unwrap();
    std::fs::write(ws.join("ünï cödé.txt"), "unicode\n").unwrap();
    std::fs::write(ws.join(".env"), "SECRET=1\n").unwrap();
    std::fs::create_dir_all(ws.join("empty")).unwrap();
    std::fs::set_permissions(ws.join("run.sh"), std::fs::Permissions::from_mode(0o755)).unwrap();
    if with_git {
        std::fs::write(ws.join(".gitignore"), "build/\n.env\n").unwrap();
        git(&ws, &["add", "-A"]);
        git(&ws, &["commit", "-qm", "more"]);
    }
    env
}

fn git_status(ws: &Path) -> String {
    let out = Command::new("git")
        .args([
            "status",
            "--porcelain",
            "--untracked-files=all",
            "--ignored",
        ])
        .current_dir(ws)
        .output()
        .unwrap();
    // The agent's own folder ignores itself; everything else counts, ignored files too.
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter(|l| !l.starts_with("!! .agent-lsp/"))
        .map(|l| format!("{l}\n"))
        .collect()
}

fn bash(command: &str) -> Value {
    json!({"name": "bash", "arguments": {"command": command}})
}

fn patch(text: &str) -> Value {
    json!({"name": "apply_patch", "arguments": {"patchText": format!("*** Begin Patch\n{text}\n*** End Patch")}})
}

/// One turn whose steps make `calls` (one call a step), then `session undo`: the work tree
/// and `git status` are what they were before the session.
fn undo_restores(name: &str, with_git: bool, calls: &[Value]) -> Value {
    let mut turns: Vec<Value> = calls
        .iter()
        .map(|c| json!({"reply": {"tool_calls": [c]}}))
        .collect();
    turns.push(json!({"reply": {"text": "done"}}));
    let llm = FakeLlm::start(&json!({ "turns": turns }), "openai");
    let env = exact_setup(&llm, with_git);
    let ws = env.workspace();
    let (before, status) = (work_tree(&ws), with_git.then(|| git_status(&ws)));
    let sid = run(&env, &["do it"])[0]["session_id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_ne!(work_tree(&ws), before, "{name}: the turn changed nothing");
    let after = work_tree(&ws);
    let (code, info, err) = session_json(&env, &["undo", &sid]);
    assert_eq!(code, 0, "{name}: {err}");
    assert_eq!(work_tree(&ws), before, "{name} (git: {with_git}): {info}");
    if let Some(status) = status {
        assert_eq!(git_status(&ws), status, "{name}");
    }
    assert!(info.get("notRestored").is_none(), "{name}: {info}");
    let (code, _, err) = session_json(&env, &["redo", &sid]);
    assert_eq!(code, 0, "{name}: {err}");
    assert_eq!(work_tree(&ws), after, "{name}: redo");
    info
}

#[test]
fn undo_brings_back_moved_renamed_and_deleted_files() {
    let cases: Vec<(&str, Vec<Value>, bool)> = vec![
        ("bash mv", vec![bash("mv a.txt b.txt")], false),
        ("git mv", vec![bash("git mv a.txt b.txt")], true),
        (
            "mv into a new folder",
            vec![bash("mkdir -p new/dir && mv a.txt new/dir/a.txt")],
            false,
        ),
        (
            "mv of a non-ASCII name",
            vec![bash("mv 'ünï cödé.txt' 'mövéd 日本.txt'")],
            false,
        ),
        ("rm", vec![bash("rm doomed.txt")], false),
        ("rm -r of a folder", vec![bash("rm -r src")], false),
        ("rm of an ignored .env", vec![bash("rm .env")], false),
        (
            "an empty folder removed, one made",
            vec![bash("rmdir empty && mkdir made")],
            false,
        ),
        (
            "a file replaced by a folder",
            vec![bash("rm a.txt && mkdir a.txt && echo in > a.txt/in")],
            false,
        ),
        (
            "a folder replaced by a file",
            vec![bash("rm -r src && echo flat > src")],
            false,
        ),
        (
            "a symlink replacing a file",
            vec![bash("rm a.txt && ln -s doomed.txt a.txt")],
            false,
        ),
        (
            "executable bit",
            vec![bash("chmod -x run.sh && chmod +x a.txt")],
            false,
        ),
        (
            "apply_patch Move to",
            vec![patch(
                "*** Update File: a.txt\n*** Move to: moved/b.txt\n@@\n-alpha\n+beta",
            )],
            false,
        ),
        (
            "apply_patch Delete + Add",
            vec![patch("*** Delete File: a.txt\n*** Add File: b.txt\n+alpha")],
            false,
        ),
        (
            "a turn mixing them",
            vec![
                bash(
                    "mv a.txt b.txt && git mv -f doomed.txt gone.txt 2>/dev/null || mv doomed.txt gone.txt",
                ),
                patch("*** Update File: b.txt\n*** Move to: c/d.txt\n@@\n-alpha\n+gamma"),
                bash("rm -r src/deep && rm .env && mkdir -p x/y"),
                json!({"name": "write", "arguments": {"filePath": "src/new.rs", "content": "new\n"}}),
            ],
            false,
        ),
    ];
    for (name, calls, git_only) in cases {
        for with_git in [true, false] {
            if git_only && !with_git {
                continue;
            }
            undo_restores(name, with_git, &calls);
        }
    }
}

#[test]
fn undo_keeps_a_moved_file_the_user_edited_and_names_what_it_cannot_restore() {
    let script = json!({"turns": [
        {"reply": {"tool_calls": [bash("mv a.txt b.txt && rm -r node_modules/pkg && rm big.bin")]}},
        {"reply": {"text": "done"}}
    ]});
    let llm = FakeLlm::start(&script, "openai");
    let env = exact_setup(&llm, true);
    let ws = env.workspace();
    std::fs::create_dir_all(ws.join("node_modules/pkg")).unwrap();
    std::fs::write(ws.join("node_modules/pkg/index.js"), "x\n").unwrap();
    std::fs::write(ws.join("big.bin"), vec![1u8; 3 * 1024 * 1024]).unwrap();
    let sid = run(&env, &["move it"])[0]["session_id"]
        .as_str()
        .unwrap()
        .to_string();
    // The user edits the moved file after the turn.
    std::fs::write(ws.join("b.txt"), "the user's words\n").unwrap();
    let (code, info, err) = session_json(&env, &["undo", &sid]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        std::fs::read_to_string(ws.join("a.txt")).unwrap(),
        "alpha\n",
        "the moved file's old side comes back"
    );
    assert_eq!(
        std::fs::read_to_string(ws.join("b.txt")).unwrap(),
        "the user's words\n",
        "the user's edit is not overwritten: {info}"
    );
    let left: BTreeMap<String, String> = info["notRestored"]
        .as_array()
        .unwrap_or_else(|| panic!("{info}"))
        .iter()
        .map(|u| {
            (
                u["path"].as_str().unwrap().into(),
                u["reason"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert!(left["b.txt"].contains("changed since"), "{left:?}");
    assert!(
        left["node_modules"].contains("not in the snapshots"),
        "{left:?}"
    );
    assert!(left["big.bin"].contains("not in the snapshots"), "{left:?}");
    // Redo, and the text form of undo names them too.
    let (code, _, err) = session_json(&env, &["redo", &sid]);
    assert_eq!(code, 0, "{err}");
    let (code, out, err) = env.run(&["session", "undo", &sid]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("left as they are:")
            && out.contains("b.txt: changed since the agent's turn")
            && out.contains("node_modules: not in the snapshots"),
        "{out}"
    );
}
