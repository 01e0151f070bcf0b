//! Timestamps, durations and `string()` as cel-go has them: timestamps are read in UTC
//! (Kubernetes sets `DefaultUTCTimeZone`), `string(duration)` is seconds (`90s`),
//! `string(timestamp)` is RFC 3339 in UTC, `string(double)` uses Go's `%g` form.

use std::sync::Arc;

use cel::{Context, Value as CelValue};
use chrono::{DateTime, Datelike, FixedOffset, Timelike, Utc};

use super::super::goformat::float_v;
use super::library::{Call, NO_SUCH_OVERLOAD, register};

pub fn register_all(context: &mut Context) {
    register(context, "string", to_string);
    register(context, "getFullYear", |c| {
        timestamp_part(c, |t| t.year().into())
    });
    register(context, "getMonth", |c| {
        timestamp_part(c, |t| i64::from(t.month0()))
    });
    register(context, "getDayOfYear", |c| {
        timestamp_part(c, |t| i64::from(t.ordinal0()))
    });
    register(context, "getDayOfMonth", |c| {
        timestamp_part(c, |t| i64::from(t.day0()))
    });
    register(context, "getDate", |c| {
        timestamp_part(c, |t| i64::from(t.day()))
    });
    register(context, "getDayOfWeek", |c| {
        timestamp_part(c, |t| i64::from(t.weekday().num_days_from_sunday()))
    });
    register(context, "getHours", |c| {
        time_part(c, |t| i64::from(t.hour()), |d| d.num_hours())
    });
    register(context, "getMinutes", |c| {
        time_part(c, |t| i64::from(t.minute()), |d| d.num_minutes())
    });
    register(context, "getSeconds", |c| {
        time_part(c, |t| i64::from(t.second()), |d| d.num_seconds())
    });
    register(context, "getMilliseconds", |c| {
        time_part(
            c,
            |t| i64::from(t.timestamp_subsec_millis()),
            |d| d.num_milliseconds(),
        )
    });
}

/// A timestamp in UTC, as cel-go keeps them.
pub fn in_utc(time: DateTime<FixedOffset>) -> DateTime<FixedOffset> {
    time.with_timezone(&Utc).fixed_offset()
}

/// The time zone argument of a getter: `UTC` or a fixed `±HH:MM` offset.
fn zone(call: &Call) -> Result<FixedOffset, String> {
    let utc = FixedOffset::east_opt(0).ok_or(NO_SUCH_OVERLOAD)?;
    let name = match call.args.first() {
        None => return Ok(utc),
        Some(CelValue::String(name)) => name.as_str(),
        Some(_) => return Err(NO_SUCH_OVERLOAD.into()),
    };
    if name == "UTC" {
        return Ok(utc);
    }
    let offset = (|| {
        let (sign, rest) = match name.as_bytes().first()? {
            b'+' => (1, &name[1..]),
            b'-' => (-1, &name[1..]),
            _ => return None,
        };
        let (hours, minutes) = rest.split_once(':')?;
        let seconds = hours.parse::<i32>().ok()? * 3600 + minutes.parse::<i32>().ok()? * 60;
        FixedOffset::east_opt(sign * seconds)
    })();
    offset.ok_or_else(|| format!("time zone {name:?} is not supported by this API server (devcluster admission): use UTC or a ±HH:MM offset"))
}

fn timestamp_part(
    call: &Call,
    part: fn(&DateTime<FixedOffset>) -> i64,
) -> Result<CelValue, String> {
    match call.target {
        Some(CelValue::Timestamp(t)) => Ok(CelValue::Int(part(&t.with_timezone(&zone(call)?)))),
        _ => Err(NO_SUCH_OVERLOAD.into()),
    }
}

fn time_part(
    call: &Call,
    of_timestamp: fn(&DateTime<FixedOffset>) -> i64,
    of_duration: fn(&chrono::Duration) -> i64,
) -> Result<CelValue, String> {
    match call.target {
        Some(CelValue::Timestamp(t)) => {
            Ok(CelValue::Int(of_timestamp(&t.with_timezone(&zone(call)?))))
        }
        Some(CelValue::Duration(d)) if call.args.is_empty() => Ok(CelValue::Int(of_duration(d))),
        _ => Err(NO_SUCH_OVERLOAD.into()),
    }
}

/// Go's `time.RFC3339Nano` of a UTC time: `2024-01-02T03:04:05.5Z`.
pub fn format_timestamp(time: &DateTime<FixedOffset>) -> String {
    let utc = time.with_timezone(&Utc);
    let mut text = utc.format("%Y-%m-%dT%H:%M:%S").to_string();
    let nanos = utc.timestamp_subsec_nanos();
    if nanos > 0 {
        let fraction = format!("{nanos:09}");
        text.push('.');
        text.push_str(fraction.trim_end_matches('0'));
    }
    text.push('Z');
    text
}

fn to_string(call: &Call) -> Result<CelValue, String> {
    let text = match call.split()?.0 {
        CelValue::String(s) => return Ok(CelValue::String(Arc::clone(s))),
        CelValue::Int(i) => i.to_string(),
        CelValue::UInt(u) => u.to_string(),
        CelValue::Float(f) => float_v(*f),
        CelValue::Bool(b) => b.to_string(),
        CelValue::Bytes(b) => String::from_utf8(b.to_vec())
            .map_err(|_| "invalid UTF-8 in bytes, cannot convert to string".to_string())?,
        CelValue::Duration(d) => {
            let nanos = d.num_nanoseconds().unwrap_or(i64::MAX);
            format!("{}s", nanos as f64 / 1e9)
        }
        CelValue::Timestamp(t) => format_timestamp(t),
        _ => return Err(NO_SUCH_OVERLOAD.into()),
    };
    Ok(CelValue::String(Arc::new(text)))
}
