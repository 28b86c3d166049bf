//! Reading a user's input file: bounded in size (a device such as `/dev/zero` or a huge paste
//! ends in an error, not in exhausting memory) and checked to be UTF-8, with the line of the
//! first bad byte named.

use std::io::Read;
use std::path::Path;

use crate::error::{Error, Result};

/// Largest description file (machine or workload TOML) read, bytes: the built-in ones are
/// under 20 KiB.
pub const MAX_TOML_BYTES: u64 = 1 << 20;

/// Largest pasted tool output or `/proc` text read (funclatency, bpftrace, perf lock,
/// zoneinfo), bytes: such pastes are kilobytes; a zoneinfo of a 1024-CPU machine is a few MiB.
pub const MAX_TEXT_BYTES: u64 = 16 << 20;

/// Largest measurement CSV read, bytes (about a million rows).
pub const MAX_CSV_BYTES: u64 = 64 << 20;

/// Whether a command-line name or a file's reference names a file rather than a built-in: it
/// has a path separator or ends in `.toml` (built-in machines and workloads are named without).
pub fn looks_like_path(name: &str) -> bool {
    name.contains(std::path::MAIN_SEPARATOR) || name.ends_with(".toml")
}

/// Reads `path` as UTF-8 text of at most `max_bytes` (`label` names it in errors).
pub fn read_text(path: &Path, label: &str, max_bytes: u64) -> Result<String> {
    if path.is_dir() {
        return Err(Error::io(
            label,
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "is a directory, not a file",
            ),
        ));
    }
    let file = std::fs::File::open(path).map_err(|e| Error::io(label, e))?;
    text_from(file, label, max_bytes)
}

/// Reads UTF-8 text of at most `max_bytes` from `reader` (stdin, a file).
pub fn text_from(reader: impl Read, label: &str, max_bytes: u64) -> Result<String> {
    let mut bytes = Vec::new();
    reader
        .take(max_bytes + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Error::io(label, e))?;
    if bytes.len() as u64 > max_bytes {
        return Err(Error::io(
            label,
            std::io::Error::new(
                std::io::ErrorKind::InvalidData,
                format!(
                    "larger than {} MiB, the most this input is read to (is it the right file?)",
                    max_bytes >> 20
                ),
            ),
        ));
    }
    String::from_utf8(bytes).map_err(|e| {
        let at = e.utf8_error().valid_up_to();
        let raw = e.as_bytes();
        let line = raw[..at].iter().filter(|&&b| b == b'\n').count() + 1;
        Error::parse(
            label,
            line,
            "text",
            format!(
                "byte {:#04x} at byte {} is not UTF-8 (a binary file, or text in another encoding)",
                raw[at],
                at + 1
            ),
        )
    })
}

/// Refuses control characters (an escape sequence, a carriage return, a NUL) in any text of a
/// parsed description, walked as JSON: printed to a terminal they would move the cursor or
/// clear the screen. Line feeds and tabs are allowed. The error names the dotted field.
pub fn check_text_fields(label: &str, value: &serde_json::Value) -> Result<()> {
    fn walk(v: &serde_json::Value, path: &str) -> Option<(String, char)> {
        match v {
            serde_json::Value::String(s) => s
                .chars()
                .find(|c| c.is_control() && *c != '\n' && *c != '\t')
                .map(|c| (path.to_string(), c)),
            serde_json::Value::Array(a) => a
                .iter()
                .enumerate()
                .find_map(|(i, x)| walk(x, &format!("{path}[{i}]"))),
            serde_json::Value::Object(o) => o.iter().find_map(|(k, x)| {
                let p = if path.is_empty() {
                    k.clone()
                } else {
                    format!("{path}.{k}")
                };
                walk(x, &p)
            }),
            _ => None,
        }
    }
    match walk(value, "") {
        None => Ok(()),
        Some((field, c)) => Err(Error::invalid(
            label,
            field,
            format!(
                "contains the control character U+{:04X}; text fields hold printable text only",
                c as u32
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn too_large_and_non_utf8_inputs_are_errors_with_a_location() {
        let big = std::io::repeat(b'a');
        let e = text_from(big, "zero", 1024).unwrap_err().to_string();
        assert!(e.contains("zero"), "{e}");
        let bad = &b"ok\nok\n\xff\n"[..];
        let e = text_from(bad, "f.csv", 1024).unwrap_err().to_string();
        assert!(e.contains("f.csv:3"), "{e}");
        assert_eq!(text_from(&b"a,b\n"[..], "f", 4).unwrap(), "a,b\n");
    }
}
