//! The managed section of the agents file (`AGENTS.md`, or `[knowledge] agents_file`): the
//! project's entries between two comment markers, one per line under a heading of its kind,
//! each with its id in a trailing comment. Everything outside the markers is the person's and
//! stays byte for byte; lines a person adds inside are read back as entries.

use crate::status::KnowledgeKind;
use crate::store::KnowledgeEntry;

pub const BEGIN: &str = "<!-- agent-lsp:knowledge:begin -->";
pub const END: &str = "<!-- agent-lsp:knowledge:end -->";
/// What holds an entry's id at the end of its line.
const ID_OPEN: &str = "<!-- k:";
const ID_CLOSE: &str = "-->";

/// What the section says of itself (a comment: invisible where the markdown is rendered).
const PREAMBLE: &str = "<!-- Kept by agent-lsp: `agent-lsp knowledge export` rewrites this \
section. A line you add under a heading is read back as an entry, a line you change changes \
it, a line you delete forgets it. -->";

/// One entry line of the section.
#[derive(Debug, Clone, PartialEq)]
pub struct Line {
    pub kind: KnowledgeKind,
    pub text: String,
    /// `None`: a person wrote it.
    pub id: Option<String>,
}

#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SectionError {
    #[error("it has `{BEGIN}` without `{END}` after it")]
    Unclosed,
    #[error("it has `{END}` without `{BEGIN}` before it")]
    Unopened,
    #[error("it has more than one knowledge section")]
    Twice,
}

/// Where the section is in `text`: the byte range from its begin marker to the end of its
/// end marker; `None` when there is none.
fn span(text: &str) -> Result<Option<(usize, usize)>, SectionError> {
    let begin = text.find(BEGIN);
    let end = text.find(END);
    match (begin, end) {
        (None, None) => Ok(None),
        (Some(_), None) => Err(SectionError::Unclosed),
        (None, Some(_)) => Err(SectionError::Unopened),
        (Some(b), Some(e)) if e < b => Err(SectionError::Unopened),
        (Some(b), Some(e)) => {
            let after = e + END.len();
            if text[after..].contains(BEGIN)
                || text[after..].contains(END)
                || text[b + BEGIN.len()..e].contains(BEGIN)
            {
                return Err(SectionError::Twice);
            }
            Ok(Some((b, after)))
        }
    }
}

/// The entry lines of the section in `text` (`None`: there is no section). A line before
/// any kind's heading is a fact.
pub fn read(text: &str) -> Result<Option<Vec<Line>>, SectionError> {
    let Some((b, e)) = span(text)? else {
        return Ok(None);
    };
    let inner = &text[b + BEGIN.len()..e - END.len()];
    let mut kind = KnowledgeKind::Fact;
    let mut lines = Vec::new();
    for raw in inner.lines() {
        let line = raw.trim();
        if let Some(heading) = line.strip_prefix("### ") {
            if let Some(k) = super::kind_named(heading) {
                kind = k;
            }
            continue;
        }
        let Some(item) = line.strip_prefix("- ").or_else(|| line.strip_prefix("* ")) else {
            continue;
        };
        let (text, id) = match item.rfind(ID_OPEN) {
            Some(at) if item.ends_with(ID_CLOSE) => (
                item[..at].trim(),
                Some(
                    item[at + ID_OPEN.len()..item.len() - ID_CLOSE.len()]
                        .trim()
                        .to_string(),
                ),
            ),
            _ => (item.trim(), None),
        };
        if !text.is_empty() {
            lines.push(Line {
                kind,
                text: text.to_string(),
                id: id.filter(|i| !i.is_empty()),
            });
        }
    }
    Ok(Some(lines))
}

/// The section for `entries`, from its begin marker to its end marker (no newline after).
/// Deterministic: by kind, then age, so the same entries give the same bytes.
pub fn render(entries: &[KnowledgeEntry]) -> String {
    let mut out = format!("{BEGIN}\n## Knowledge\n\n{PREAMBLE}\n");
    for (kind, heading) in super::KINDS {
        let mut of_kind: Vec<&KnowledgeEntry> = entries.iter().filter(|e| e.kind == kind).collect();
        if of_kind.is_empty() {
            continue;
        }
        of_kind.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
        out.push_str(&format!("\n### {heading}\n\n"));
        for e in of_kind {
            out.push_str(&format!("- {} {ID_OPEN}{} {ID_CLOSE}\n", e.content, e.id));
        }
    }
    out.push_str(END);
    out
}

/// `original` with its section replaced by `section`, or `section` appended (after a blank
/// line) when it has none; everything else stays as it was.
pub fn splice(original: &str, section: &str) -> Result<String, SectionError> {
    Ok(match span(original)? {
        Some((b, e)) => format!("{}{section}{}", &original[..b], &original[e..]),
        None if original.is_empty() => format!("{section}\n"),
        None => {
            let sep = if original.ends_with('\n') {
                "\n"
            } else {
                "\n\n"
            };
            format!("{original}{sep}{section}\n")
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(id: &str, kind: KnowledgeKind, content: &str, at: i64) -> KnowledgeEntry {
        super::super::tests::entry(id, kind, content, Some("p"), at)
    }

    #[test]
    fn render_then_read_gives_the_entries_back() {
        let entries = vec![
            entry("b", KnowledgeKind::Fact, "Build with `make`", 2),
            entry(
                "a",
                KnowledgeKind::Gotcha,
                "Tests need a running Postgres",
                1,
            ),
        ];
        let section = render(&entries);
        assert!(section.starts_with(BEGIN) && section.ends_with(END));
        assert!(section.find("### Gotchas").unwrap() < section.find("### Facts").unwrap());
        let lines = read(&section).unwrap().unwrap();
        assert_eq!(
            lines,
            vec![
                Line {
                    kind: KnowledgeKind::Gotcha,
                    text: "Tests need a running Postgres".into(),
                    id: Some("a".into())
                },
                Line {
                    kind: KnowledgeKind::Fact,
                    text: "Build with `make`".into(),
                    id: Some("b".into())
                },
            ]
        );
    }

    #[test]
    fn a_persons_lines_are_read_under_their_heading() {
        let text = format!(
            "# Rules\n{BEGIN}\n- loose line\n### Decisions\n* We chose SQLite\n  - indented one <!-- k:x -->\nprose is not an entry\n{END}\ntail\n"
        );
        let lines = read(&text).unwrap().unwrap();
        assert_eq!(lines.len(), 3);
        assert_eq!(
            (lines[0].kind, lines[0].id.as_deref()),
            (KnowledgeKind::Fact, None)
        );
        assert_eq!(
            (lines[1].kind, lines[1].text.as_str()),
            (KnowledgeKind::Decision, "We chose SQLite")
        );
        assert_eq!(lines[2].id.as_deref(), Some("x"));
        assert_eq!(read("no section here").unwrap(), None);
    }

    #[test]
    fn splice_keeps_everything_outside_byte_for_byte() {
        let section = render(&[entry("a", KnowledgeKind::Fact, "One", 1)]);
        assert_eq!(splice("", &section).unwrap(), format!("{section}\n"));
        assert_eq!(
            splice("# Title", &section).unwrap(),
            format!("# Title\n\n{section}\n")
        );
        assert_eq!(
            splice("# Title\n", &section).unwrap(),
            format!("# Title\n\n{section}\n")
        );
        let before = "# Title\r\n\r\nMine  \n";
        let after = "\n\n## More of mine\n\ttabs stay\n";
        let old = format!("{before}{BEGIN}\nold\n{END}{after}");
        assert_eq!(
            splice(&old, &section).unwrap(),
            format!("{before}{section}{after}")
        );
        let again = splice(&splice(&old, &section).unwrap(), &section).unwrap();
        assert_eq!(again, splice(&old, &section).unwrap());
    }

    #[test]
    fn a_broken_section_is_an_error_not_a_guess() {
        assert_eq!(
            span(&format!("{BEGIN}\nno end")),
            Err(SectionError::Unclosed)
        );
        assert_eq!(
            span(&format!("{END}\n{BEGIN}")),
            Err(SectionError::Unopened)
        );
        assert_eq!(
            span(&format!("no begin {END}")),
            Err(SectionError::Unopened)
        );
        assert_eq!(
            span(&format!("{BEGIN}{END}\n{BEGIN}{END}")),
            Err(SectionError::Twice)
        );
    }
}
