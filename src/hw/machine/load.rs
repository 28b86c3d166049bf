//! Loading machines: the built-in files compiled from `models/`, TOML parsing and writing, and
//! error locations (the line of a dotted field).

use crate::error::{Error, Result};

use super::schema::Machine;

/// A built-in machine file: name and TOML text, compiled in.
pub struct BuiltinMachine {
    /// File stem, e.g. `icelake-server`.
    pub name: &'static str,
    /// TOML text.
    pub toml: &'static str,
}

macro_rules! builtin {
    ($($name:literal),* $(,)?) => {
        &[$(BuiltinMachine {
            name: $name,
            toml: include_str!(concat!("../../../models/", $name, ".toml")),
        }),*]
    };
}

/// The machine files in `models/`, compiled into the binary (see `models/README.md` for where
/// each value comes from).
pub const BUILTIN: &[BuiltinMachine] = builtin![
    "icelake-server",
    "skylake-desktop",
    "epyc-7w83",
    "xeon-8260",
    "broadwell-2s",
    "memcg-72cpu",
    "kunpeng-920",
    "xeon-gold-6252-2s",
    "sapphire-rapids-2s-224",
    "epyc-9965-2s",
];

impl Machine {
    /// Parses and validates a machine from TOML text; `label` names the file in errors.
    ///
    /// A value that parses but is impossible is an [`Error::Parse`] naming the file, the line of
    /// the key and the dotted field (an [`Error::Invalid`] when the field has no line of its own).
    pub fn from_toml_str(text: &str, label: &str) -> Result<Machine> {
        let m: Machine = toml::from_str(text).map_err(|e| toml_error(label, text, &e))?;
        m.validate(label).map_err(|e| locate_invalid(e, text))?;
        Ok(m)
    }

    /// Whether `other` describes the same hardware: every value equal, whatever the `source`
    /// strings, the description or the `unknown` notes say (a copy whose provenance text was
    /// edited is still the machine that was measured).
    pub fn same_values(&self, other: &Machine) -> bool {
        fn strip(v: &mut serde_json::Value) {
            match v {
                serde_json::Value::Object(o) => {
                    o.remove("source");
                    o.remove("description");
                    o.remove("unknown");
                    o.values_mut().for_each(strip);
                }
                serde_json::Value::Array(a) => a.iter_mut().for_each(strip),
                _ => {}
            }
        }
        match (serde_json::to_value(self), serde_json::to_value(other)) {
            (Ok(mut a), Ok(mut b)) => {
                strip(&mut a);
                strip(&mut b);
                a == b
            }
            _ => false,
        }
    }

    /// Loads a machine from a TOML file.
    pub fn from_path(path: &std::path::Path) -> Result<Machine> {
        let label = path.display().to_string();
        let text = crate::input::read_text(path, &label, crate::input::MAX_TOML_BYTES)?;
        Self::from_toml_str(&text, &label)
    }

    /// A built-in machine by name.
    pub fn builtin(name: &str) -> Result<Machine> {
        let b = BUILTIN
            .iter()
            .find(|b| b.name == name)
            .ok_or_else(|| Error::Unknown {
                kind: "machine",
                name: name.to_string(),
                hint: format!(
                    ": built-in machines are {} (or give a path to a TOML file)",
                    BUILTIN
                        .iter()
                        .map(|b| b.name)
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
            })?;
        Self::from_toml_str(b.toml, &format!("built-in models/{}.toml", b.name))
    }

    /// The names of the built-in machines.
    pub fn builtin_names() -> Vec<&'static str> {
        BUILTIN.iter().map(|b| b.name).collect()
    }

    /// A built-in name, or else a path to a TOML file.
    pub fn resolve(name_or_path: &str) -> Result<Machine> {
        if BUILTIN.iter().any(|b| b.name == name_or_path) {
            return Self::builtin(name_or_path);
        }
        let p = std::path::Path::new(name_or_path);
        if p.exists() {
            return Self::from_path(p);
        }
        // A name that looks like a path is a file that does not exist, not an unknown built-in.
        if crate::input::looks_like_path(name_or_path) {
            return Err(Error::Io {
                path: name_or_path.to_string(),
                source: std::io::Error::new(
                    std::io::ErrorKind::NotFound,
                    "no such machine file (built-in machines are named without .toml: see `pcpmodel machines`)",
                ),
            });
        }
        Self::builtin(name_or_path)
    }

    /// Every built-in machine.
    pub fn all_builtin() -> Result<Vec<Machine>> {
        BUILTIN.iter().map(|b| Self::builtin(b.name)).collect()
    }

    /// Serialises the machine back to TOML (the schema of `models/*.toml`).
    pub fn to_toml_string(&self) -> Result<String> {
        toml::to_string(self).map_err(|e| Error::Unsupported(format!("cannot write TOML: {e}")))
    }
}

/// Converts a toml error into an [`Error::Parse`] with a 1-based line number.
pub(crate) fn toml_error(label: &str, text: &str, e: &toml::de::Error) -> Error {
    let line = e
        .span()
        .map(|s| {
            let end = s.start.min(text.len());
            text.as_bytes()[..end]
                .iter()
                .filter(|&&b| b == b'\n')
                .count()
                + 1
        })
        .unwrap_or(0);
    let message = plain_type_names(&shorten_digit_runs(e.message()));
    let line_text = text.lines().nth(line.saturating_sub(1)).unwrap_or("");
    let column = e.span().map_or(usize::MAX, |s| {
        let start = s.start.min(text.len());
        start - text[..start].rfind('\n').map_or(0, |i| i + 1)
    });
    // A missing key is named by the message, under the table or inline table the parser
    // points at (not by the key that happens to sit on that line).
    if let Some(missing) = message
        .strip_prefix("missing field `")
        .and_then(|m| m.split('`').next())
    {
        let within = if e.span().is_none_or(|s| s.start == 0) {
            None
        } else if let Some(t) = table_header(line_text) {
            Some(t.to_string())
        } else {
            // The inline table's key, under the [table] the line sits in.
            let table = text
                .lines()
                .take(line.saturating_sub(1))
                .filter_map(table_header)
                .last();
            inline_key_path(line_text, column.saturating_add(1)).map(|k| match table {
                Some(t) => format!("{t}.{k}"),
                None => k,
            })
        };
        let field = match within {
            Some(p) if !p.is_empty() => format!("{p}.{missing}"),
            _ => missing.to_string(),
        };
        return Error::parse(label, line, &field, "missing: a required key".to_string());
    }
    // A table header names its table (a workload file's `[[op]]` is refused before parsing,
    // WorkloadSpec::from_toml_str; a machine file's `[[cache]]` is its schema).
    if let Some(name) = table_header(line_text) {
        return Error::parse(label, line, name, message);
    }
    // Name the key of the offending line (`cores_per_socket = { value = -3, ... }`), and inside
    // an inline table the key the parser stopped at (`work.basis`), so the error says which
    // field as well as where.
    let field = inline_key_path(line_text, column)
        .filter(|k| {
            !k.is_empty()
                && k.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_-.\"".contains(c))
        })
        .unwrap_or_else(|| "toml".to_string());
    Error::parse(label, line, &field, message)
}

/// The table a header line opens (`[op]`, `[[cache]]`: `op`, `cache`), if it is one.
fn table_header(line: &str) -> Option<&str> {
    let h = line.trim();
    h.strip_prefix('[')
        .and_then(|h| h.strip_suffix(']'))
        .map(|t| t.trim_matches(|c| c == '[' || c == ']').trim())
}

/// The dotted key path at byte `column` of a TOML line: the line's key, then the keys of the
/// inline tables open at that column and the key whose value starts there (`work.ns.value` in
/// `work = { ns = { value = x, ... } }` at `x`). `None` when the line has no `key =`.
fn inline_key_path(line: &str, column: usize) -> Option<String> {
    let upto = &line.as_bytes()[..column.min(line.len())];
    let mut open: Vec<String> = Vec::new();
    let mut current: Option<String> = None;
    let mut key = String::new();
    let mut in_string = false;
    for &b in upto {
        let c = b as char;
        if in_string {
            if c == '"' {
                in_string = false;
            }
            continue;
        }
        match c {
            '"' => in_string = true,
            '=' => {
                current = Some(key.trim().to_string()).filter(|k| !k.is_empty());
                key.clear();
            }
            '{' => {
                if let Some(k) = current.take() {
                    open.push(k);
                }
                key.clear();
            }
            '}' => {
                open.pop();
                current = None;
                key.clear();
            }
            ',' => {
                current = None;
                key.clear();
            }
            _ => key.push(c),
        }
    }
    let mut path = open;
    path.extend(current);
    // A sourced value's own `value` is the field itself (`cores_per_socket`, not
    // `cores_per_socket.value`).
    if path.len() > 1 && path.last().is_some_and(|k| k == "value") {
        path.pop();
    }
    if path.is_empty() {
        line.split_once('=').map(|(k, _)| k.trim().to_string())
    } else {
        Some(path.join("."))
    }
}

/// serde's messages name the Rust types a value should have been (`expected struct Sourced`):
/// say what to write instead.
fn plain_type_names(message: &str) -> String {
    if message.contains("as i128, expected f64") {
        return format!(
            "{message}: an integer beyond TOML's 64-bit range; write it with an exponent (1.8e19)"
        );
    }
    message
        .replace(
            "struct Sourced",
            "a sourced value { value = ..., source = \"kind: ...\" }",
        )
        .replace(
            "struct Quantity",
            "a sourced value { value = ..., source = \"kind: ...\" }",
        )
        .replace(
            "struct Work",
            "a work table { ns = { value = ..., source = \"kind: ...\" } } (or cycles = ...)",
        )
}

/// The parser echoes a number such as 1e308 with all 309 of its digits: a run of more than 15
/// digits is shown by its first digits and its length.
fn shorten_digit_runs(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut run = String::new();
    let flush = |run: &mut String, out: &mut String| {
        if run.len() > 15 {
            out.push_str(&format!("{}... ({} digits)", &run[..6], run.len()));
        } else {
            out.push_str(run);
        }
        run.clear();
    };
    for c in message.chars() {
        if c.is_ascii_digit() {
            run.push(c);
        } else {
            flush(&mut run, &mut out);
            out.push(c);
        }
    }
    flush(&mut run, &mut out);
    out
}

/// Turns an [`Error::Invalid`] about a dotted field of a machine file into an [`Error::Parse`]
/// with the line of that field in `text` (other errors pass through).
/// Puts the line of the offending key into an [`Error::Invalid`] when the key has one (an
/// [`Error::Parse`] then); other errors pass through.
pub(crate) fn locate_invalid(e: Error, text: &str) -> Error {
    match e {
        Error::Invalid {
            file,
            field,
            message,
        } => match field_line(text, &field) {
            Some(line) => Error::Parse {
                file,
                line,
                field,
                message,
            },
            None => Error::Invalid {
                file,
                field,
                message,
            },
        },
        other => other,
    }
}

/// The 1-based line of a dotted field (`cache[2].ways`, `latency_ns.dram_local`, `name`) in a
/// machine file, or of its closest enclosing table; `None` when neither is in the text.
pub fn field_line(text: &str, field: &str) -> Option<usize> {
    let field = field.strip_suffix(".source").unwrap_or(field);
    // Every key and table header with its full dotted path.
    let mut found: Vec<(String, usize)> = Vec::new();
    let mut table = String::new();
    let mut arrays: Vec<(String, usize)> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.starts_with('#') || line.is_empty() {
            continue;
        }
        if let Some(name) = line.strip_prefix("[[").and_then(|l| l.split("]]").next()) {
            let name = name.trim().to_string();
            let idx = match arrays.iter_mut().find(|(n, _)| *n == name) {
                Some((_, k)) => {
                    *k += 1;
                    *k - 1
                }
                None => {
                    arrays.push((name.clone(), 1));
                    0
                }
            };
            table = format!("{name}[{idx}]");
            found.push((table.clone(), i + 1));
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.split(']').next()) {
            table = name.trim().to_string();
            found.push((table.clone(), i + 1));
            continue;
        }
        if let Some((key, _)) = line.split_once('=') {
            let key = key.trim().trim_matches('"');
            let path = if table.is_empty() {
                key.to_string()
            } else {
                format!("{table}.{key}")
            };
            found.push((path, i + 1));
        }
    }
    let mut want = field.to_string();
    loop {
        if let Some((_, l)) = found.iter().find(|(p, _)| *p == want) {
            return Some(*l);
        }
        // The enclosing table: drop the last component (`cache[2].ways` -> `cache[2]`).
        match want.rfind('.') {
            Some(k) => want.truncate(k),
            None => return None,
        }
    }
}
