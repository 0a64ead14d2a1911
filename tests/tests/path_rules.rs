//! What a path really is, through the real binary: a write never reaches another file
//! through a hard link.

use std::os::unix::fs::MetadataExt;

use agent_lsp_tests::cli_run::{self, setup};
use agent_lsp_tests::process::FakeLlm;
use serde_json::json;

#[test]
fn a_write_never_reaches_another_file_through_a_hard_link() {
    let script = json!({"turns": [
        {"reply": {"tool_calls": [{"name": "write", "arguments": {
            "filePath": "linked.txt", "content": "changed by the agent\n"}}]}},
        {"reply": {"text": "done"}}
    ]});
    let llm = FakeLlm::start(&script, "openai");
    let env = setup(&llm, "openai", "[permission]\nedit = \"allow\"\n");
    let outside = env.dir.path().join("outside.txt");
    std::fs::write(&outside, "outside the workspace\n").unwrap();
    let inside = env.workspace().join("linked.txt");
    std::fs::hard_link(&outside, &inside).unwrap();
    // Control: the two names are one file, so writing into it would change both.
    assert_eq!(std::fs::metadata(&inside).unwrap().nlink(), 2);
    let run = cli_run::run(&env, &["change it"]);
    assert_eq!(
        std::fs::read_to_string(&outside).unwrap(),
        "outside the workspace\n",
        "the file outside changed through the link: {:?}",
        run.lines
    );
    assert_eq!(
        std::fs::read_to_string(&inside).unwrap(),
        "changed by the agent\n",
        "the file in the workspace is written: {:?}",
        run.lines
    );
    assert_eq!(
        std::fs::metadata(&inside).unwrap().nlink(),
        1,
        "now a file of its own"
    );
}
