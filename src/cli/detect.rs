//! `pcpmodel detect`.

use std::path::PathBuf;
use std::process::ExitCode;

use pcpmodel::hw::detect::{detect, Detected};
use pcpmodel::model::cache::check_modelled;
use pcpmodel::output::report::{Format, Report, Table};
use pcpmodel::{Error, Machine};
use serde_json::{json, Map, Value};

/// Arguments of `pcpmodel detect`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Root of the tree to read (`sys/devices/system/...`, `proc/...` below it); `/` is the
    /// running host.
    #[arg(long, default_value = "/")]
    pub root: PathBuf,

    /// Print only the filled machine as a machine file (TOML), usable wherever a machine name
    /// is accepted (`pcpmodel detect --toml > host.toml`).
    #[arg(long)]
    pub toml: bool,
}

fn cell(v: &Value) -> String {
    match v {
        Value::Null => "-".into(),
        Value::String(s) => s.clone(),
        Value::Array(a) => a.iter().map(cell).collect::<Vec<_>>().join(", "),
        other => other.to_string(),
    }
}

/// The detected machine ([`Detected::to_machine`]) when the cost models can use it: the machine
/// as it loads again from its TOML must build a cache hierarchy ([`check_modelled`]), else an
/// error saying the detected machine cannot be modelled. Every command that offers a detected
/// machine goes through here.
pub fn modelled_machine(d: &Detected) -> pcpmodel::Result<(Machine, Vec<String>)> {
    let (m, assumed) = d.to_machine()?;
    let again = Machine::from_toml_str(&m.to_toml_string()?, &format!("detected from {}", d.root))?;
    check_modelled(&again).map_err(|e| {
        Error::Unsupported(format!(
            "{}: the detected machine cannot be modelled: {e}",
            d.root
        ))
    })?;
    Ok((m, assumed))
}

/// Runs `pcpmodel detect`.
pub fn run(args: Args, format: Format) -> anyhow::Result<ExitCode> {
    let d = detect(&args.root)?;
    for w in d.warnings() {
        eprintln!("warning: {w}");
    }
    if args.toml {
        let (m, assumed) = modelled_machine(&d)?;
        let mut text = format!(
            "# Detected by `pcpmodel detect --toml` from {}.\n# Filled by assumption (replace \
             with measurements): {}\n",
            d.root,
            assumed.join(", ")
        );
        text.push_str(&m.to_toml_string()?);
        print!("{text}");
        return Ok(ExitCode::SUCCESS);
    }
    let rows = d.rows();
    let mut t = Table::new(["field", "value", "unit", "status", "how"])
        .titled(format!("Detected from {}", d.root));
    let mut obj = Map::new();
    for r in &rows {
        t.push([
            r.name.clone(),
            cell(&r.value),
            r.unit.to_string(),
            r.status.as_str().to_string(),
            r.source.clone(),
        ]);
        obj.insert(
            r.name.clone(),
            json!({"value": r.value, "unit": r.unit, "status": r.status, "source": r.source}),
        );
    }
    let mut notes = vec![
        "detected = read from a file; derived = computed from what was read; missing = not in \
         sysfs or /proc (inclusivity and every latency are never there)."
            .to_string(),
    ];
    let code = match modelled_machine(&d) {
        Ok((m, assumed)) => {
            obj.insert("machine".into(), serde_json::to_value(&m)?);
            obj.insert("assumed".into(), json!(assumed));
            notes.push(format!(
                "A complete machine (`--format json` key `machine`, or `--toml`) fills {} \
                 missing field(s) with values labelled \"assumed: missing from sysfs, typical \
                 value for <vendor>\": {}.",
                assumed.len(),
                assumed.join(", ")
            ));
            notes.push(
                "Save it with `pcpmodel detect --toml > host.toml` and replace the assumed \
                 latencies with measured ones."
                    .into(),
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            obj.insert("machine".into(), Value::Null);
            obj.insert("machine_error".into(), json!(e.to_string()));
            notes.push(format!("No usable machine could be built: {e}"));
            if !d.missing_essentials().is_empty() {
                // An empty or partial root is bad input: say what is missing, exit 2.
                let report = Report {
                    json: Value::Object(obj),
                    tables: vec![t],
                    notes,
                };
                super::print_report(&report, format);
                return Err(e.into());
            }
            ExitCode::from(1)
        }
    };
    notes.extend(d.warnings().into_iter().map(|w| format!("warning: {w}")));
    let mut tables = vec![t];
    // The kernel's PCP features under the same root (zoneinfo fields, vm sysctls, the config,
    // the version as a fallback): which behaviours the running kernel has, whatever its version.
    match pcpmodel::kernel::features::detect_features(std::path::Path::new(&d.root), None) {
        Ok(fs) => {
            let mut f = Table::new(["feature", "present", "evidence", "source"])
                .titled("PCP features of the running kernel (see `pcpmodel kernel --host`)");
            for x in &fs.features {
                f.push([
                    x.feature.name().to_string(),
                    if x.present { "yes" } else { "no" }.to_string(),
                    x.evidence.name().to_string(),
                    x.source.clone(),
                ]);
            }
            obj.insert("kernel_features".into(), serde_json::to_value(&fs)?);
            tables.push(f);
        }
        Err(e) => {
            obj.insert("kernel_features".into(), Value::Null);
            notes.push(format!("kernel features not detected: {e}"));
        }
    }
    let report = Report {
        json: Value::Object(obj),
        tables,
        notes,
    };
    super::print_report(&report, format);
    Ok(code)
}
