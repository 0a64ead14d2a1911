//! Tools through the registry, on real files: the escape table, edits, patches, bash,
//! webfetch against loopback servers.

use std::os::unix::fs::symlink;
use std::time::Duration;

use serde_json::{Value, json};

use super::testing::Fixture;
use super::{CallStatus, Registry};
use crate::editor::PermissionReply;

async fn call(f: &Fixture, name: &str, args: Value) -> super::CallResult {
    let reg = Registry::standard();
    reg.call(name, &args.to_string(), reg.version(), &f.ctx)
        .await
}

fn completed(r: &super::CallResult) -> &str {
    assert_eq!(r.status, CallStatus::Completed, "{}", r.output);
    &r.output
}

#[tokio::test]
async fn registry_errors_are_results() {
    let f = Fixture::new("");
    let reg = Registry::standard();
    let r = reg.call("frobnicate", "{}", reg.version(), &f.ctx).await;
    assert_eq!(r.status, CallStatus::Error);
    assert!(
        r.output.contains("no tool named") && r.output.contains("read"),
        "{}",
        r.output
    );
    let r = reg
        .call("read", "{\"filePath\": ", reg.version(), &f.ctx)
        .await;
    assert!(r.output.contains("not valid JSON"), "{}", r.output);
    let r = reg
        .call("read", "{\"path\": \"x\"}", reg.version(), &f.ctx)
        .await;
    assert!(
        r.output.contains("invalid arguments for read"),
        "{}",
        r.output
    );
    assert!(
        r.output.contains("filePath"),
        "the schema is shown: {}",
        r.output
    );
    let r = reg
        .call("read", "{\"filePath\": \"x\"}", reg.version() + 1, &f.ctx)
        .await;
    assert!(r.output.contains("tool list changed"), "{}", r.output);
    // Every tool has an object schema with properties.
    let defs = reg.definitions(&f.ctx);
    assert_eq!(defs.len(), 26);
    for d in defs {
        assert_eq!(d.parameters["type"], "object", "{}", d.name);
    }
}

/// Every attempt to leave the workspace must be refused (external_directory is deny by
/// default) — whichever tool tries it.
#[tokio::test]
async fn the_escape_table() {
    let f = Fixture::new("[permission]\nbash = \"allow\"\nedit = \"allow\"\n");
    let root = f.root();
    let outside = f.dir.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("secret.txt"), "top secret").unwrap();
    symlink("/etc", root.join("etc-link")).unwrap();
    symlink(&outside, root.join("out-dir")).unwrap();
    symlink(root.join("loop-b"), root.join("loop-a")).unwrap();
    symlink(root.join("loop-a"), root.join("loop-b")).unwrap();
    let secret = outside.join("secret.txt");
    let secret = secret.to_str().unwrap();

    let attempts: Vec<(&str, Value)> = vec![
        ("read", json!({"filePath": "../outside/secret.txt"})),
        ("read", json!({"filePath": secret})),
        ("read", json!({"filePath": "~/.bashrc"})),
        ("read", json!({"filePath": "etc-link/passwd"})),
        ("read", json!({"filePath": "out-dir/secret.txt"})),
        ("read", json!({"filePath": "loop-a/x"})),
        (
            "write",
            json!({"filePath": "../outside/new.txt", "content": "x"}),
        ),
        (
            "write",
            json!({"filePath": "out-dir/new.txt", "content": "x"}),
        ),
        (
            "write",
            json!({"filePath": "/tmp/agent-lsp-escape.txt", "content": "x"}),
        ),
        (
            "edit",
            json!({"filePath": "out-dir/secret.txt", "oldString": "top", "newString": "no"}),
        ),
        ("glob", json!({"pattern": "*", "path": "../.."})),
        ("glob", json!({"pattern": "../../*"})),
        ("grep", json!({"pattern": "secret", "path": "/"})),
        ("grep", json!({"pattern": "secret", "path": "out-dir"})),
        (
            "apply_patch",
            json!({"patchText": "*** Begin Patch\n*** Add File: ../outside/p.txt\n+x\n*** End Patch"}),
        ),
        (
            "apply_patch",
            json!({"patchText": format!("*** Begin Patch\n*** Add File: inside.txt\n+x\n*** Update File: inside2.txt\n*** Move to: ../x\n@@\n-a\n+b\n*** End Patch")}),
        ),
        ("bash", json!({"command": "ls", "workdir": "/"})),
        ("bash", json!({"command": "ls", "workdir": "out-dir"})),
    ];
    f.write("inside2.txt", "a\n");
    let mut refused = 0;
    for (tool, args) in &attempts {
        let r = call(&f, tool, args.clone()).await;
        let ok = r.status != CallStatus::Completed
            && (r.output.contains("external_directory") || r.output.contains("symlink loop"));
        // glob `../../*` searches the workspace only: it may complete, but must list nothing
        // from outside.
        let contained =
            *tool == "glob" && r.status == CallStatus::Completed && !r.output.contains("secret");
        assert!(
            ok || contained,
            "{tool} {args} was not refused: {:?} {}",
            r.status,
            r.output
        );
        refused += 1;
    }
    assert_eq!(
        std::fs::read_to_string(outside.join("secret.txt")).unwrap(),
        "top secret"
    );
    assert!(!outside.join("new.txt").exists() && !outside.join("p.txt").exists());
    assert!(!std::path::Path::new("/tmp/agent-lsp-escape.txt").exists());
    assert!(
        !root.join("inside.txt").exists(),
        "the patch applied nothing"
    );
    println!("escape table: {} tried, {refused} refused", attempts.len());
}

/// A symlink swapped in between the check and the write is refused at the moment of use.
#[tokio::test]
async fn a_symlink_swapped_in_after_the_check_is_refused() {
    let f = Fixture::new("[permission]\nedit = \"allow\"\n");
    let root = f.root();
    let outside = f.dir.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    let mut refused = 0;
    for i in 0..50 {
        let dir = root.join(format!("d{i}"));
        std::fs::create_dir_all(&dir).unwrap();
        let reg = Registry::standard();
        let prepared = {
            use super::Tool as _;
            let tool = super::write::Write;
            tool.prepare_value(
                json!({"filePath": format!("d{i}/f.txt"), "content": "pwned"}),
                &f.ctx,
            )
            .unwrap()
        };
        // The check passed; now the folder becomes a symlink to outside.
        std::fs::remove_dir(&dir).unwrap();
        symlink(&outside, &dir).unwrap();
        let result = (prepared.run)(&f.ctx).await;
        if result.is_err() {
            refused += 1;
        }
        assert!(
            !outside.join("f.txt").exists(),
            "round {i}: wrote through the swapped symlink"
        );
        drop(reg);
    }
    assert_eq!(refused, 50);
}

#[tokio::test]
async fn reads_number_lines_and_see_unsaved_buffers() {
    let f = Fixture::new("");
    f.write("a.txt", "one\ntwo\nthree\n");
    let r = call(
        &f,
        "read",
        json!({"filePath": "a.txt", "offset": 2, "limit": 1}),
    )
    .await;
    let out = completed(&r);
    assert!(out.contains("00002| two") && !out.contains("one"), "{out}");
    assert!(out.contains("continue with offset 3"), "{out}");
    f.editor
        .buffers
        .lock()
        .unwrap()
        .insert(f.root().join("a.txt"), "unsaved\n".into());
    let r = call(&f, "read", json!({"filePath": "a.txt"})).await;
    assert!(completed(&r).contains("00001| unsaved"));
    std::fs::write(f.root().join("img.png"), [0x89, b'P', b'N', b'G', 0, 0, 1]).unwrap();
    let r = call(&f, "read", json!({"filePath": "img.png"})).await;
    assert!(
        r.output.contains("PNG image") && r.status == CallStatus::Error,
        "{}",
        r.output
    );
    let r = call(&f, "read", json!({"filePath": "missing.txt"})).await;
    assert!(r.output.contains("not found"), "{}", r.output);
    // .env asks by default.
    f.write(".env", "KEY=1\n");
    call(&f, "read", json!({"filePath": ".env"})).await;
    assert_eq!(
        f.editor.asked.lock().unwrap().last().unwrap().permission,
        "read"
    );
}

#[tokio::test]
async fn edits_keep_crlf_bom_and_unicode() {
    let f = Fixture::new("[permission]\nedit = \"allow\"\n");
    std::fs::write(
        f.root().join("w.txt"),
        "\u{feff}first\r\nsecond 🦀\r\nthird\r\n",
    )
    .unwrap();
    let r = call(&f, "edit", json!({"filePath": "w.txt", "oldString": "second 🦀\nthird", "newString": "zweite 🐍\ndritte\nvierte"})).await;
    completed(&r);
    assert_eq!(
        f.read("w.txt"),
        "\u{feff}first\r\nzweite 🐍\r\ndritte\r\nvierte\r\n"
    );
    // write keeps them too when overwriting.
    let r = call(
        &f,
        "write",
        json!({"filePath": "w.txt", "content": "a\nb\n"}),
    )
    .await;
    completed(&r);
    assert_eq!(f.read("w.txt"), "\u{feff}a\r\nb\r\n");
    let r = call(
        &f,
        "write",
        json!({"filePath": "new/deep/n.txt", "content": "x\n"}),
    )
    .await;
    completed(&r);
    assert_eq!(f.read("new/deep/n.txt"), "x\n");
}

#[tokio::test]
async fn a_file_changed_on_disk_since_the_read_is_refused() {
    let f = Fixture::new("[permission]\nedit = \"allow\"\n");
    f.write("s.txt", "alpha\nbeta\n");
    completed(&call(&f, "read", json!({"filePath": "s.txt"})).await);
    std::thread::sleep(Duration::from_millis(20));
    f.write("s.txt", "alpha\nbeta\ngamma by the user\n");
    let r = call(
        &f,
        "edit",
        json!({"filePath": "s.txt", "oldString": "alpha", "newString": "ALPHA"}),
    )
    .await;
    assert_eq!(r.status, CallStatus::Error);
    assert!(r.output.contains("Read it again"), "{}", r.output);
    completed(&call(&f, "read", json!({"filePath": "s.txt"})).await);
    completed(
        &call(
            &f,
            "edit",
            json!({"filePath": "s.txt", "oldString": "alpha", "newString": "ALPHA"}),
        )
        .await,
    );
    assert_eq!(f.read("s.txt"), "ALPHA\nbeta\ngamma by the user\n");
}

#[tokio::test]
async fn two_concurrent_edits_to_one_file_both_land() {
    let f = Fixture::new("[permission]\nedit = \"allow\"\n");
    let body: String = (0..200).map(|i| format!("line {i}\n")).collect();
    f.write("c.txt", &body);
    let reg = Registry::standard();
    let a = json!({"filePath": "c.txt", "oldString": "line 10\n", "newString": "LINE TEN\n"})
        .to_string();
    let b = json!({"filePath": "c.txt", "oldString": "line 190\n", "newString": "LINE 190\n"})
        .to_string();
    let (ra, rb) = tokio::join!(
        reg.call("edit", &a, reg.version(), &f.ctx),
        reg.call("edit", &b, reg.version(), &f.ctx)
    );
    completed(&ra);
    completed(&rb);
    let text = f.read("c.txt");
    assert!(
        text.contains("LINE TEN\n") && text.contains("LINE 190\n"),
        "both edits landed"
    );
}

#[tokio::test]
async fn edit_permission_shows_the_diff_and_reject_with_a_message_continues() {
    let f = Fixture::new("");
    f.write("d.txt", "hello\n");
    f.editor
        .replies
        .lock()
        .unwrap()
        .push(PermissionReply::Reject {
            message: Some("use 'hi'".into()),
        });
    let r = call(
        &f,
        "edit",
        json!({"filePath": "d.txt", "oldString": "hello", "newString": "bye"}),
    )
    .await;
    assert_eq!(r.status, CallStatus::Error);
    assert!(r.output.contains("use 'hi'"), "{}", r.output);
    let asked = f.editor.asked.lock().unwrap().last().unwrap().clone();
    assert!(
        asked.diff.as_deref().unwrap().contains("-hello\n+bye"),
        "{asked:?}"
    );
    assert_eq!(f.read("d.txt"), "hello\n");
    f.editor
        .replies
        .lock()
        .unwrap()
        .push(PermissionReply::Reject { message: None });
    let r = call(
        &f,
        "edit",
        json!({"filePath": "d.txt", "oldString": "hello", "newString": "bye"}),
    )
    .await;
    assert_eq!(r.status, CallStatus::Stopped);
    f.editor
        .replies
        .lock()
        .unwrap()
        .push(PermissionReply::Always);
    let r = call(
        &f,
        "edit",
        json!({"filePath": "d.txt", "oldString": "hello", "newString": "bye"}),
    )
    .await;
    completed(&r);
    assert_eq!(r.grants, vec![("edit".to_string(), "*".to_string())]);
}

#[tokio::test]
async fn patches_apply_whole_or_not_at_all() {
    let f = Fixture::new("[permission]\nedit = \"allow\"\n");
    f.write("keep.txt", "a\nb\nc\n");
    f.write("gone.txt", "bye\n");
    f.write("old/name.txt", "x\ny\n");
    f.write("taken.txt", "will be replaced\n");
    let patch = "*** Begin Patch\n\
        *** Add File: added/new.txt\n+fresh\n\
        *** Update File: keep.txt\n@@\n a\n-b\n+B\n c\n*** End of File\n\
        *** Delete File: gone.txt\n\
        *** Update File: old/name.txt\n*** Move to: taken.txt\n@@\n x\n-y\n+Y\n\
        *** End Patch";
    let r = call(&f, "apply_patch", json!({"patchText": patch})).await;
    completed(&r);
    assert_eq!(f.read("added/new.txt"), "fresh\n");
    assert_eq!(f.read("keep.txt"), "a\nB\nc\n");
    assert!(!f.root().join("gone.txt").exists());
    assert!(!f.root().join("old/name.txt").exists());
    assert_eq!(f.read("taken.txt"), "x\nY\n", "moved over an existing file");
    assert_eq!(
        f.editor.asked.lock().unwrap().len(),
        0,
        "edit = allow: no ask"
    );

    // A bad hunk in the last file leaves every file untouched.
    let before = (f.read("keep.txt"), f.read("taken.txt"));
    let bad = "*** Begin Patch\n*** Add File: another.txt\n+x\n*** Update File: keep.txt\n@@\n-a\n+A\n*** Update File: taken.txt\n@@\n-no such line\n+z\n*** End Patch";
    let r = call(&f, "apply_patch", json!({"patchText": bad})).await;
    assert_eq!(r.status, CallStatus::Error);
    assert!(r.output.contains("no such line"), "{}", r.output);
    assert_eq!((f.read("keep.txt"), f.read("taken.txt")), before);
    assert!(!f.root().join("another.txt").exists());
}

#[tokio::test]
async fn one_ask_for_a_whole_patch() {
    let f = Fixture::new("");
    f.write("a.txt", "1\n");
    let patch = "*** Begin Patch\n*** Add File: b.txt\n+2\n*** Update File: a.txt\n@@\n-1\n+one\n*** End Patch";
    completed(&call(&f, "apply_patch", json!({"patchText": patch})).await);
    let asked = f.editor.asked.lock().unwrap().clone();
    assert_eq!(asked.len(), 1);
    assert_eq!(asked[0].patterns, ["b.txt", "a.txt"]);
}

#[tokio::test]
async fn glob_and_grep_honour_gitignore() {
    let f = Fixture::new("");
    f.write(".gitignore", "target/\n*.log\n");
    f.write("src/lib.rs", "pub fn user_store() {}\n");
    f.write("src/main.rs", "fn main() { user_store(); }\n");
    f.write("target/debug/x.rs", "user_store\n");
    f.write("debug.log", "user_store\n");
    f.write("notes.md", "user_store in docs\n");
    let r = call(&f, "glob", json!({"pattern": "**/*.rs"})).await;
    let out = completed(&r);
    assert!(
        out.contains("src/lib.rs") && out.contains("src/main.rs"),
        "{out}"
    );
    assert!(!out.contains("target"), "{out}");
    let r = call(
        &f,
        "grep",
        json!({"pattern": "user_store\\(", "include": "*.rs"}),
    )
    .await;
    let out = completed(&r).to_string();
    assert!(
        out.contains("src/lib.rs:1: pub fn user_store() {}"),
        "{out}"
    );
    assert!(out.contains("src/main.rs:1:"), "{out}");
    assert!(
        !out.contains("target") && !out.contains("debug.log") && !out.contains("notes.md"),
        "{out}"
    );
    let r = call(&f, "grep", json!({"pattern": "(unclosed"})).await;
    assert!(r.output.contains("invalid regex"), "{}", r.output);
}

fn alive(pid: i32) -> bool {
    // A zombie (state Z) is dead for our purposes.
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .trim_start()
            .starts_with('Z'),
        Err(_) => false,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_ends_the_whole_process_group_even_a_stubborn_grandchild() {
    let f = Fixture::new("[permission]\nbash = \"allow\"\n");
    let pidfile = f.root().join("grandchild.pid");
    let command = format!(
        "bash -c 'trap \"\" TERM; echo $$ > {}; while true; do sleep 0.1; done' & wait",
        pidfile.display()
    );
    let reg = Registry::standard();
    let cancel = f.ctx.cancel.clone();
    let args = json!({"command": command}).to_string();
    let call = reg.call("bash", &args, reg.version(), &f.ctx);
    let trigger = async {
        while !pidfile.exists() || std::fs::read_to_string(&pidfile).unwrap().trim().is_empty() {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        cancel.cancel();
    };
    let (r, _) = tokio::join!(call, trigger);
    assert_eq!(r.status, CallStatus::Error);
    assert!(r.output.contains("interrupted"), "{}", r.output);
    let pid: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(!alive(pid), "the grandchild that ignores SIGTERM is gone");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bash_reports_exit_codes_merges_output_and_cuts_ten_megabytes() {
    let f = Fixture::new("[permission]\nbash = \"allow\"\n");
    let r = call(
        &f,
        "bash",
        json!({"command": "echo out; echo err >&2; echo out2; exit 3"}),
    )
    .await;
    let out = completed(&r);
    assert_eq!(out, "out\nerr\nout2\n(exit code 3)");
    let r = call(&f, "bash", json!({"command": "sleep 5", "timeout": 200})).await;
    assert!(completed(&r).contains("timed out after 200 ms"));
    let r = call(&f, "bash", json!({"command": "head -c 10000000 /dev/zero | tr '\\0' 'x' | fold -w 100; echo; echo THE-END"})).await;
    let out = completed(&r);
    assert!(out.len() < 60_000, "cut to {} bytes", out.len());
    assert!(out.contains("THE-END"), "the tail is kept");
    let saved = std::fs::read_dir(&f.ctx.output_dir)
        .unwrap()
        .flatten()
        .next()
        .unwrap()
        .path();
    assert!(std::fs::metadata(&saved).unwrap().len() > 10_000_000);
    assert!(out.contains(&saved.display().to_string()));
    // The saved output is readable although it is outside the workspace.
    let r = call(
        &f,
        "read",
        json!({"filePath": saved.to_str().unwrap(), "offset": 100000, "limit": 2}),
    )
    .await;
    assert!(completed(&r).contains("THE-END"));
}

/// A loopback HTTP server answering each request with `response` (raw HTTP).
async fn serve(responses: Vec<String>) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        for response in responses {
            let Ok((mut sock, _)) = listener.accept().await else {
                return;
            };
            let mut buf = [0u8; 4096];
            let _ = sock.read(&mut buf).await;
            let _ = sock.write_all(response.as_bytes()).await;
        }
    });
    addr
}

fn http(status: &str, headers: &str, body: &str) -> String {
    format!(
        "HTTP/1.1 {status}\r\nContent-Length: {}\r\nConnection: close\r\n{headers}\r\n{body}",
        body.len()
    )
}

#[tokio::test]
async fn webfetch_refuses_loopback_unless_configured_and_rechecks_redirects() {
    let page = http(
        "200 OK",
        "Content-Type: text/html\r\n",
        "<h1>Title</h1><script>x()</script><p>body</p>",
    );
    let addr = serve(vec![page.clone()]).await;
    let f = Fixture::new("[permission]\nwebfetch = \"allow\"\n");
    let r = call(&f, "webfetch", json!({"url": format!("http://{addr}/")})).await;
    assert_eq!(r.status, CallStatus::Error);
    assert!(
        r.output.contains("refused") && r.output.contains("127.0.0.1"),
        "{}",
        r.output
    );

    let f = Fixture::new(
        "webfetch_allow_hosts = [\"127.0.0.1\"]\n[permission]\nwebfetch = \"allow\"\n",
    );
    let r = call(&f, "webfetch", json!({"url": format!("http://{addr}/")})).await;
    let out = completed(&r);
    assert!(
        out.contains("# Title") && out.contains("body") && !out.contains("x()"),
        "{out}"
    );

    // An allowed host that redirects to an address that is not allowed.
    let redirect = http("302 Found", "Location: http://[::1]:9/secret\r\n", "");
    let addr = serve(vec![redirect]).await;
    let r = call(&f, "webfetch", json!({"url": format!("http://{addr}/")})).await;
    assert_eq!(r.status, CallStatus::Error);
    assert!(
        r.output.contains("refused") && r.output.contains("::1"),
        "{}",
        r.output
    );
    let r = call(&f, "webfetch", json!({"url": "file:///etc/passwd"})).await;
    assert!(r.output.contains("only http and https"), "{}", r.output);
}

#[tokio::test]
async fn todos_questions_and_skills() {
    let f = Fixture::new("");
    let r = call(
        &f,
        "todowrite",
        json!({"todos": [
            {"content": "write tests", "status": "in_progress", "priority": "high"},
            {"content": "ship", "status": "pending"}
        ]}),
    )
    .await;
    assert_eq!(r.todos.as_ref().unwrap().len(), 2);
    assert_eq!(r.todos.as_ref().unwrap()[1].priority, "medium");
    let r = call(&f, "todoread", json!({})).await;
    assert!(completed(&r).contains("[in_progress] (high) write tests"));
    let r = call(
        &f,
        "todowrite",
        json!({"todos": [{"content": "x", "status": "later"}]}),
    )
    .await;
    assert!(r.output.contains("invalid arguments"), "{}", r.output);

    *f.editor.answers.lock().unwrap() = vec![vec!["Rust".into()]];
    let r = call(
        &f,
        "question",
        json!({"questions": [{"question": "Which language?", "header": "Lang",
        "options": [{"label": "Rust", "description": ""}, {"label": "Go", "description": ""}]}]}),
    )
    .await;
    assert!(completed(&r).contains("Q: Which language?\nA: Rust"));

    f.write(
        ".agent-lsp/skills/release/SKILL.md",
        "---\nname: release\ndescription: How to cut a release\n---\nRun the release script.\n",
    );
    let reg = Registry::standard();
    let skill = reg
        .definitions(&f.ctx)
        .into_iter()
        .find(|d| d.name == "skill")
        .unwrap();
    assert!(
        skill
            .description
            .contains("- release: How to cut a release"),
        "{}",
        skill.description
    );
    let r = call(&f, "skill", json!({"name": "release"})).await;
    assert!(completed(&r).contains("Run the release script."));
    let r = call(&f, "skill", json!({"name": "nope"})).await;
    assert!(r.output.contains("available: release"), "{}", r.output);
}

#[tokio::test]
async fn a_patch_failing_while_writing_rolls_back_a_move_over_an_existing_file() {
    use super::Tool as _;
    let f = Fixture::new("[permission]\nedit = \"allow\"\n");
    f.write("src.txt", "source\n");
    f.write("dst.txt", "the old target\n");
    f.write("z.txt", "z\n");
    let patch = "*** Begin Patch\n*** Update File: src.txt\n*** Move to: dst.txt\n@@\n-source\n+moved\n*** Update File: z.txt\n@@\n-z\n+x\n*** End Patch";
    let prepared = super::apply_patch::ApplyPatch
        .prepare_value(json!({"patchText": patch}), &f.ctx)
        .unwrap();
    // Verified; then z.txt turns into a folder, so writing it fails after the move.
    std::fs::remove_file(f.root().join("z.txt")).unwrap();
    std::fs::create_dir(f.root().join("z.txt")).unwrap();
    let err = (prepared.run)(&f.ctx).await.unwrap_err();
    assert!(err.0.contains("undone"), "{err}");
    assert_eq!(f.read("src.txt"), "source\n");
    assert_eq!(
        f.read("dst.txt"),
        "the old target\n",
        "the file moved over is back"
    );
}
