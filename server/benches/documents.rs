//! Document store benchmarks: random incremental edits on a 1 MB file, and position
//! conversion on long lines.

use agent_lsp::lsp::documents::{Document, PositionEncoding};
use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use std::hint::black_box;
use tower_lsp_server::ls_types::{Position, Range, TextDocumentContentChangeEvent};

/// A small deterministic generator (no extra dependency for a benchmark).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 33
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// About 1 MB of code-like text with some multi-byte characters.
fn one_megabyte() -> String {
    let mut text = String::with_capacity(1 << 20);
    let mut i = 0;
    while text.len() < 1 << 20 {
        text.push_str(&format!(
            "    let value_{i} = compute(\"héllo 世界 {i}\", {i}); // 🦀 line {i}\n"
        ));
        i += 1;
    }
    text
}

fn random_edits(doc: &Document, n: usize, seed: u64) -> Vec<TextDocumentContentChangeEvent> {
    let mut rng = Lcg(seed);
    let lines = doc.text.len_lines() as u64;
    (0..n)
        .map(|_| {
            let line = rng.below(lines) as u32;
            let col = rng.below(60) as u32;
            let (end_line, end_col) = if rng.below(3) == 0 {
                (line + rng.below(2) as u32, rng.below(60) as u32)
            } else {
                (line, col)
            };
            let text = match rng.below(4) {
                0 => String::new(),
                1 => "x".into(),
                2 => "fn new() {}\n".into(),
                _ => "é世🦀".into(),
            };
            TextDocumentContentChangeEvent {
                range: Some(Range::new(
                    Position::new(line, col),
                    Position::new(end_line.max(line), end_col),
                )),
                range_length: None,
                text,
            }
        })
        .collect()
}

fn edits(c: &mut Criterion) {
    let base = Document::new(&one_megabyte(), 0, "rust");
    let changes = random_edits(&base, 10_000, 7);
    c.bench_function(
        "10k random incremental edits on a 1 MB file (utf-16)",
        |b| {
            b.iter_batched(
                || base.clone(),
                |mut doc| {
                    for ch in &changes {
                        doc.apply_change(ch, PositionEncoding::Utf16);
                    }
                    doc
                },
                BatchSize::LargeInput,
            )
        },
    );
}

fn long_lines(c: &mut Criterion) {
    // One 200,000-character line of mixed-width characters.
    let line: String = "a😀日e\u{301}".repeat(40_000);
    let doc = Document::new(&format!("first\n{line}\nlast\n"), 0, "text");
    let end16 = doc.position(doc.text.len_chars() - 6, PositionEncoding::Utf16);
    let end8 = doc.position(doc.text.len_chars() - 6, PositionEncoding::Utf8);
    c.bench_function(
        "position → char index, end of a 200k-char line (utf-16)",
        |b| b.iter(|| doc.char_index(black_box(end16), PositionEncoding::Utf16)),
    );
    c.bench_function(
        "position → char index, end of a 200k-char line (utf-8)",
        |b| b.iter(|| doc.char_index(black_box(end8), PositionEncoding::Utf8)),
    );
    c.bench_function(
        "char index → position, end of a 200k-char line (utf-16)",
        |b| b.iter(|| doc.position(black_box(doc.text.len_chars() - 6), PositionEncoding::Utf16)),
    );
}

criterion_group!(benches, edits, long_lines);
criterion_main!(benches);
