//! Open documents as ropes, with LSP position conversion in the negotiated encoding.
//!
//! LSP positions are (line, column) where the column counts code units of the negotiated
//! encoding (UTF-8 bytes, UTF-16 units or code points). Lines end at `\n`, `\r\n` or `\r`
//! only (ropey's `cr_lines`, without Unicode line breaks, matches the spec). Every position
//! from a client is clamped: past the end of a line means the end of that line, past the last
//! line means the end of the document. A column inside a multi-unit character is moved back to
//! the character's start.

use std::collections::HashMap;

use ropey::Rope;
use tower_lsp_server::ls_types::{
    Position, PositionEncodingKind, Range, TextDocumentContentChangeEvent, Uri,
};

/// The column unit negotiated in `initialize` (`general.positionEncodings`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum PositionEncoding {
    Utf8,
    #[default]
    Utf16,
    Utf32,
}

impl PositionEncoding {
    /// Picks utf-8 when the client offers it (no conversion needed), else utf-16, the default
    /// every client must support.
    pub fn negotiate(offered: Option<&[PositionEncodingKind]>) -> Self {
        match offered {
            Some(kinds) if kinds.contains(&PositionEncodingKind::UTF8) => Self::Utf8,
            _ => Self::Utf16,
        }
    }

    pub fn kind(self) -> PositionEncodingKind {
        match self {
            Self::Utf8 => PositionEncodingKind::UTF8,
            Self::Utf16 => PositionEncodingKind::UTF16,
            Self::Utf32 => PositionEncodingKind::UTF32,
        }
    }
}

/// One open text document.
#[derive(Debug, Clone)]
pub struct Document {
    pub text: Rope,
    pub version: i32,
    pub language_id: String,
}

impl Document {
    pub fn new(text: &str, version: i32, language_id: impl Into<String>) -> Self {
        Self {
            text: Rope::from_str(text),
            version,
            language_id: language_id.into(),
        }
    }

    /// Number of chars on `line`, not counting its line terminator.
    fn line_len_without_eol(&self, line: usize) -> usize {
        let slice = self.text.line(line);
        let mut len = slice.len_chars();
        if len > 0 && slice.char(len - 1) == '\n' {
            len -= 1;
        }
        if len > 0 && slice.char(len - 1) == '\r' {
            len -= 1;
        }
        len
    }

    /// The char index of an LSP position, clamped into the document.
    pub fn char_index(&self, pos: Position, enc: PositionEncoding) -> usize {
        let line = pos.line as usize;
        if line >= self.text.len_lines() {
            return self.text.len_chars();
        }
        let line_start = self.text.line_to_char(line);
        let line_len = self.line_len_without_eol(line);
        let want = pos.character as usize;
        let line_end = line_start + line_len;
        // Ropey maps a unit inside a multi-unit character to that character's index, which is
        // the "move back to the character's start" rule, in O(log n) even on long lines.
        match enc {
            PositionEncoding::Utf32 => line_start + want.min(line_len),
            PositionEncoding::Utf8 => {
                let start = self.text.char_to_byte(line_start);
                let end = self.text.char_to_byte(line_end);
                self.text.byte_to_char((start + want).min(end))
            }
            PositionEncoding::Utf16 => {
                let start = self.text.char_to_utf16_cu(line_start);
                let end = self.text.char_to_utf16_cu(line_end);
                self.text.utf16_cu_to_char((start + want).min(end))
            }
        }
    }

    /// The LSP position of a char index (clamped to the end of the document).
    pub fn position(&self, char_idx: usize, enc: PositionEncoding) -> Position {
        let char_idx = char_idx.min(self.text.len_chars());
        let line = self.text.char_to_line(char_idx);
        let line_start = self.text.line_to_char(line);
        let column = match enc {
            PositionEncoding::Utf32 => char_idx - line_start,
            PositionEncoding::Utf8 => {
                self.text.char_to_byte(char_idx) - self.text.char_to_byte(line_start)
            }
            PositionEncoding::Utf16 => {
                self.text.char_to_utf16_cu(char_idx) - self.text.char_to_utf16_cu(line_start)
            }
        };
        Position::new(line as u32, column as u32)
    }

    /// The position just past the last character.
    pub fn end_position(&self, enc: PositionEncoding) -> Position {
        self.position(self.text.len_chars(), enc)
    }

    /// Applies one change event; a range-less event replaces the whole text.
    pub fn apply_change(&mut self, change: &TextDocumentContentChangeEvent, enc: PositionEncoding) {
        match change.range {
            None => self.text = Rope::from_str(&change.text),
            Some(range) => {
                let (start, end) = self.char_range(range, enc);
                self.text.remove(start..end);
                self.text.insert(start, &change.text);
            }
        }
    }

    /// A range as char indices, clamped and ordered (a reversed range is read start..start).
    pub fn char_range(&self, range: Range, enc: PositionEncoding) -> (usize, usize) {
        let start = self.char_index(range.start, enc);
        let end = self.char_index(range.end, enc).max(start);
        (start, end)
    }

    /// The text inside a range.
    pub fn slice(&self, range: Range, enc: PositionEncoding) -> String {
        let (start, end) = self.char_range(range, enc);
        self.text.slice(start..end).to_string()
    }
}

/// The open documents of one client, keyed by URI.
#[derive(Debug, Default)]
pub struct DocumentStore {
    docs: HashMap<Uri, Document>,
}

impl DocumentStore {
    pub fn open(&mut self, uri: Uri, doc: Document) {
        self.docs.insert(uri, doc);
    }

    /// Applies changes in order. Unknown documents are reported, not invented.
    pub fn change(
        &mut self,
        uri: &Uri,
        version: i32,
        changes: &[TextDocumentContentChangeEvent],
        enc: PositionEncoding,
    ) -> Result<(), UnknownDocument> {
        let doc = self.docs.get_mut(uri).ok_or(UnknownDocument)?;
        for change in changes {
            doc.apply_change(change, enc);
        }
        doc.version = version;
        Ok(())
    }

    pub fn close(&mut self, uri: &Uri) -> Option<Document> {
        self.docs.remove(uri)
    }

    pub fn get(&self, uri: &Uri) -> Option<&Document> {
        self.docs.get(uri)
    }

    pub fn iter(&self) -> impl Iterator<Item = (&Uri, &Document)> {
        self.docs.iter()
    }

    pub fn len(&self) -> usize {
        self.docs.len()
    }

    pub fn is_empty(&self) -> bool {
        self.docs.is_empty()
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("document is not open")]
pub struct UnknownDocument;

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn pos(line: u32, character: u32) -> Position {
        Position::new(line, character)
    }

    fn change(sl: u32, sc: u32, el: u32, ec: u32, text: &str) -> TextDocumentContentChangeEvent {
        TextDocumentContentChangeEvent {
            range: Some(Range::new(pos(sl, sc), pos(el, ec))),
            range_length: None,
            text: text.into(),
        }
    }

    #[test]
    fn negotiates_utf8_only_when_offered() {
        use PositionEncodingKind as K;
        assert_eq!(PositionEncoding::negotiate(None), PositionEncoding::Utf16);
        assert_eq!(
            PositionEncoding::negotiate(Some(&[K::UTF16, K::UTF8])),
            PositionEncoding::Utf8
        );
        assert_eq!(
            PositionEncoding::negotiate(Some(&[K::UTF32])),
            PositionEncoding::Utf16
        );
    }

    #[test]
    fn emoji_cjk_and_combining_marks() {
        // "a😀b" : 😀 is 4 bytes, 2 UTF-16 units, 1 code point.
        let doc = Document::new("a😀b\n日本語\ne\u{301}x\n", 1, "text");
        assert_eq!(doc.char_index(pos(0, 3), PositionEncoding::Utf16), 2);
        assert_eq!(doc.char_index(pos(0, 5), PositionEncoding::Utf8), 2);
        assert_eq!(doc.char_index(pos(0, 2), PositionEncoding::Utf32), 2);
        // A column in the middle of the emoji moves back to its start.
        assert_eq!(doc.char_index(pos(0, 2), PositionEncoding::Utf16), 1);
        assert_eq!(doc.char_index(pos(0, 3), PositionEncoding::Utf8), 1);
        // CJK: 3 bytes, 1 UTF-16 unit each.
        assert_eq!(doc.char_index(pos(1, 2), PositionEncoding::Utf16), 6);
        assert_eq!(doc.char_index(pos(1, 6), PositionEncoding::Utf8), 6);
        // Combining mark is its own code point.
        assert_eq!(
            doc.slice(Range::new(pos(2, 0), pos(2, 2)), PositionEncoding::Utf16),
            "e\u{301}"
        );
        assert_eq!(doc.position(2, PositionEncoding::Utf16), pos(0, 3));
        assert_eq!(doc.position(2, PositionEncoding::Utf8), pos(0, 5));
    }

    #[test]
    fn crlf_and_lone_cr_end_lines() {
        let doc = Document::new("ab\r\ncd\ref\n", 1, "text");
        assert_eq!(doc.char_index(pos(1, 0), PositionEncoding::Utf16), 4);
        assert_eq!(doc.char_index(pos(2, 1), PositionEncoding::Utf16), 8);
        // Past the end of a line stops before its terminator.
        assert_eq!(doc.char_index(pos(0, 99), PositionEncoding::Utf16), 2);
        assert_eq!(doc.end_position(PositionEncoding::Utf16), pos(3, 0));
    }

    #[test]
    fn positions_past_the_end_are_clamped() {
        let mut doc = Document::new("one\ntwo", 1, "text");
        assert_eq!(doc.char_index(pos(7, 3), PositionEncoding::Utf16), 7);
        doc.apply_change(&change(9, 9, 12, 0, "!"), PositionEncoding::Utf16);
        assert_eq!(doc.text.to_string(), "one\ntwo!");
        // A reversed range deletes nothing.
        doc.apply_change(&change(1, 2, 0, 1, "X"), PositionEncoding::Utf16);
        assert_eq!(doc.text.to_string(), "one\ntwXo!");
    }

    #[test]
    fn incremental_changes_in_order() {
        let mut store = DocumentStore::default();
        let uri: Uri = "file:///x.txt".parse().unwrap();
        store.open(uri.clone(), Document::new("hello world\n", 1, "text"));
        store
            .change(
                &uri,
                2,
                &[change(0, 6, 0, 11, "rope"), change(0, 0, 0, 0, "🦀 ")],
                PositionEncoding::Utf16,
            )
            .unwrap();
        let doc = store.get(&uri).unwrap();
        assert_eq!(doc.text.to_string(), "🦀 hello rope\n");
        assert_eq!(doc.version, 2);
        let other: Uri = "file:///nope".parse().unwrap();
        assert_eq!(
            store.change(&other, 1, &[], PositionEncoding::Utf16),
            Err(UnknownDocument)
        );
    }

    /// A plain-String model of the same conversions, written the slow obvious way.
    mod model {
        use super::*;

        fn width(enc: PositionEncoding, c: char) -> usize {
            match enc {
                PositionEncoding::Utf8 => c.len_utf8(),
                PositionEncoding::Utf16 => c.len_utf16(),
                PositionEncoding::Utf32 => 1,
            }
        }

        fn lines(text: &str) -> Vec<(usize, usize)> {
            // (start byte, end byte without terminator) per line
            let b = text.as_bytes();
            let mut out = Vec::new();
            let mut start = 0;
            let mut i = 0;
            while i < b.len() {
                if b[i] == b'\n' {
                    out.push((start, i));
                    start = i + 1;
                } else if b[i] == b'\r' {
                    out.push((start, i));
                    if i + 1 < b.len() && b[i + 1] == b'\n' {
                        i += 1;
                    }
                    start = i + 1;
                }
                i += 1;
            }
            out.push((start, b.len()));
            out
        }

        pub fn byte_offset(text: &str, p: Position, enc: PositionEncoding) -> usize {
            let ls = lines(text);
            let Some(&(start, end)) = ls.get(p.line as usize) else {
                return text.len();
            };
            let mut units = 0;
            for (i, c) in text[start..end].char_indices() {
                let next = units + width(enc, c);
                if next > p.character as usize {
                    return start + i;
                }
                units = next;
            }
            end
        }

        pub fn apply(text: &mut String, r: Range, new: &str, enc: PositionEncoding) {
            let s = byte_offset(text, r.start, enc);
            let e = byte_offset(text, r.end, enc).max(s);
            text.replace_range(s..e, new);
        }
    }

    fn any_text() -> impl Strategy<Value = String> {
        proptest::collection::vec(
            prop_oneof![
                Just("a"),
                Just("xyz"),
                Just("\n"),
                Just("\r\n"),
                Just("\r"),
                Just("😀"),
                Just("日本"),
                Just("e\u{301}"),
                Just(" "),
            ],
            0..12,
        )
        .prop_map(|parts| parts.concat())
    }

    fn any_encoding() -> impl Strategy<Value = PositionEncoding> {
        prop_oneof![
            Just(PositionEncoding::Utf8),
            Just(PositionEncoding::Utf16),
            Just(PositionEncoding::Utf32)
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(400))]
        #[test]
        fn random_edits_match_a_string_model(
            initial in any_text(),
            enc in any_encoding(),
            edits in proptest::collection::vec((0u32..6, 0u32..8, 0u32..6, 0u32..8, any_text()), 1..25),
        ) {
            let mut doc = Document::new(&initial, 0, "text");
            let mut model = initial.clone();
            for (sl, sc, el, ec, text) in edits {
                let c = change(sl, sc, el, ec, &text);
                doc.apply_change(&c, enc);
                model::apply(&mut model, c.range.unwrap(), &text, enc);
                prop_assert_eq!(doc.text.to_string(), model.clone());
            }
            // Every char index round-trips through a position.
            for i in 0..=doc.text.len_chars() {
                // Between the \r and \n of a CRLF is no LSP position.
                if i > 0 && i < doc.text.len_chars() && doc.text.char(i - 1) == '\r' && doc.text.char(i) == '\n' {
                    continue;
                }
                let p = doc.position(i, enc);
                prop_assert_eq!(doc.char_index(p, enc), i);
            }
        }
    }
}
