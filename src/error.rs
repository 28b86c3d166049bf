//! The library's error type. Every error caused by data says which file, line and field.

use thiserror::Error;

/// Errors from loading, parsing and validating inputs. A fit that fails to converge is *not* an
/// error: it is a result with a termination reason (see `fit`).
#[derive(Debug, Error)]
pub enum Error {
    /// A file could not be read (the cause follows in the error chain).
    #[error("cannot read {path}")]
    Io {
        /// The path that was being read.
        path: String,
        /// The underlying I/O error.
        #[source]
        source: std::io::Error,
    },
    /// Text that could not be parsed. `line` is 1-based; 0 means "not tied to a line" (a flag,
    /// a whole file) and is not printed: `--kernel: kernel version: ...`, never `--kernel:0:`.
    #[error("{file}{}: {field}: {message}", line_suffix(*.line))]
    Parse {
        /// File name (or a label such as `built-in models/icelake-server.toml`).
        file: String,
        /// 1-based line number, 0 when unknown.
        line: usize,
        /// The field, column or key at fault.
        field: String,
        /// What is wrong, in words.
        message: String,
    },
    /// Input that parsed but describes something impossible (LLC smaller than L2, zero cores,
    /// negative latency, NaN, ...).
    #[error("{file}: {field}: {message}")]
    Invalid {
        /// File name or label.
        file: String,
        /// Dotted path of the field at fault, e.g. `latency_ns.dram_local`.
        field: String,
        /// What is wrong, in words.
        message: String,
    },
    /// A name that does not resolve (unknown machine, model, workload, table).
    #[error("unknown {kind} '{name}'{hint}")]
    Unknown {
        /// What kind of thing was looked up.
        kind: &'static str,
        /// The name given.
        name: String,
        /// A hint listing valid names, starting with ": " (or empty).
        hint: String,
    },
    /// A request the model cannot answer (e.g. a parameter outside its validity range).
    #[error("{0}")]
    Unsupported(String),
}

/// `":LINE"` for a 1-based line, nothing for 0 (not tied to a line).
fn line_suffix(line: usize) -> String {
    if line == 0 {
        String::new()
    } else {
        format!(":{line}")
    }
}

/// Shorthand for `Result<T, pcpmodel::Error>`.
pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    /// Builds a [`Error::Parse`].
    pub fn parse(
        file: impl Into<String>,
        line: usize,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Error::Parse {
            file: file.into(),
            line,
            field: field.into(),
            message: message.into(),
        }
    }

    /// Builds a [`Error::Invalid`].
    pub fn invalid(
        file: impl Into<String>,
        field: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Error::Invalid {
            file: file.into(),
            field: field.into(),
            message: message.into(),
        }
    }

    /// Builds a [`Error::Io`].
    pub fn io(path: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            path: path.into(),
            source,
        }
    }
}
