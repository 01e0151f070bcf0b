//! Per-pool endpoint health state machine (pure: state in, time in, decision out).
