//! Validation against every built-in measurement table: measured vs predicted, relative error, and
//! what each prediction knew of the point ([`Role`]: fitted, loo, held_out, seen, alternative,
//! no_fit, literature).
//!
//! One file per seed thread (`t004.rs`, ...). Each returns a [`TableValidation`]: its rows, the fit
//! reports behind them and notes that say, in words, where and why the model disagrees with a
//! measurement. Nothing here is tuned to make a row pass: a row that is off stays off and is
//! reported.

use serde::Serialize;

use crate::error::Result;

pub mod literature;
pub mod literature_dhama;
pub mod literature_huang;
pub mod literature_lkp;
pub mod t000;
pub mod t001;
pub mod t002;
pub mod t003;
pub mod t004;
pub mod workload;

/// What a row's prediction knew of the point it is compared with. Only `loo`, `held_out`,
/// `no_fit` and `literature` rows are tests of the model; `seen` rows are not, even where the
/// optimiser never saw them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The point was in the data the parameters were fitted to.
    Fitted,
    /// Leave-one-out: the same fit redone without the point, then predicted at it.
    Loo,
    /// Another condition predicted from a fit that did not include it, with no constant or
    /// mechanism chosen while looking at it.
    HeldOut,
    /// Not fitted, but a mechanism or constant of the model was chosen (or revised) while this
    /// point was visible and its error watched: it does not count as a blind test.
    Seen,
    /// A variant of the model shown for comparison (another assumption), not the model's answer.
    Alternative,
    /// Derived from code and machine facts with nothing fitted.
    NoFit,
    /// A published measurement beyond the five threads, predicted with nothing fitted to it.
    Literature,
}

impl Role {
    /// Every role, in report order.
    pub const ALL: [Role; 7] = [
        Role::Fitted,
        Role::Loo,
        Role::HeldOut,
        Role::Seen,
        Role::Alternative,
        Role::NoFit,
        Role::Literature,
    ];

    /// The JSON name (`fitted`, `loo`, `held_out`, `seen`, `alternative`, `no_fit`,
    /// `literature`).
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Fitted => "fitted",
            Role::Loo => "loo",
            Role::HeldOut => "held_out",
            Role::Seen => "seen",
            Role::Alternative => "alternative",
            Role::NoFit => "no_fit",
            Role::Literature => "literature",
        }
    }

    /// Whether a row with this role is a test of the model (nothing fitted to it and nothing
    /// chosen while looking at it).
    pub fn is_test(self) -> bool {
        matches!(
            self,
            Role::Loo | Role::HeldOut | Role::NoFit | Role::Literature
        )
    }
}

/// One comparison of a measured value with the model.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ValidationRow {
    /// Seed thread ("000".."004") or the user's file name.
    pub thread: String,
    /// Machine name.
    pub machine: String,
    /// Which measurement, e.g. `high=640`.
    pub case: String,
    /// What is compared, e.g. `score`, `avg_ns`.
    pub quantity: String,
    /// Measured value.
    pub measured: f64,
    /// Model value.
    pub predicted: f64,
    /// Unit of both.
    pub unit: String,
    /// `(predicted − measured) / |measured|`.
    pub rel_error: f64,
    /// What the prediction knew of the point.
    pub role: Role,
    /// How the prediction was made (which fit, what was held out).
    pub how: String,
    /// Ids of the registry entries ([`crate::assumptions::registry`]) the prediction reads:
    /// the assumed constants its table uses and the `assumed` fields of its workload and
    /// machine files. Set by [`with_provenance`].
    pub depends_on: Vec<String>,
}

impl ValidationRow {
    /// A row; the relative error is computed here.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        thread: &str,
        machine: &str,
        case: impl Into<String>,
        quantity: &str,
        measured: f64,
        predicted: f64,
        unit: &str,
        role: Role,
        how: impl Into<String>,
    ) -> Self {
        ValidationRow {
            thread: thread.to_string(),
            machine: machine.to_string(),
            case: case.into(),
            quantity: quantity.to_string(),
            measured,
            predicted,
            unit: unit.to_string(),
            rel_error: if measured != 0.0 {
                (predicted - measured) / measured.abs()
            } else {
                f64::NAN
            },
            role,
            how: how.into(),
            depends_on: Vec::new(),
        }
    }
}

/// The validation of one thread's tables.
#[derive(Debug, Clone, Serialize)]
pub struct TableValidation {
    /// Seed thread.
    pub thread: String,
    /// What was measured, in a few words.
    pub title: String,
    /// Rows.
    pub rows: Vec<ValidationRow>,
    /// Number of free parameters per fit, and what they are.
    pub free_params: Vec<String>,
    /// Constants that shape the rows and are neither hardware values nor kernel constants
    /// (name = value unit: where it came from), with the tables they were chosen while looking at.
    pub assumed_constants: Vec<String>,
    /// Fitted rows minus fitted parameters over all of the table's fits (0 for an exactly
    /// determined fit; not meaningful when nothing is fitted).
    pub degrees_of_freedom: i64,
    /// Registry entries any of its rows depends on (set by [`with_provenance`]).
    pub assumed_entries: Vec<String>,
    /// Notes for people: disagreements and why we think they happen.
    pub notes: Vec<String>,
}

impl TableValidation {
    /// A table's validation: its rows, fitted parameters and notes; the assumed constants come
    /// from [`crate::assumptions`] and the degrees of freedom are the fitted rows of the
    /// `fitted_quantities` (what the optimiser saw; other in-sample rows such as percentiles are
    /// diagnostics) minus `fitted_parameters` (the count over all of the table's fits).
    pub fn new(
        thread: &str,
        title: impl Into<String>,
        rows: Vec<ValidationRow>,
        free_params: Vec<String>,
        (fitted_parameters, fitted_quantities): (usize, &[&str]),
        notes: Vec<String>,
    ) -> Self {
        let fitted_rows = rows
            .iter()
            .filter(|r| r.role == Role::Fitted && fitted_quantities.contains(&r.quantity.as_str()))
            .count();
        TableValidation {
            thread: thread.to_string(),
            title: title.into(),
            rows,
            free_params,
            assumed_constants: crate::assumptions::for_thread(thread)
                .iter()
                .map(crate::assumptions::describe)
                .collect(),
            degrees_of_freedom: fitted_rows as i64 - fitted_parameters as i64,
            assumed_entries: Vec::new(),
            notes,
        }
    }

    /// Root-mean-square relative error of the rows with `role`, optionally of one machine and one
    /// quantity (`None` if no rows).
    pub fn rms_rel(
        &self,
        role: Role,
        machine: Option<&str>,
        quantity: Option<&str>,
    ) -> Option<f64> {
        let v: Vec<f64> = self
            .rows
            .iter()
            .filter(|r| {
                r.role == role
                    && machine.is_none_or(|m| r.machine == m)
                    && quantity.is_none_or(|q| r.quantity == q)
            })
            .map(|r| r.rel_error)
            .filter(|e| e.is_finite())
            .collect();
        if v.is_empty() {
            None
        } else {
            Some((v.iter().map(|e| e * e).sum::<f64>() / v.len() as f64).sqrt())
        }
    }
}

pub use crate::workload::spec::THREAD_KINDS;

/// The built-in workload files a table's predictions read: for a seed thread's table the files
/// naming that thread, for a literature table those its validator resolves.
pub fn table_workloads(table: &str) -> Result<Vec<String>> {
    let fixed: &[&str] = match table {
        "literature-halbuer" => &["bulk-alloc-order0", "bulk-alloc-order9"],
        "literature-kemiwang" => &["page-bench"],
        "literature-jordan" => &["will-it-scale-page-fault1"],
        "literature-huang" | "literature-huang-prose" => {
            &["kbuild-cgroups", "lmbench-af-unix", "netperf-sctp-stream"]
        }
        "literature-dhama-sweep" => &["iperf3-tcp"],
        "literature-dhama-multi" => &["iperf3-tcp", "lmbench-af-unix", "netperf-sctp-stream"],
        "literature-lkp" => &["netperf-sctp-stream"],
        t => {
            return Ok(crate::workload::Registry::builtin()
                .all_builtin()?
                .into_iter()
                .filter(|w| w.spec.thread.as_deref() == Some(t))
                .map(|w| w.spec.name)
                .collect())
        }
    };
    Ok(fixed.iter().map(|s| s.to_string()).collect())
}

/// A row's role from what it depends on: `fitted`, `loo` and `alternative` are what the fit
/// (or the comparison) did; any other row is `seen` when an entry it depends on was chosen while
/// its table was visible, else `literature` (a published table beyond the threads), `no_fit`
/// (nothing fitted) or `held_out`.
pub fn computed_role(typed: Role, table: &str, deps: &[&crate::assumptions::Entry]) -> Role {
    match typed {
        Role::Fitted | Role::Loo | Role::Alternative => typed,
        _ if deps
            .iter()
            .any(|e| e.seen_tables.iter().any(|t| t == table)) =>
        {
            Role::Seen
        }
        _ if table.starts_with("literature") => Role::Literature,
        Role::NoFit => Role::NoFit,
        _ => Role::HeldOut,
    }
}

/// Sets every row's `depends_on` and role ([`computed_role`]) and every table's
/// `assumed_entries`, from the registry.
pub fn with_provenance(tables: &mut [TableValidation]) -> Result<()> {
    let reg = crate::assumptions::registry()?;
    for t in tables.iter_mut() {
        let user = if t.thread.starts_with("literature") {
            "literature"
        } else {
            t.thread.as_str()
        };
        let files: Vec<String> = table_workloads(&t.thread)?
            .iter()
            .map(|w| format!("models/workloads/{w}.toml:"))
            .collect();
        let table = t.thread.clone();
        let mut all: std::collections::BTreeSet<String> = Default::default();
        for row in t.rows.iter_mut() {
            let machine = format!("models/{}.toml:", row.machine);
            let deps: Vec<&crate::assumptions::Entry> = reg
                .iter()
                .filter(|e| match e.kind {
                    "constant" => e.used_by.iter().any(|u| u == user),
                    _ => e.id.starts_with(&machine) || files.iter().any(|f| e.id.starts_with(f)),
                })
                .collect();
            row.role = computed_role(row.role, &table, &deps);
            row.depends_on = deps.iter().map(|e| e.id.clone()).collect();
            all.extend(row.depends_on.iter().cloned());
        }
        t.assumed_entries = all.into_iter().collect();
        let seen = t.rows.iter().filter(|r| r.role == Role::Seen).count();
        if seen > 0 {
            t.notes.push(format!(
                "{seen} row(s) are seen, not tests: an entry they depend on was chosen while this table was visible (`pcpmodel assumptions`)."
            ));
        }
    }
    Ok(())
}

/// The seed threads `validate` knows ([`THREAD_KINDS`]; each is the `thread` of one built-in
/// workload file of that kind, which the unit test below checks).
pub fn threads() -> Result<Vec<String>> {
    Ok(THREAD_KINDS.iter().map(|(t, _)| t.to_string()).collect())
}

/// Validates one thread's tables (`"000"`..`"004"`); `None` for another name. Comparison fits
/// that feed only a note (thread 003's) run when `comparison_fits` is set.
pub fn validate_thread(thread: &str, comparison_fits: bool) -> Result<Option<TableValidation>> {
    Ok(Some(match thread {
        "000" => t000::validate()?,
        "001" => t001::validate()?,
        "002" => t002::validate()?,
        "003" => t003::validate_with(comparison_fits)?,
        "004" => t004::validate()?,
        _ => return Ok(None),
    }))
}

/// How far one row moves when one assumed constant moves by its spread.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Sensitivity {
    /// The constant's name in [`crate::assumptions`].
    pub constant: String,
    /// The relative move applied to it (its `rel_spread`), percent.
    pub moved_by_pct: f64,
    /// The row that moved most: machine, case and quantity.
    pub machine: String,
    /// Case of that row.
    pub case: String,
    /// Quantity of that row.
    pub quantity: String,
    /// Its role.
    pub role: Role,
    /// Predicted value with the constant at its default, in the row's unit.
    pub predicted: f64,
    /// The relative change of the prediction, percent (fits in the table are redone).
    pub delta_pct: f64,
}

/// For each assumed constant `thread` depends on that a model reads through
/// [`crate::assumptions::value`]: the table is recomputed (fits included) with the constant
/// moved up by its spread, and the row whose prediction moves most (relative) is reported.
/// Constants not yet readable that way are left out (the note of [`sensitivity_notes`] says which).
pub fn sensitivities(base: &TableValidation) -> Result<Vec<Sensitivity>> {
    let mut out = Vec::new();
    for a in crate::assumptions::for_thread(&base.thread) {
        if !crate::assumptions::is_movable(a.name) {
            continue;
        }
        let moved = crate::assumptions::with_moved(a.name, a.value * (1.0 + a.rel_spread), || {
            validate_thread(&base.thread, false)
        })?;
        let Some(moved) = moved else { continue };
        let mut best: Option<Sensitivity> = None;
        // Rows come in the same order; a (machine, case, quantity) can appear under two roles
        // (fitted and loo), so rows are paired by position and checked.
        for (r, m) in base.rows.iter().zip(&moved.rows) {
            if m.machine != r.machine
                || m.case != r.case
                || m.quantity != r.quantity
                || m.role != r.role
            {
                continue;
            }
            if r.predicted == 0.0 || !r.predicted.is_finite() || !m.predicted.is_finite() {
                continue;
            }
            let d = 100.0 * (m.predicted / r.predicted - 1.0);
            if best.as_ref().is_none_or(|b| d.abs() > b.delta_pct.abs()) {
                best = Some(Sensitivity {
                    constant: a.name.to_string(),
                    moved_by_pct: 100.0 * a.rel_spread,
                    machine: r.machine.clone(),
                    case: r.case.clone(),
                    quantity: r.quantity.clone(),
                    role: r.role,
                    predicted: r.predicted,
                    delta_pct: d,
                });
            }
        }
        if let Some(b) = best {
            out.push(b);
        }
    }
    out.extend(machine_sensitivities(base)?);
    Ok(out)
}

/// Sensitivities to assumed values that live in a machine file, computed by the thread's own
/// model with the value moved: 001's SMT (threads_per_core 2 -> 1, its spread, with
/// transfer_scale refitted at batch 32) on the held-out gain, and 002's assumed cross-socket
/// core-to-core latency (+20 %, the spread [`crate::workload::sweep::latency_rel_sd`] gives an
/// `assumed` latency, with the three parameters refitted) on the 88-thread, numa_stat=1 row.
fn machine_sensitivities(base: &TableValidation) -> Result<Vec<Sensitivity>> {
    let find = |case: &str, quantity: &str| {
        base.rows
            .iter()
            .find(|r| r.case == case && r.quantity == quantity)
    };
    let mut out = Vec::new();
    match base.thread.as_str() {
        "001" => {
            if let Some(r) = find("batch 32->64", "improvement_pct") {
                let (_, gain) = t001::unshared_sensitivity()?;
                out.push(Sensitivity {
                    constant: "memcg-72cpu threads_per_core".to_string(),
                    moved_by_pct: -50.0,
                    machine: r.machine.clone(),
                    case: r.case.clone(),
                    quantity: r.quantity.clone(),
                    role: r.role,
                    predicted: r.predicted,
                    delta_pct: 100.0 * (gain / r.predicted - 1.0),
                });
            }
        }
        "002" => {
            if let Some(r) = find("threads=88 numa_stat=1", "cycles_per_page") {
                let mut m = crate::hw::machine::Machine::builtin("broadwell-2s")?;
                let spread = 0.20;
                if let Some(x) = m.latency_ns.c2c_cross_socket.as_mut() {
                    x.value *= 1.0 + spread;
                }
                let model =
                    crate::model::vmstat::NumaStatModel::new(&m, crate::model::vmstat::KERNEL_002)?;
                let rep = t002::fit_002(&model)?;
                let p: Vec<f64> = rep.params.iter().map(|x| x.value).collect();
                let moved = model.estimate(&p, 88, true)?.cycles_per_page;
                out.push(Sensitivity {
                    constant: "broadwell-2s latency_ns.c2c_cross_socket".to_string(),
                    moved_by_pct: 100.0 * spread,
                    machine: r.machine.clone(),
                    case: r.case.clone(),
                    quantity: r.quantity.clone(),
                    role: r.role,
                    predicted: r.predicted,
                    delta_pct: 100.0 * (moved / r.predicted - 1.0),
                });
            }
        }
        _ => {}
    }
    Ok(out)
}

/// Notes for people: one line per sensitivity, and the constants of the thread whose
/// sensitivity is not computed.
pub fn sensitivity_notes(thread: &str, s: &[Sensitivity]) -> Vec<String> {
    let mut notes: Vec<String> = s
        .iter()
        .map(|x| {
            format!(
                "sensitivity: {} {:+.0} % moves {} / {} / {} ({}) by {:+.2} %",
                x.constant,
                x.moved_by_pct,
                x.machine,
                x.case,
                x.quantity,
                x.role.as_str(),
                x.delta_pct
            )
        })
        .collect();
    let fixed: Vec<&str> = crate::assumptions::for_thread(thread)
        .iter()
        .filter(|a| !crate::assumptions::is_movable(a.name))
        .filter(|a| !s.iter().any(|x| x.constant == a.name))
        .map(|a| a.name)
        .collect();
    if !fixed.is_empty() {
        notes.push(format!(
            "sensitivity not computed for {} (the value is set in a machine file or a structure the models do not read through the registry yet)",
            fixed.join(", ")
        ));
    }
    if crate::assumptions::for_thread(thread).is_empty() && s.is_empty() {
        notes.push("no assumed constants: nothing to move".to_string());
    }
    notes
}

/// One built-in table, not yet computed: its name (the `thread` of its rows) and how to
/// compute it.
pub struct TableJob {
    /// The table's name: a seed thread ("000".."004") or a literature table.
    pub name: String,
    run: Box<dyn Fn() -> Result<TableValidation>>,
}

impl TableJob {
    /// Computes the table.
    pub fn run(&self) -> Result<TableValidation> {
        (self.run)()
    }
}

/// Every built-in table in report order, not yet computed: the seed threads' (comparison
/// fits as in [`validate_thread`]), then the literature tables ([`literature::tables`]). For
/// callers that report progress per table or time each; [`validate_all`] runs them in turn.
pub fn table_jobs(comparison_fits: bool) -> Result<Vec<TableJob>> {
    let mut v: Vec<TableJob> = threads()?
        .into_iter()
        .map(|t| {
            let name = t.clone();
            TableJob {
                name,
                run: Box::new(move || {
                    validate_thread(&t, comparison_fits)?.ok_or_else(|| {
                        crate::error::Error::Unsupported(format!("no table for thread {t}"))
                    })
                }),
            }
        })
        .collect();
    v.extend(literature::tables().into_iter().map(|(name, f)| TableJob {
        name: name.to_string(),
        run: Box::new(f),
    }));
    Ok(v)
}

/// Validates every built-in table (comparison fits as in [`validate_thread`]).
/// The literature tables ([`literature`], role `literature`) follow the threads'.
pub fn validate_all(comparison_fits: bool) -> Result<Vec<TableValidation>> {
    table_jobs(comparison_fits)?
        .iter()
        .map(TableJob::run)
        .collect()
}

#[cfg(test)]
mod tests {
    /// THREAD_KINDS is what the built-in workload files say: every file with a `thread` has
    /// that thread's kind, and every thread has a file.
    #[test]
    fn thread_kinds_match_the_builtin_workloads() {
        let all = crate::workload::Registry::builtin().all_builtin().unwrap();
        let mut seen: Vec<(String, String)> = all
            .iter()
            .filter_map(|w| Some((w.spec.thread.clone()?, w.spec.kind.clone())))
            .collect();
        seen.sort();
        seen.dedup();
        let want: Vec<(String, String)> = super::THREAD_KINDS
            .iter()
            .map(|(t, k)| (t.to_string(), k.to_string()))
            .collect();
        assert_eq!(seen, want);
    }
}
