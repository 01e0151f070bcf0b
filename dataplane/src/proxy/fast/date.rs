//! The `Date` value a fast-engine answer carries when the endpoint sent none (RFC 9110 §6.6.1):
//! formatted once a second per thread, as hyper's server caches its own.

use std::cell::RefCell;
use std::io::Write;
use std::time::{SystemTime, UNIX_EPOCH};

/// An IMF-fixdate is always this long.
const DATE_LEN: usize = 29;

struct Cached {
    second: u64,
    value: [u8; DATE_LEN],
}

thread_local! {
    static CACHED: RefCell<Cached> = const {
        RefCell::new(Cached {
            second: u64::MAX,
            value: [b' '; DATE_LEN],
        })
    };
}

/// Append now's date to `out`.
pub(super) fn extend(out: &mut Vec<u8>) {
    out.extend_from_slice(&now());
}

/// Now's date.
pub(super) fn now() -> [u8; DATE_LEN] {
    let now = SystemTime::now();
    let second = now
        .duration_since(UNIX_EPOCH)
        .map_or(0, |since| since.as_secs());
    CACHED.with(|cached| {
        let mut cached = cached.borrow_mut();
        if cached.second != second {
            let mut value = [b' '; DATE_LEN];
            // Always 29 bytes; a failure would leave blanks, never a panic.
            let _ = write!(&mut value[..], "{}", httpdate::HttpDate::from(now));
            cached.value = value;
            cached.second = second;
        }
        cached.value
    })
}
