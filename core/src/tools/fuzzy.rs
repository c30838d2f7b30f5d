//! Fuzzy text matching shared by `edit_file` and `apply_patch`: when the model's text does not
//! match exactly, try again with whitespace runs collapsed, trailing whitespace ignored and
//! Unicode punctuation folded to ASCII (smart quotes, dashes, non-breaking spaces, ellipses).

/// The ASCII stand-in for a Unicode punctuation character, if it has one.
fn fold(c: char) -> Option<&'static str> {
    Some(match c {
        '\u{2018}' | '\u{2019}' | '\u{201A}' | '\u{201B}' | '\u{2032}' => "'",
        '\u{201C}' | '\u{201D}' | '\u{201E}' | '\u{201F}' | '\u{2033}' => "\"",
        '\u{2010}' | '\u{2011}' | '\u{2012}' | '\u{2013}' | '\u{2014}' | '\u{2015}'
        | '\u{2212}' => "-",
        '\u{2026}' => "...",
        '\u{00A0}' | '\u{2007}' | '\u{202F}' | '\u{3000}' => " ",
        _ => return None,
    })
}

/// `text` normalized, with the byte offset in `text` where each normalized byte came from.
pub(super) struct Normalized {
    /// The normalized text.
    pub(super) text: String,
    /// `origin[i]` is the byte range in the original of the character that produced byte `i`.
    origin: Vec<(usize, usize)>,
}

impl Normalized {
    /// Normalizes `text`: folded punctuation, no indentation, runs of spaces and tabs as one
    /// space, no whitespace before a line end, `\r\n` as `\n`.
    pub(super) fn new(text: &str) -> Self {
        let mut out = String::with_capacity(text.len());
        let mut origin = Vec::with_capacity(text.len() + 1);
        let mut pending_space: Option<usize> = None;
        let mut line_start = true;
        let push =
            |out: &mut String, origin: &mut Vec<(usize, usize)>, s: &str, at: (usize, usize)| {
                out.push_str(s);
                origin.extend(std::iter::repeat_n(at, s.len()));
            };
        for (at, c) in text.char_indices() {
            let folded = fold(c);
            let is_space = c == ' ' || c == '\t' || folded == Some(" ");
            if is_space {
                if !line_start {
                    pending_space.get_or_insert(at);
                }
                continue;
            }
            if c == '\r' && text[at..].starts_with("\r\n") {
                continue;
            }
            if let Some(space_at) = pending_space.take()
                && c != '\n'
            {
                push(&mut out, &mut origin, " ", (space_at, at));
            }
            let mut buf = [0u8; 4];
            push(
                &mut out,
                &mut origin,
                folded.unwrap_or_else(|| c.encode_utf8(&mut buf)),
                (at, at + c.len_utf8()),
            );
            line_start = c == '\n';
        }
        Self { text: out, origin }
    }

    /// The original byte range of the normalized range `start..end` (not empty).
    pub(super) fn original(&self, start: usize, end: usize) -> (usize, usize) {
        (self.origin[start].0, self.origin[end - 1].1)
    }
}

/// Byte ranges in `haystack` where `needle` occurs after normalizing both (non-overlapping).
pub(super) fn find_all(haystack: &str, needle: &str) -> Vec<(usize, usize)> {
    let h = Normalized::new(haystack);
    let n = Normalized::new(needle);
    let needle = n.text.trim_matches('\n');
    if needle.is_empty() {
        return Vec::new();
    }
    h.text
        .match_indices(needle)
        .map(|(i, m)| h.original(i, i + m.len()))
        .collect()
}

/// Whether two lines are equal once normalized.
pub(super) fn lines_equal(a: &str, b: &str) -> bool {
    Normalized::new(a.trim()).text == Normalized::new(b.trim()).text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whitespace_and_quotes_are_folded_and_mapped_back() {
        let text = "let s = \u{201C}hi\u{201D};\n\tif  x {   \n";
        let found = find_all(text, "let s = \"hi\";\nif x {");
        assert_eq!(found.len(), 1);
        let (a, b) = found[0];
        assert_eq!(&text[a..b], "let s = \u{201C}hi\u{201D};\n\tif  x {");
    }

    #[test]
    fn lines_compare_loosely() {
        assert!(lines_equal("  a \u{2014} b  ", "a - b"));
        assert!(!lines_equal("a", "b"));
    }
}
