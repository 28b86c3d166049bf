//! The hardware: machine descriptions (built-in and user TOML, every value with provenance),
//! detection of the running host, and the provenance type they share.

pub mod detect;
pub mod machine;
pub mod provenance;
