//! Cleaning pasted text (quoted-printable, quote prefixes) and splitting it into words that
//! remember their line.

use crate::error::{Error, Result};

/// Decodes quoted-printable (when the text looks encoded) and strips quote prefixes. Returns
/// the logical lines with the 1-based line number where each starts.
pub fn normalise(text: &str) -> Vec<(usize, String)> {
    let qp = looks_quoted_printable(text);
    let b = text.as_bytes();
    let mut lines = Vec::new();
    let mut cur: Vec<u8> = Vec::new();
    let mut line_no = 1usize;
    let mut start_line = 1usize;
    let mut i = 0usize;
    let flush = |cur: &mut Vec<u8>, start: usize, lines: &mut Vec<(usize, String)>| {
        let s = String::from_utf8_lossy(cur);
        let body = s.trim_start_matches(|c: char| c == '>' || c.is_whitespace());
        lines.push((start, body.to_string()));
        cur.clear();
    };
    while i < b.len() {
        let c = b[i];
        if qp && c == b'=' {
            if let (Some(h), Some(l)) = (b.get(i + 1).and_then(hex), b.get(i + 2).and_then(hex)) {
                cur.push(h * 16 + l);
                i += 3;
                continue;
            }
            let mut j = i + 1;
            while j < b.len() && (b[j] == b' ' || b[j] == b'\t') {
                j += 1;
            }
            if j < b.len() && b[j] == b'\r' && b.get(j + 1) == Some(&b'\n') {
                line_no += 1;
                i = j + 2;
                continue;
            }
            if j < b.len() && b[j] == b'\n' {
                line_no += 1;
                i = j + 1;
                continue;
            }
            if j == b.len() || j > i + 1 {
                // '=' at the very end, or a soft break flattened to "= ".
                i = j;
                continue;
            }
            cur.push(c);
            i += 1;
            continue;
        }
        match c {
            b'\n' => {
                flush(&mut cur, start_line, &mut lines);
                line_no += 1;
                start_line = line_no;
            }
            b'\r' => {}
            _ => cur.push(c),
        }
        i += 1;
    }
    if !cur.is_empty() {
        flush(&mut cur, start_line, &mut lines);
    }
    lines
}

fn hex(c: &u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

fn looks_quoted_printable(text: &str) -> bool {
    if ["=3D", "=20", "=E2=", "=C2="]
        .iter()
        .any(|p| text.contains(p))
        || text.to_ascii_lowercase().contains("quoted-printable")
    {
        return true;
    }
    // A soft break is '=' at the end of a line, right after a visible character (an encoder
    // writes whitespace before a soft break as =20/=09), or the same flattened to "word= word".
    // "LLC =" + newline or "a = b" in plain text is therefore not taken for one.
    let visible = |c: u8| !c.is_ascii_whitespace() && c != b'=';
    text.lines().any(|l| {
        let b = l.trim_end_matches('\r').as_bytes();
        b.len() >= 2 && b[b.len() - 1] == b'=' && visible(b[b.len() - 2])
    }) || text
        .as_bytes()
        .windows(4)
        .any(|w| visible(w[0]) && w[1] == b'=' && w[2] == b' ' && visible(w[3]))
}

#[derive(Debug, Clone)]
pub(super) struct Tok {
    pub(super) s: String,
    pub(super) line: usize,
}

pub(super) fn tokenize(text: &str) -> Vec<Tok> {
    let mut out = Vec::new();
    for (line, body) in normalise(text) {
        for w in body.split_whitespace() {
            if w.chars().all(|c| c == '>') {
                continue;
            }
            out.push(Tok {
                s: w.to_string(),
                line,
            });
        }
    }
    out
}

pub(super) fn word(t: &[Tok], i: usize) -> Option<&str> {
    t.get(i).map(|x| x.s.as_str())
}

fn is_bar(s: &str) -> bool {
    !s.is_empty() && s.chars().all(|c| matches!(c, '|' | '*' | '@' | '+'))
}

pub(super) fn skip_bars(t: &[Tok], mut i: usize) -> usize {
    while word(t, i).is_some_and(is_bar) {
        i += 1;
    }
    i
}

pub(super) fn err(file: &str, line: usize, field: &str, msg: impl Into<String>) -> Error {
    Error::parse(file, line, field, msg)
}

/// Line of word `i`, or of the last word when `i` is past the end.
pub(super) fn line_at(t: &[Tok], i: usize) -> usize {
    t.get(i).or_else(|| t.last()).map(|x| x.line).unwrap_or(0)
}

pub(super) fn found(t: &[Tok], i: usize) -> String {
    match word(t, i) {
        Some(w) => format!("found '{w}'"),
        None => "found the end of the text".to_string(),
    }
}

pub(super) fn is_uint(s: &str) -> bool {
    !s.is_empty() && s.bytes().all(|c| c.is_ascii_digit())
}

pub(super) fn parse_uint(t: &[Tok], i: usize, file: &str, field: &str, what: &str) -> Result<u64> {
    let w = word(t, i).ok_or_else(|| {
        err(
            file,
            line_at(t, i),
            field,
            format!("expected {what}, found the end of the text"),
        )
    })?;
    if !is_uint(w) {
        return Err(err(
            file,
            line_at(t, i),
            field,
            format!("expected {what}, {}", found(t, i)),
        ));
    }
    w.parse::<u64>().map_err(|_| {
        err(
            file,
            line_at(t, i),
            field,
            format!("'{w}' does not fit in 64 bits"),
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn qp_soft_breaks_hex_and_flattened() {
        let lines = normalise("> a =3D 1\n> count: 130=\n5242\nx\n");
        assert_eq!(lines[0], (1, "a = 1".to_string()));
        assert_eq!(lines[1], (2, "count: 1305242".to_string()));
        assert_eq!(lines[2], (4, "x".to_string()));
        let flat = normalise("avg =3D 1 count: 130= 5242 z=E2=80=AFw");
        assert_eq!(flat[0].1, "avg = 1 count: 1305242 z\u{202f}w");
        // Not QP: '=' is literal.
        assert_eq!(normalise("avg = 5")[0].1, "avg = 5");
        assert_eq!(normalise("> LLC =\n> 12288")[1].1, "12288");
    }
}
