//! The kernel's own PCP and watermark formulas, by version range.
