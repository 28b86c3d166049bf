//! The integration tests, one test binary: each file below was its own binary, and linking 50
//! binaries against the library took most of a fresh `cargo test` on two cores. The files are
//! modules of this crate; run one with `cargo test --test it MODULE::` (e.g.
//! `cargo test --test it zoneinfo_live::`).

mod alloc_loop;
mod allocpath_cli;
mod cli_contracts;
mod cli_kernel_builtin;
mod cli_negative;
mod cli_spellings;
mod common;
mod compare_workloads;
mod csv_inputs;
mod data_consistency;
mod description_checks;
mod detect;
mod detect_errors;
mod explain_pairs;
mod fit;
mod fit_errors;
mod flag_bounds;
mod host_trace;
mod import;
mod import_errors;
mod json_keys_stable;
mod kernel_changes;
mod kernel_cli;
mod kernel_features;
mod kernel_formulas;
mod kernel_layout;
mod kernel_ops;
mod kernel_timeline;
mod kernel_zoneinfo;
mod literature;
mod lock;
mod machine_bounds;
mod machines;
mod measure;
mod memcg_001;
mod memcg_shared;
mod memcg_smt;
mod netperf_004;
mod optimal_high_contract;
mod optimal_high_workloads;
mod order4_pcp_003;
mod perflock;
mod process_life;
mod readme_examples;
mod refill_check_placement;
mod repro_t3;
mod reuse_vs_kernel_state;
mod sensitivities;
mod workload_extension;
mod workload_file_checks;
mod workload_kinds;
mod zoneinfo_live;
mod zonelock;
