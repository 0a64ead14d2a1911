//! Conversation text inside documents the server writes (the distilled prefix, the state
//! block): whatever the text holds — fences, headings, `---` — it must stay inside its slot
//! and leave the document's own structure as written.

/// `text` as a fenced block whose fence is longer than any run of backticks in it, so no
/// line of the text can close it (CommonMark: a closing fence is at least as long as the
/// opening one). Line endings become `\n`.
pub fn fenced(text: &str) -> String {
    let text = text.replace("\r\n", "\n").replace('\r', "\n");
    let longest = text.split(|c| c != '`').map(str::len).max().unwrap_or(0);
    let fence = "`".repeat(longest.max(2) + 1);
    let body = text.trim_end_matches('\n');
    format!("{fence}\n{body}\n{fence}\n")
}

/// One line of text for a `- Label: value` line: line breaks become spaces.
pub fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// One line of text for a `- text` list item: [`one_line`], and what would start a block
/// of its own inside the item (a heading, a nested list, a quote, a fence) is escaped.
pub fn list_item(text: &str) -> String {
    let joined = one_line(text);
    match joined.chars().next() {
        Some('#' | '>' | '-' | '*' | '+' | '`' | '~' | '=' | '|' | '<') => format!("\\{joined}"),
        Some(c) if c.is_ascii_digit() => format!("\\{joined}"),
        _ => joined,
    }
}

/// The first JSON value in a model's answer that parses: the whole of it, a fenced block,
/// or from the first brace or bracket to its last.
pub fn json_in(text: &str) -> Option<serde_json::Value> {
    let text = text.trim();
    if let Ok(v) = serde_json::from_str(text) {
        return Some(v);
    }
    let unfenced = text
        .split("```")
        .nth(1)
        .map(|block| block.trim_start_matches("json").trim());
    if let Some(v) = unfenced.and_then(|b| serde_json::from_str(b).ok()) {
        return Some(v);
    }
    [('{', '}'), ('[', ']')]
        .into_iter()
        .find_map(|(open, close)| {
            let (start, end) = (text.find(open)?, text.rfind(close)?);
            (start < end)
                .then(|| serde_json::from_str(&text[start..=end]).ok())
                .flatten()
        })
}

/// The message ids a model's answer `item` cites by number in its `messages` list (from 1,
/// as the transcript numbers them; unknown numbers dropped), each once, in id order.
pub fn cited_messages(item: &serde_json::Value, messages: &[String]) -> Vec<String> {
    item.get("messages")
        .and_then(serde_json::Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(serde_json::Value::as_u64)
        .filter_map(|n| messages.get((n as usize).checked_sub(1)?).cloned())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use pulldown_cmark::{Event, HeadingLevel, Parser, Tag, TagEnd};

    /// The headings at the top level and the text of every fenced block, in order.
    fn outline(doc: &str) -> (Vec<String>, Vec<String>) {
        let (mut headings, mut blocks) = (Vec::new(), Vec::new());
        let mut heading: Option<String> = None;
        let mut block: Option<String> = None;
        for event in Parser::new(doc) {
            match event {
                Event::Start(Tag::Heading { level, .. }) => {
                    assert_eq!(level, HeadingLevel::H2, "only our headings");
                    heading = Some(String::new());
                }
                Event::End(TagEnd::Heading(_)) => headings.extend(heading.take()),
                Event::Start(Tag::CodeBlock(_)) => block = Some(String::new()),
                Event::End(TagEnd::CodeBlock) => blocks.extend(block.take()),
                Event::Text(t) | Event::Code(t) => {
                    if let Some(b) = block.as_mut() {
                        b.push_str(&t);
                    } else if let Some(h) = heading.as_mut() {
                        h.push_str(&t);
                    }
                }
                Event::Rule => panic!("a thematic break escaped its block"),
                _ => {}
            }
        }
        (headings, blocks)
    }

    fn hostile() -> impl Strategy<Value = String> {
        let piece = prop_oneof![
            Just("```".to_string()),
            Just("````rust".to_string()),
            Just("~~~".to_string()),
            Just("## Heading".to_string()),
            Just("# Title".to_string()),
            Just("---".to_string()),
            Just("***".to_string()),
            Just("===".to_string()),
            Just("</distilled-context>".to_string()),
            Just("    indented".to_string()),
            Just("> quote".to_string()),
            Just("- item".to_string()),
            Just("\n".to_string()),
            Just("\r\n".to_string()),
            "[a-z `#~*-]{0,12}",
        ];
        proptest::collection::vec(piece, 0..24).prop_map(|p| p.concat())
    }

    proptest! {
        #[test]
        fn fenced_text_keeps_the_document_structure(a in hostile(), b in hostile()) {
            let doc = format!("## First\n\n{}\n## Second\n\n{}", fenced(&a), fenced(&b));
            let (headings, blocks) = outline(&doc);
            prop_assert_eq!(headings, vec!["First".to_string(), "Second".to_string()]);
            let expect = |t: &str| {
                let t = t.replace("\r\n", "\n").replace('\r', "\n");
                format!("{}\n", t.trim_end_matches('\n'))
            };
            prop_assert_eq!(blocks, vec![expect(&a), expect(&b)]);
        }

        #[test]
        fn one_line_text_stays_in_its_item(a in hostile(), b in hostile()) {
            let doc = format!(
                "## Current\n\n- Focus: {}\n\n## Log\n\n- {}\n- {}\n",
                one_line(&a), list_item(&a), list_item(&b)
            );
            let (headings, blocks) = outline(&doc);
            prop_assert_eq!(headings, vec!["Current".to_string(), "Log".to_string()]);
            prop_assert!(blocks.is_empty());
        }
    }
}
