//! Test backends (being built).
