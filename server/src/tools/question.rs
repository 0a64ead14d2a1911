//! `question`: asks the user through the editor and returns the answers to the model.

use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::json;

use super::{Need, Prepared, ToolContext, ToolError, ToolOutput, TypedTool};
use crate::editor::{PermissionRequest, Question};

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Args {
    /// The questions, each with optional choices.
    pub questions: Vec<Question>,
}

pub struct QuestionTool;

impl TypedTool for QuestionTool {
    type Args = Args;
    const NAME: &'static str = "question";

    fn description(&self, _: &ToolContext) -> String {
        "Asks the user one or more questions (with options to choose from, or free text) and \
         waits for the answers. Use it when the request is ambiguous or a decision is theirs to \
         make; not for what you can find out with the other tools."
            .into()
    }

    fn prepare(&self, args: Args, _: &ToolContext) -> Result<Prepared, ToolError> {
        if args.questions.is_empty() {
            return Err(ToolError::new("no questions given"));
        }
        let need = Need {
            request: PermissionRequest {
                permission: "question".into(),
                tool: Self::NAME.into(),
                title: format!("ask {} question(s)", args.questions.len()),
                patterns: vec!["*".into()],
                always: vec!["*".into()],
                ..Default::default()
            },
        };
        Ok(Prepared::new(vec![need], move |ctx| {
            Box::pin(async move {
                let answers = tokio::select! {
                    a = ctx.editor.ask_questions(&args.questions) => a.map_err(|e| ToolError::new(e.0))?,
                    _ = ctx.cancel.cancelled() => return Err(ToolError::new("interrupted: the question was cancelled")),
                };
                let mut output = String::new();
                for (q, a) in args.questions.iter().zip(answers.iter()) {
                    let a = if a.is_empty() {
                        "(no answer)".to_string()
                    } else {
                        a.join(", ")
                    };
                    output.push_str(&format!("Q: {}\nA: {a}\n", q.question));
                }
                Ok(ToolOutput {
                    title: "answers".into(),
                    output,
                    metadata: json!({"answers": answers}),
                    ..Default::default()
                })
            })
        }))
    }
}
