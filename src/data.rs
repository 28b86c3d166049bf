//! Measured tables from the five seed threads, compiled in (see data/README.md).
