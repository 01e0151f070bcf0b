//! cel-go's `ext.Strings` (version 2, as Kubernetes 1.35 enables it), `ext.Sets`, the list
//! functions of `ext.Lists` and Kubernetes' `indexOf`/`lastIndexOf` on lists. Indices count
//! code points, as cel-go does.

use std::sync::Arc;

use cel::{Context, Value as CelValue};

use super::library::{Call, NO_SUCH_OVERLOAD, register};

pub fn register_all(context: &mut Context) {
    register(context, "charAt", char_at);
    register(context, "indexOf", |call| index_of(call, false));
    register(context, "lastIndexOf", |call| index_of(call, true));
    register(context, "lowerAscii", |call| {
        map_text(call, |s| s.to_ascii_lowercase())
    });
    register(context, "upperAscii", |call| {
        map_text(call, |s| s.to_ascii_uppercase())
    });
    register(context, "trim", |call| {
        map_text(call, |s| s.trim().to_string())
    });
    register(context, "replace", replace);
    register(context, "split", split);
    register(context, "substring", substring);
    register(context, "join", join);
    register(context, "strings.quote", |call| match call.split()?.0 {
        CelValue::String(s) => Ok(text(&super::super::goformat::quote(s))),
        _ => Err(NO_SUCH_OVERLOAD.into()),
    });
    register(context, "sets.contains", |call| {
        sets(call, |a, b| b.iter().all(|x| a.contains(x)))
    });
    register(context, "sets.intersects", |call| {
        sets(call, |a, b| b.iter().any(|x| a.contains(x)))
    });
    register(context, "sets.equivalent", |call| {
        sets(call, |a, b| {
            b.iter().all(|x| a.contains(x)) && a.iter().all(|x| b.contains(x))
        })
    });
    register(context, "distinct", distinct);
    register(context, "flatten", flatten);
    register(context, "reverse", |call| {
        list_map(call, |items| items.iter().rev().cloned().collect())
    });
    register(context, "sort", sort);
    register(context, "slice", slice);
    register(context, "lists.range", lists_range);
}

fn text(s: &str) -> CelValue {
    CelValue::String(Arc::new(s.to_string()))
}

fn int_arg(value: Option<&CelValue>) -> Result<i64, String> {
    match value {
        Some(CelValue::Int(i)) => Ok(*i),
        _ => Err(NO_SUCH_OVERLOAD.into()),
    }
}

fn string_arg(value: Option<&CelValue>) -> Result<&str, String> {
    match value {
        Some(CelValue::String(s)) => Ok(s.as_str()),
        _ => Err(NO_SUCH_OVERLOAD.into()),
    }
}

fn subject_text<'a>(call: &'a Call) -> Result<(&'a str, &'a [CelValue]), String> {
    let (subject, rest) = call.split()?;
    Ok((string_arg(Some(subject))?, rest))
}

fn map_text(call: &Call, transform: fn(&str) -> String) -> Result<CelValue, String> {
    Ok(text(&transform(subject_text(call)?.0)))
}

fn out_of_range(index: i64) -> String {
    format!("index out of range: {index}")
}

fn char_at(call: &Call) -> Result<CelValue, String> {
    let (s, rest) = subject_text(call)?;
    let index = int_arg(rest.first())?;
    let chars: Vec<char> = s.chars().collect();
    match usize::try_from(index) {
        Ok(i) if i < chars.len() => Ok(text(&chars[i].to_string())),
        Ok(i) if i == chars.len() => Ok(text("")),
        _ => Err(out_of_range(index)),
    }
}

/// `indexOf`/`lastIndexOf` of a substring (strings) or an element (lists).
fn index_of(call: &Call, last: bool) -> Result<CelValue, String> {
    let (subject, rest) = call.split()?;
    if let CelValue::List(items) = subject {
        let wanted = rest.first().ok_or(NO_SUCH_OVERLOAD)?;
        let found = if last {
            items.iter().rposition(|item| item == wanted)
        } else {
            items.iter().position(|item| item == wanted)
        };
        return Ok(CelValue::Int(found.map_or(-1, |i| i as i64)));
    }
    let haystack: Vec<char> = string_arg(Some(subject))?.chars().collect();
    let needle: Vec<char> = string_arg(rest.first())?.chars().collect();
    let length = haystack.len() as i64;
    let offset = match rest.get(1) {
        None if last => length,
        None => 0,
        some => int_arg(some)?,
    };
    if offset < 0 || offset > length {
        return Err(out_of_range(offset));
    }
    let offset = offset as usize;
    let fits = |start: usize| {
        start + needle.len() <= haystack.len()
            && haystack[start..start + needle.len()] == needle[..]
    };
    let found = if last {
        (0..=offset.min(haystack.len().saturating_sub(needle.len())))
            .rev()
            .find(|s| fits(*s))
    } else {
        (offset..=haystack.len()).find(|s| fits(*s))
    };
    Ok(CelValue::Int(found.map_or(-1, |i| i as i64)))
}

fn replace(call: &Call) -> Result<CelValue, String> {
    let (s, rest) = subject_text(call)?;
    let (from, to) = (string_arg(rest.first())?, string_arg(rest.get(1))?);
    let limit = match rest.get(2) {
        None => -1,
        some => int_arg(some)?,
    };
    Ok(text(&if limit < 0 {
        s.replace(from, to)
    } else {
        s.replacen(from, to, limit as usize)
    }))
}

/// Go `strings.SplitN` (an empty separator splits into code points).
fn split(call: &Call) -> Result<CelValue, String> {
    let (s, rest) = subject_text(call)?;
    let separator = string_arg(rest.first())?;
    let limit = match rest.get(1) {
        None => -1,
        some => int_arg(some)?,
    };
    if limit == 0 {
        return Ok(CelValue::List(Arc::new(Vec::new())));
    }
    let parts: Vec<String> = if separator.is_empty() {
        let chars: Vec<String> = s.chars().map(String::from).collect();
        if limit > 0 && chars.len() > limit as usize {
            let (head, tail) = chars.split_at(limit as usize - 1);
            head.iter()
                .cloned()
                .chain(std::iter::once(tail.concat()))
                .collect()
        } else {
            chars
        }
    } else if limit > 0 {
        s.splitn(limit as usize, separator)
            .map(String::from)
            .collect()
    } else {
        s.split(separator).map(String::from).collect()
    };
    Ok(CelValue::List(Arc::new(
        parts.iter().map(|p| text(p)).collect(),
    )))
}

fn substring(call: &Call) -> Result<CelValue, String> {
    let (s, rest) = subject_text(call)?;
    let chars: Vec<char> = s.chars().collect();
    let length = chars.len() as i64;
    let start = int_arg(rest.first())?;
    let end = match rest.get(1) {
        None => length,
        some => int_arg(some)?,
    };
    if start < 0 || start > length {
        return Err(out_of_range(start));
    }
    if end < 0 || end > length {
        return Err(out_of_range(end));
    }
    if start > end {
        return Err(format!(
            "invalid substring range. start: {start}, end: {end}"
        ));
    }
    Ok(text(
        &chars[start as usize..end as usize]
            .iter()
            .collect::<String>(),
    ))
}

fn join(call: &Call) -> Result<CelValue, String> {
    let (subject, rest) = call.split()?;
    let CelValue::List(items) = subject else {
        return Err(NO_SUCH_OVERLOAD.into());
    };
    let separator = match rest.first() {
        None => "",
        some => string_arg(some)?,
    };
    let parts: Result<Vec<&str>, String> = items.iter().map(|i| string_arg(Some(i))).collect();
    Ok(text(&parts?.join(separator)))
}

fn sets(call: &Call, test: fn(&[CelValue], &[CelValue]) -> bool) -> Result<CelValue, String> {
    match call.args {
        [CelValue::List(a), CelValue::List(b)] => Ok(CelValue::Bool(test(a, b))),
        _ => Err(NO_SUCH_OVERLOAD.into()),
    }
}

fn list_map(
    call: &Call,
    transform: impl Fn(&[CelValue]) -> Vec<CelValue>,
) -> Result<CelValue, String> {
    match call.split()?.0 {
        CelValue::List(items) => Ok(CelValue::List(Arc::new(transform(items)))),
        _ => Err(NO_SUCH_OVERLOAD.into()),
    }
}

fn distinct(call: &Call) -> Result<CelValue, String> {
    list_map(call, |items| {
        let mut unique: Vec<CelValue> = Vec::new();
        for item in items {
            if !unique.contains(item) {
                unique.push(item.clone());
            }
        }
        unique
    })
}

fn flatten(call: &Call) -> Result<CelValue, String> {
    let depth = match call.args.first() {
        None => 1,
        some => int_arg(some)?,
    };
    if depth < 0 {
        return Err("level must be non-negative".into());
    }
    fn flat(items: &[CelValue], depth: i64, out: &mut Vec<CelValue>) {
        for item in items {
            match item {
                CelValue::List(inner) if depth > 0 => flat(inner, depth - 1, out),
                other => out.push(other.clone()),
            }
        }
    }
    list_map(call, |items| {
        let mut out = Vec::new();
        flat(items, depth, &mut out);
        out
    })
}

fn sort(call: &Call) -> Result<CelValue, String> {
    let (subject, _) = call.split()?;
    let CelValue::List(items) = subject else {
        return Err(NO_SUCH_OVERLOAD.into());
    };
    let mut sorted = items.as_ref().clone();
    if sorted.windows(2).any(|w| w[0].partial_cmp(&w[1]).is_none()) {
        return Err(NO_SUCH_OVERLOAD.into());
    }
    sorted.sort_by(|a, b| a.partial_cmp(b).unwrap_or(std::cmp::Ordering::Equal));
    Ok(CelValue::List(Arc::new(sorted)))
}

fn slice(call: &Call) -> Result<CelValue, String> {
    let (subject, rest) = call.split()?;
    let CelValue::List(items) = subject else {
        return Err(NO_SUCH_OVERLOAD.into());
    };
    let (start, end) = (int_arg(rest.first())?, int_arg(rest.get(1))?);
    if start < 0 || end < 0 {
        return Err(format!(
            "cannot slice({start}, {end}), negative indexes not supported"
        ));
    }
    if start > end {
        return Err(format!(
            "cannot slice({start}, {end}), start index must be less than or equal to end index"
        ));
    }
    if end as usize > items.len() {
        return Err(format!(
            "cannot slice({start}, {end}), list is length {}",
            items.len()
        ));
    }
    Ok(CelValue::List(Arc::new(
        items[start as usize..end as usize].to_vec(),
    )))
}

fn lists_range(call: &Call) -> Result<CelValue, String> {
    let count = int_arg(call.args.first())?;
    if !(0..=1_000_000).contains(&count) {
        return Err(out_of_range(count));
    }
    Ok(CelValue::List(Arc::new(
        (0..count).map(CelValue::Int).collect(),
    )))
}
