//! Output for people and for programs: a [`Report`] holds one JSON value (the machine-readable
//! contract) and one or more [`Table`]s (for people, and for `--format csv`: the first table).

use serde::Serialize;

/// Output format chosen with `--format`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Format {
    /// Aligned text tables with units, for people.
    #[default]
    Table,
    /// One JSON document (object or array) on stdout.
    Json,
    /// The report's primary table as CSV with a header row.
    Csv,
}

/// A table: column headers (with units) and rows of already-formatted cells.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Table {
    /// Optional title printed above the table.
    pub title: Option<String>,
    /// Column headers; put the unit in the header, e.g. `latency (ns)`.
    pub columns: Vec<String>,
    /// Rows; each row has one cell per column.
    pub rows: Vec<Vec<String>>,
}

impl Table {
    /// A table with the given columns and no rows.
    pub fn new<S: Into<String>>(columns: impl IntoIterator<Item = S>) -> Self {
        Table {
            title: None,
            columns: columns.into_iter().map(Into::into).collect(),
            rows: Vec::new(),
        }
    }

    /// A breakdown of a total into additive terms: one row per term with its value (4 significant
    /// digits) and its share of `total` in percent, then the total itself. `value_header` names the
    /// value column with its unit, e.g. `ns per 4 KiB page`.
    pub fn terms(
        title: impl Into<String>,
        value_header: &str,
        terms: &[(&str, f64)],
        total: f64,
    ) -> Self {
        let mut t = Table::new(["term", value_header, "share (%)"]).titled(title);
        for (name, v) in terms.iter().chain(std::iter::once(&("total", total))) {
            t.push([
                name.to_string(),
                sig(*v, 4),
                format!("{:.1}", 100.0 * v / total),
            ]);
        }
        t
    }

    /// Sets the title.
    pub fn titled(mut self, title: impl Into<String>) -> Self {
        self.title = Some(title.into());
        self
    }

    /// Appends a row.
    pub fn push<S: Into<String>>(&mut self, row: impl IntoIterator<Item = S>) {
        self.rows.push(row.into_iter().map(Into::into).collect());
    }

    /// Renders as aligned text. Numeric-looking cells are right-aligned.
    pub fn render_text(&self) -> String {
        let ncol = self.columns.len();
        let mut width: Vec<usize> = self.columns.iter().map(|c| c.chars().count()).collect();
        for r in &self.rows {
            for (i, c) in r.iter().enumerate().take(ncol) {
                width[i] = width[i].max(c.chars().count());
            }
        }
        let mut out = String::new();
        if let Some(t) = &self.title {
            out.push_str(t);
            out.push('\n');
        }
        let line = |cells: &[String], out: &mut String| {
            let mut s = String::new();
            for (i, c) in cells.iter().enumerate().take(ncol) {
                let pad = width[i].saturating_sub(c.chars().count());
                if i > 0 {
                    s.push_str("  ");
                }
                if looks_numeric(c) {
                    s.push_str(&" ".repeat(pad));
                    s.push_str(c);
                } else {
                    s.push_str(c);
                    if i + 1 < ncol {
                        s.push_str(&" ".repeat(pad));
                    }
                }
            }
            out.push_str(s.trim_end());
            out.push('\n');
        };
        line(&self.columns, &mut out);
        let rule: Vec<String> = width.iter().map(|w| "-".repeat(*w)).collect();
        line(&rule, &mut out);
        for r in &self.rows {
            line(r, &mut out);
        }
        out
    }

    /// Renders as CSV with a header row, for machines: columns drawn for people (an ASCII bar
    /// chart, [`PEOPLE_ONLY_COLUMNS`]) are left out and a missing value ("-" in the text table)
    /// is an empty field.
    pub fn render_csv(&self) -> String {
        let keep: Vec<bool> = self
            .columns
            .iter()
            .map(|c| !PEOPLE_ONLY_COLUMNS.contains(&c.as_str()))
            .collect();
        let pick = |cells: &[String]| -> Vec<String> {
            cells
                .iter()
                .zip(keep.iter().chain(std::iter::repeat(&true)))
                .filter(|(_, k)| **k)
                .map(|(c, _)| if c == "-" { String::new() } else { c.clone() })
                .collect()
        };
        let mut w = csv::Writer::from_writer(Vec::new());
        // Writing to a Vec cannot fail; a malformed row (wrong length) is written as it is.
        let _ = w.write_record(pick(&self.columns));
        for r in &self.rows {
            let _ = w.write_record(pick(r));
        }
        let _ = w.flush();
        String::from_utf8(w.into_inner().unwrap_or_default()).unwrap_or_default()
    }
}

/// Column headers of text tables that are drawings for people (bar charts), not data: CSV output
/// leaves them out.
pub const PEOPLE_ONLY_COLUMNS: &[&str] = &["distribution", "bar"];

fn looks_numeric(s: &str) -> bool {
    let t = s.trim_start_matches(['+', '-', '~']);
    t.chars().next().is_some_and(|c| c.is_ascii_digit())
        && t.chars()
            .all(|c| c.is_ascii_digit() || ".,eE+-%x/ ±".contains(c))
}

/// What a command produces: the JSON contract, tables for people, and notes (printed after the
/// tables in table format, never in JSON/CSV).
#[derive(Debug, Clone, Default)]
pub struct Report {
    /// The machine-readable result.
    pub json: serde_json::Value,
    /// Tables for people; the first is the CSV output.
    pub tables: Vec<Table>,
    /// Free-text notes for people (provenance, caveats, explanations).
    pub notes: Vec<String>,
}

impl Report {
    /// Renders the report in the given format.
    pub fn render(&self, format: Format) -> String {
        match format {
            Format::Json => {
                let mut s = serde_json::to_string_pretty(&self.json).unwrap_or_default();
                s.push('\n');
                s
            }
            Format::Csv => self
                .tables
                .first()
                .map(Table::render_csv)
                .unwrap_or_default(),
            Format::Table => {
                let mut out = String::new();
                for (i, t) in self.tables.iter().enumerate() {
                    if i > 0 {
                        out.push('\n');
                    }
                    out.push_str(&t.render_text());
                }
                if !self.notes.is_empty() {
                    out.push('\n');
                    for n in &self.notes {
                        out.push_str(n);
                        out.push('\n');
                    }
                }
                out
            }
        }
    }
}

/// Formats a float with `digits` significant digits, without exponent for everyday magnitudes.
pub fn sig(x: f64, digits: usize) -> String {
    if !x.is_finite() {
        return format!("{x}");
    }
    if x == 0.0 {
        return "0".to_string();
    }
    if x.abs() < 1e-3 || x.abs() >= 1e15 {
        return format!("{:.*e}", digits.saturating_sub(1), x);
    }
    let mag = x.abs().log10().floor() as i32;
    let decimals = (digits as i32 - 1 - mag).max(0) as usize;
    format!("{x:.decimals$}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sig_digits() {
        assert_eq!(sig(449775.0, 3), "449775");
        assert_eq!(sig(0.012345, 3), "0.0123");
        assert_eq!(sig(12.345, 3), "12.3");
        assert_eq!(sig(4.332e-9, 4), "4.332e-9");
    }

    #[test]
    fn terms_table_adds_the_total_and_shares() {
        let t = Table::terms("x", "ns", &[("a", 1.0), ("b", 3.0)], 4.0);
        assert_eq!(t.rows.len(), 3);
        assert_eq!(t.rows[1], ["b", "3.000", "75.0"]);
        assert_eq!(t.rows[2][0], "total");
    }

    #[test]
    fn csv_leaves_out_bars_and_dashes() {
        let mut t = Table::new(["lo_ns", "measured", "distribution"]);
        t.push(["512", "-", "|**  |"]);
        assert_eq!(t.render_csv(), "lo_ns,measured\n512,\n");
    }

    #[test]
    fn table_aligns_and_csv_quotes() {
        let mut t = Table::new(["name", "size (KiB)"]);
        t.push(["a, b", "1280"]);
        let txt = t.render_text();
        assert!(txt.contains("a, b        1280"), "{txt}");
        assert!(t.render_csv().contains("\"a, b\",1280"));
    }
}
