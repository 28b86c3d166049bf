//! Host detection from sysfs and /proc.
