//! Argument types, parsers and helpers shared by several subcommands (the only CLI module
//! subcommand files import from, besides `mod.rs`).

use clap::ValueEnum;
use pcpmodel::kernel::version::KernelVersion;
use pcpmodel::kernel::ThpMode;
use pcpmodel::model::cache::Placement;
use pcpmodel::workload::registry::{Registry, Workload};
use pcpmodel::workload::spec::PlacementSpec;

/// Placement of producer and consumer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum PlacementArg {
    /// SMT siblings of one core (shared L2).
    Smt,
    /// Two cores in one LLC domain.
    SameLlc,
    /// Two LLC domains of one socket (AMD CCDs).
    CrossLlc,
    /// Two sockets.
    CrossSocket,
}

impl From<PlacementArg> for PlacementSpec {
    fn from(p: PlacementArg) -> PlacementSpec {
        match p {
            PlacementArg::Smt => PlacementSpec::Smt,
            PlacementArg::SameLlc => PlacementSpec::SameLlc,
            PlacementArg::CrossLlc => PlacementSpec::CrossLlc,
            PlacementArg::CrossSocket => PlacementSpec::CrossSocket,
        }
    }
}

impl From<PlacementArg> for Placement {
    fn from(p: PlacementArg) -> Placement {
        PlacementSpec::from(p).into()
    }
}

/// Parses `--kernel`, defaulting to `default`.
pub fn kernel_arg(k: &Option<String>, default: KernelVersion) -> anyhow::Result<KernelVersion> {
    Ok(match k {
        Some(s) => kernel_flag(s, "--kernel")?,
        None => default,
    })
}

/// Parses a kernel version given on the command line (`flag` names it in errors): strictly,
/// `MAJOR.MINOR` or `MAJOR.MINOR.PATCH`. Every `--kernel` goes through here (or through
/// [`kernel_release_flag`]) so that a version newer than the newest modelled one is announced
/// once, in one place.
pub fn kernel_flag(text: &str, flag: &str) -> anyhow::Result<KernelVersion> {
    let v = KernelVersion::parse_labeled(text, flag)?;
    warn_if_newer_than_modelled(v, flag);
    Ok(v)
}

/// As [`kernel_flag`], for a flag that names the release of the kernel that wrote a file
/// (`zoneinfo --kernel`): a `uname -r` string such as `6.18.44-generic` is accepted too.
pub fn kernel_release_flag(text: &str, flag: &str) -> anyhow::Result<KernelVersion> {
    let v = KernelVersion::parse_release_labeled(text, flag)?;
    warn_if_newer_than_modelled(v, flag);
    Ok(v)
}

/// The warning for a version past [`KernelVersion::NEWEST_MODELLED`]: the model does not know
/// that kernel's PCP code and uses the newest rules it has.
fn warn_if_newer_than_modelled(v: KernelVersion, flag: &str) {
    if v.is_newer_than_modelled() {
        let newest = KernelVersion::NEWEST_MODELLED;
        eprintln!(
            "warning: {flag} {v} is newer than {newest}, the newest kernel whose PCP code is modelled: {newest}'s rules are assumed (era {}); a later change to the page allocator is not in the model",
            newest.era()
        );
    }
}

/// THP mode on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ThpArg {
    /// `always`: khugepaged raises min_free_kbytes.
    Always,
    /// `madvise`: khugepaged raises min_free_kbytes.
    Madvise,
    /// `never`: no raise.
    Never,
}

impl From<ThpArg> for ThpMode {
    fn from(t: ThpArg) -> ThpMode {
        match t {
            ThpArg::Always => ThpMode::Always,
            ThpArg::Madvise => ThpMode::Madvise,
            ThpArg::Never => ThpMode::Never,
        }
    }
}

/// Resolves `--workload NAME|FILE` through the registry; an unknown name lists the built-in
/// names with their aliases.
pub fn resolve_workload(name: &str) -> anyhow::Result<Workload> {
    let reg = Registry::builtin();
    match reg.resolve(name) {
        Err(pcpmodel::Error::Unknown {
            kind: "workload", ..
        }) => {
            let names: Vec<String> = reg
                .all_builtin()?
                .iter()
                .map(|w| {
                    if w.spec.aliases.is_empty() {
                        w.spec.name.clone()
                    } else {
                        format!("{} (alias {})", w.spec.name, w.spec.aliases.join(", "))
                    }
                })
                .collect();
            anyhow::bail!(
                "unknown workload '{name}': built-in workloads are {} (or give a path to a workload TOML file; see `pcpmodel workloads`)",
                names.join(", ")
            )
        }
        other => Ok(other?),
    }
}

/// One line per built-in workload (name, aliases, kind, description), for `--help` texts.
pub fn workloads_help() -> String {
    match Registry::builtin().all_builtin() {
        Ok(all) => all
            .iter()
            .map(|w| {
                let aliases = if w.spec.aliases.is_empty() {
                    String::new()
                } else {
                    format!(" (alias {})", w.spec.aliases.join(", "))
                };
                format!(
                    "  {}{aliases} [{}]: {}",
                    w.spec.name,
                    w.kind.name(),
                    w.spec.description
                )
            })
            .collect::<Vec<_>>()
            .join("\n"),
        Err(e) => format!("  (the built-in workloads do not load: {e})"),
    }
}

/// The kernel's PCP knobs as flags, for commands that sweep or predict a workload through its
/// kind (each kind reads the knobs it lists in `pcpmodel workloads`; one it does not read is an
/// error).
#[derive(Debug, Clone, Default, clap::Args)]
pub struct PcpKnobArgs {
    /// pcp->batch, pages (default: the kernel's).
    #[arg(long, value_parser = bounded::<u32>(&pcpmodel::bounds::PCP_BATCH_PAGES))]
    pub batch: Option<u32>,
    /// The free_high trigger threshold, pages of free_count (default: the kernel's rule).
    #[arg(long, value_parser = bounded::<u32>(&pcpmodel::bounds::FREE_HIGH_THRESHOLD))]
    pub free_high_threshold: Option<u32>,
    /// Allocation order (default: the workload file's op.order).
    #[arg(long, value_parser = bounded::<u8>(&pcpmodel::bounds::ORDER))]
    pub order: Option<u8>,
    /// Tasks, or sender/receiver pairs (default: the workload file's tasks.count). Older
    /// spellings: --threads, --procs, --instances.
    #[arg(long, aliases = ["threads", "procs", "instances"], value_parser = bounded::<u32>(&pcpmodel::bounds::TASKS))]
    pub tasks: Option<u32>,
    /// NUMA nodes the tasks run on: 1, all (spread evenly) or cores (one per core, node 0's
    /// cores first: will-it-scale's placement).
    #[arg(long)]
    pub nodes: Option<String>,
    /// CONFIG_PCP_BATCH_SCALE_MAX, 0..=6 (kernels that have it: 6.7 on).
    #[arg(long, value_parser = bounded::<u32>(&pcpmodel::bounds::PCP_BATCH_SCALE_MAX))]
    pub scale_max: Option<u32>,
    /// net.core.skb_defer_max (socket workloads; default the kernel's 64): with a value above 0,
    /// TCP from 5.19 and UDP from 6.18 hand a read skb back to the CPU that allocated it, so the
    /// sender frees its own pages; 0 makes the receiver free them.
    #[arg(long, value_parser = bounded::<u32>(&pcpmodel::bounds::SKB_DEFER_MAX))]
    pub skb_defer_max: Option<u32>,
    /// Price a run of this many seconds instead of the steady state: the lists first grow from
    /// --run-start-pages to their steady size, and on a VM whose machine file has
    /// memory.backing_ns_per_page (`measure backing`) each page they grow by costs that much
    /// more. Kinds that model their lists' pages (producer-consumer).
    #[arg(long, value_parser = bounded::<f64>(&pcpmodel::bounds::RUN_SECONDS))]
    pub run_seconds: Option<f64>,
    /// Pages on the pair's lists when the run starts (default: what the kernel's default
    /// setting holds, where `measure pcp` leaves them). Needs --run-seconds.
    #[arg(long, value_parser = bounded::<f64>(&pcpmodel::bounds::RUN_START_PAGES))]
    pub run_start_pages: Option<f64>,
    /// A workload parameter (the file's [params] table) set for this run, e.g.
    /// --param receiver_free_share=0.45 (repeatable; `pcpmodel workloads` lists each kind's).
    #[arg(long = "param", value_name = "NAME=VALUE")]
    pub params: Vec<String>,
}

impl PcpKnobArgs {
    /// Sets `k`'s knobs from the flags given, checking their ranges.
    pub fn apply(&self, k: &mut pcpmodel::workload::Knobs) -> anyhow::Result<()> {
        if let Some(s) = self.scale_max {
            pcpmodel::bounds::PCP_BATCH_SCALE_MAX
                .check_flag("--scale-max", f64::from(s))
                .map_err(anyhow::Error::msg)?;
            k.scale_max = Some(u8::try_from(s)?);
        }
        if let Some(n) = &self.nodes {
            pcpmodel::workload::NodeSpan::parse(n, "--nodes")?;
            k.nodes = Some(n.clone());
        }
        if let Some(d) = self.skb_defer_max {
            pcpmodel::bounds::SKB_DEFER_MAX
                .check_flag("--skb-defer-max", f64::from(d))
                .map_err(anyhow::Error::msg)?;
            *k = std::mem::take(k).with_extra("skb_defer_max", f64::from(d));
        }
        if let Some(x) = self.run_seconds {
            *k = std::mem::take(k).with_extra(pcpmodel::workload::RUN_SECONDS, x);
        }
        if let Some(x) = self.run_start_pages {
            *k = std::mem::take(k).with_extra(pcpmodel::workload::RUN_START_PAGES, x);
        }
        for p in &self.params {
            let (name, value) = p.split_once('=').ok_or_else(|| {
                anyhow::anyhow!("--param {p}: give NAME=VALUE, e.g. receiver_free_share=0.45")
            })?;
            let v: f64 = value
                .trim()
                .parse()
                .map_err(|_| anyhow::anyhow!("--param {p}: '{value}' is not a number"))?;
            if !v.is_finite() {
                anyhow::bail!("--param {p}: the value must be finite");
            }
            *k = std::mem::take(k).with_extra(name.trim(), v);
        }
        k.batch = self.batch.or(k.batch);
        k.free_high_threshold = self.free_high_threshold.or(k.free_high_threshold);
        k.order = self.order.or(k.order);
        k.tasks = self.tasks.or(k.tasks);
        Ok(())
    }
}

// ----- numeric flags -------------------------------------------------------------------------

/// A number type a flag can hold, converted from the checked `f64`.
pub trait FlagNumber: Copy + Send + Sync + 'static {
    /// `v`, already checked to be in the flag's range (whole when the range is).
    fn from_checked(v: f64) -> Option<Self>;
}

macro_rules! flag_number_int {
    ($($t:ty),*) => {$(
        impl FlagNumber for $t {
            fn from_checked(v: f64) -> Option<Self> {
                // In range and whole: exact in f64 for every range here (all below 2^53).
                <$t>::try_from(v as i128).ok()
            }
        }
    )*};
}
flag_number_int!(u8, u16, u32, u64, usize);

impl FlagNumber for f64 {
    fn from_checked(v: f64) -> Option<Self> {
        Some(v)
    }
}

/// The value parser of a numeric flag: the text is read as a number (a negative one too, so
/// `--high -1` reaches it instead of being taken for a flag) and checked against `range`; a
/// value outside it is an error naming the flag, the value and the accepted range, exit 2.
/// Checks that need the machine (a `--high` above what the kernel can set, `--tasks` above the
/// CPUs) come after parsing, in the command.
#[derive(Clone, Copy)]
pub struct Bounded<T> {
    range: &'static pcpmodel::bounds::Range,
    _t: std::marker::PhantomData<fn() -> T>,
}

/// A [`Bounded`] parser for `range`.
pub fn bounded<T: FlagNumber>(range: &'static pcpmodel::bounds::Range) -> Bounded<T> {
    Bounded {
        range,
        _t: std::marker::PhantomData,
    }
}

impl<T: FlagNumber> Bounded<T> {
    /// The checked value of `text`, or the message saying what is wrong (`flag` names it).
    pub fn check(&self, flag: &str, text: &str) -> Result<T, String> {
        let r = self.range;
        let t = text.trim();
        let v: f64 = t.parse().map_err(|_| {
            format!(
                "{flag} {t}: not a number ({} takes {}{}: {})",
                r.what,
                if r.integer { "a whole number " } else { "" },
                r.span(),
                r.why
            )
        })?;
        if let Some(m) = r.problem(v) {
            return Err(format!("{flag} {t}: {m}"));
        }
        T::from_checked(v).ok_or_else(|| format!("{flag} {t}: outside {}", r.span()))
    }
}

impl<T: FlagNumber> clap::builder::TypedValueParser for Bounded<T> {
    type Value = T;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<T, clap::Error> {
        let flag = arg
            .and_then(|a| a.get_long().map(|l| format!("--{l}")))
            .unwrap_or_else(|| "a numeric argument".to_string());
        self.check(&flag, &value.to_string_lossy()).map_err(|m| {
            clap::Error::raw(clap::error::ErrorKind::ValueValidation, m).format(&mut cmd.clone())
        })
    }
}

/// CLI-only ranges: flags of the host measurements and of `import`, whose limits are the
/// commands' own (run time, the size of a paste) rather than the kernel's or the hardware's.
pub mod ranges {
    use pcpmodel::bounds::Range;

    /// `measure latency --repeats`.
    pub const LATENCY_REPEATS: Range = Range::int(
        "rounds",
        1.0,
        1000.0,
        "",
        "a round takes tens of milliseconds; the medians settle within a hundred",
    );
    /// `measure pcp --repeats` and `measure reuse --repeats`.
    pub const SWEEP_REPEATS: Range = Range::int(
        "repeats",
        1.0,
        100.0,
        "",
        "each repeat runs every setting for --seconds; more than 100 would run for days",
    );
    /// `measure pcp --seconds` and `measure reuse --seconds`: one point's run.
    pub const POINT_SECONDS: Range = Range::real(
        "a point's run",
        0.001,
        600.0,
        "s",
        "below a millisecond the run measures the clock; above ten minutes a sweep runs for days",
    );
    /// `record --seconds`.
    pub const RECORD_SECONDS: Range = Range::real(
        "a recording",
        0.001,
        86_400.0,
        "s",
        "a flow file grows by megabytes per second of a busy stream; a day is the most worth keeping",
    );
    /// `record --buffer-kb`: the per-CPU trace buffer.
    pub const TRACE_BUFFER_KB: Range = Range::int(
        "a trace buffer",
        64.0,
        4_194_304.0,
        "KiB",
        "tracefs needs a few pages per CPU; 4 GiB per CPU exhausts most machines' memory",
    );
    /// `measure backing --mib`.
    pub const BACKING_MIB: Range = Range::int(
        "a region",
        1.0,
        1_048_576.0,
        "MiB",
        "the region is populated several times in a row; a TiB is more than any host here",
    );
    /// A CPU number (`--cpus`).
    pub const CPU_ID: Range = Range::int(
        "a CPU number",
        0.0,
        8191.0,
        "",
        "CONFIG_NR_CPUS is at most 8192 on x86-64 (MAXSMP), numbered from 0",
    );
    /// `measure pcp --tasks`: page-fault processes.
    pub const MEASURE_TASKS: Range = Range::int(
        "the number of tasks",
        1.0,
        4_194_304.0,
        "",
        "page-fault tasks are processes; PID_MAX_LIMIT is 2^22",
    );
    /// `measure reuse --offset`, bytes.
    pub const COPY_OFFSET: Range = Range::int(
        "a copy's offset into a block",
        0.0,
        63.0,
        "bytes",
        "an offset within one 64-byte cache line: any other alignment is one of these",
    );
    /// `measure reuse --distances`, pages.
    pub const REUSE_DISTANCE: Range = Range::int(
        "a reuse distance",
        1.0,
        16_777_216.0,
        "pages",
        "a distance is at least one page; the ring is allocated, and 2^24 pages is 64 GiB",
    );
    /// `import --index`.
    pub const HISTOGRAM_INDEX: Range = Range::int(
        "a histogram's number",
        1.0,
        1_000_000.0,
        "",
        "histograms are numbered from 1 in the order the text holds them",
    );
}
