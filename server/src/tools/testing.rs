//! Test support: an editor port that records what it was asked and answers from a script,
//! and a tool context over a temporary workspace.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;

use super::ToolContext;
use crate::config::Config;
use crate::editor::{BufferEdit, EditorPort, PermissionReply, PermissionRequest, Question};
use crate::permission::boundary::Boundary;

#[derive(Default)]
pub struct TestEditor {
    pub asked: Mutex<Vec<PermissionRequest>>,
    /// Answers to permission asks, in order; `Once` when the list runs out.
    pub replies: Mutex<Vec<PermissionReply>>,
    pub buffers: Mutex<HashMap<PathBuf, String>>,
    pub answers: Mutex<Vec<Vec<String>>>,
}

impl EditorPort for TestEditor {
    fn buffer_text(&self, path: &Path) -> Option<String> {
        self.buffers.lock().unwrap().get(path).cloned()
    }

    fn apply_to_buffer<'a>(
        &'a self,
        path: &'a Path,
        new_text: &'a str,
    ) -> BoxFuture<'a, BufferEdit> {
        Box::pin(async move {
            let mut buffers = self.buffers.lock().unwrap();
            match buffers.get_mut(path) {
                Some(b) => {
                    *b = new_text.to_string();
                    BufferEdit::Applied
                }
                None => BufferEdit::NotOpen,
            }
        })
    }

    fn ask_permission<'a>(
        &'a self,
        request: &'a PermissionRequest,
    ) -> BoxFuture<'a, PermissionReply> {
        Box::pin(async move {
            self.asked.lock().unwrap().push(request.clone());
            let mut replies = self.replies.lock().unwrap();
            if replies.is_empty() {
                PermissionReply::Once
            } else {
                replies.remove(0)
            }
        })
    }

    fn ask_questions<'a>(
        &'a self,
        questions: &'a [Question],
    ) -> BoxFuture<'a, Result<Vec<Vec<String>>, crate::editor::Unanswered>> {
        Box::pin(async move {
            let answers = self.answers.lock().unwrap().clone();
            Ok(questions
                .iter()
                .enumerate()
                .map(|(i, _)| answers.get(i).cloned().unwrap_or_default())
                .collect())
        })
    }
}

/// A workspace in a temp dir (folder `ws`), with its own tool-output folder beside it.
pub struct Fixture {
    pub dir: tempfile::TempDir,
    pub editor: Arc<TestEditor>,
    pub ctx: ToolContext,
}

impl Fixture {
    pub fn new(config_toml: &str) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("ws");
        let output_dir = dir.path().join("tool-output");
        std::fs::create_dir_all(&root).unwrap();
        std::fs::create_dir_all(&output_dir).unwrap();
        let layer = crate::config::ConfigLayer::from_toml(config_toml).unwrap();
        let mut layers = crate::config::Layers::default();
        layers
            .set(crate::config::LayerSource::Workspace, None, Ok(layer))
            .unwrap();
        let config: Config = layers.effective();
        let editor = Arc::new(TestEditor::default());
        let mut ctx = ToolContext::new(&root, &config, editor.clone());
        ctx.boundary = Boundary::new(&root).with_readable(&output_dir);
        ctx.output_dir = output_dir;
        ctx.skill_dirs = vec![root.join(".agent-lsp/skills")];
        ctx.call_id = "call_test".into();
        Self { dir, editor, ctx }
    }

    pub fn root(&self) -> PathBuf {
        self.ctx.boundary.root().to_path_buf()
    }

    pub fn write(&self, rel: &str, content: &str) {
        let p = self.root().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, content).unwrap();
    }

    pub fn read(&self, rel: &str) -> String {
        std::fs::read_to_string(self.root().join(rel)).unwrap()
    }
}
