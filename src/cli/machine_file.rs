//! The machine file a host measurement writes into (`measure work|backing|reuse --machine M
//! --output F`): the one given, or the detected host; checked whole before it is written.

use pcpmodel::hw::machine::Machine;

/// `--machine` resolved, or the detected host when a file is to be written without one.
/// Resolved first, so that a bad --machine is refused before the seconds of measuring.
pub fn to_write(machine: Option<&str>, writing: bool) -> anyhow::Result<Option<Machine>> {
    Ok(match machine {
        Some(m) => Some(Machine::resolve(m)?),
        None if writing => Some(detected()?),
        None => None,
    })
}

/// The running host as a machine.
pub fn detected() -> anyhow::Result<Machine> {
    let d = pcpmodel::hw::detect::detect(std::path::Path::new("/"))?;
    Ok(super::detect::modelled_machine(&d)?.0)
}

/// `m` as TOML under `comment` (one line, without its `# `), after checking it is a valid
/// machine (`what` names the measured value in the error); written to `path` where given.
pub fn write(
    m: &Machine,
    comment: &str,
    what: &str,
    path: Option<&std::path::Path>,
) -> anyhow::Result<String> {
    m.validate(&format!("machine {}", m.name))
        .map_err(|e| anyhow::anyhow!("{what} does not make a valid machine: {e}"))?;
    let text = format!("# {comment}\n{}", m.to_toml_string()?);
    if let Some(path) = path {
        std::fs::write(path, &text)
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
    }
    Ok(text)
}
