//! Parsing and running one rule with the cel crate, guarded so that a hostile rule yields an
//! error instead of a panic (the crate leaves some constructs unimplemented), and the
//! translation of its errors into cel-go's wording where the meaning is the same.

use std::collections::HashMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, LazyLock};

use parking_lot::Mutex;

use cel::common::ast::{CallExpr, EntryExpr, Expr, IdedExpr, LiteralValue};
use cel::common::types::CelString;
use cel::objects::OptionalValue;
use cel::parser::Parser;
use cel::{ExecutionError, Value as CelValue};

use super::library::{self, NO_SUCH_OVERLOAD};

/// cel-go's parser limit on nesting.
const MAX_NESTING: usize = 250;
/// Longer rules are refused: the cel crate parses and evaluates recursively, and this bounds
/// the stack a rule can take (see `EVALUATION_STACK_BYTES` in `cel.rs`).
const MAX_RULE_CHARS: usize = 16 * 1024;
/// `celconfig.MaxEvaluatedMessageExpressionSizeBytes`.
const MAX_MESSAGE_BYTES: usize = 5 * 1024;
const CACHE_LIMIT: usize = 4096;

pub struct Compiled {
    expression: IdedExpr,
    pub uses_old_self: bool,
}

/// How `oldSelf` is bound for one evaluation.
pub enum OldSelf {
    /// The rule does not see `oldSelf` (create, or no correlated old value).
    Undeclared,
    Plain(CelValue),
    /// `optionalOldSelf: true`: `oldSelf` is `optional.of(old)` ...
    Present(CelValue),
    /// ... or `optional.none()`.
    Absent,
}

/// Why a rule did not evaluate to a boolean.
pub enum Failure {
    /// Reported upstream when the CRD is stored; here at evaluation.
    Compile(String),
    NoSuchOverload,
    Runtime(String),
}

static CACHE: LazyLock<Mutex<HashMap<String, Arc<Compiled>>>> = LazyLock::new(Mutex::default);

/// Compile (or fetch from the process-wide cache) a rule; the error is the detail after
/// `rule compile error: `.
pub fn compile(source: &str) -> Result<Arc<Compiled>, String> {
    let cached = CACHE.lock().get(source).cloned();
    if let Some(hit) = cached {
        return Ok(hit);
    }
    let compiled = Arc::new(compile_uncached(source)?);
    let mut cache = CACHE.lock();
    if cache.len() >= CACHE_LIMIT {
        cache.clear();
    }
    cache.insert(source.to_string(), Arc::clone(&compiled));
    Ok(compiled)
}

fn compile_uncached(source: &str) -> Result<Compiled, String> {
    let length = source.chars().count();
    if length > MAX_RULE_CHARS {
        return Err(format!(
            "compilation failed: the expression has {length} characters; this API server (devcluster admission) evaluates at most {MAX_RULE_CHARS}"
        ));
    }
    if nesting(source) > MAX_NESTING {
        return Err("compilation failed: ERROR: <input>: max recursion depth exceeded".into());
    }
    let parser = || {
        Parser::new()
            .enable_optional_syntax(true)
            .max_recursion_depth(MAX_NESTING as u16)
    };
    let parsed = catch_unwind(|| parser().parse(source))
        .map_err(|_| "compilation failed: the expression could not be parsed".to_string())?;
    let mut expression =
        parsed.map_err(|e| format!("compilation failed: {}", e.to_string().trim()))?;
    select_by_index(&mut expression);
    if let Some(problem) = unsupported_construct(&expression) {
        return Err(format!("compilation failed: {problem}"));
    }
    let uses_old_self = expression.references().has_variable("oldSelf");
    Ok(Compiled {
        expression,
        uses_old_self,
    })
}

/// Rewrite `a.b` as `a['b']` and `a.?b` as `a[?'b']` (`has(a.b)` stays): the cel crate
/// evaluates a field selection on a non-map to `false` and fails `a.?b` when `b` is absent,
/// while its indexing reports `no such overload` and yields `optional.none()` as CEL specifies.
fn select_by_index(expression: &mut IdedExpr) {
    if let Expr::Select(select) = &mut expression.expr
        && !select.test
    {
        let operand = std::mem::take(select.operand.as_mut());
        let field = IdedExpr {
            id: expression.id,
            expr: Expr::Literal(LiteralValue::String(CelString::from(select.field.as_str()))),
        };
        expression.expr = Expr::Call(CallExpr {
            func_name: "_[_]".to_string(),
            target: None,
            args: vec![operand, field],
        });
    }
    match &mut expression.expr {
        Expr::Call(call) => {
            if call.func_name == "_?._" {
                call.func_name = "_[?_]".to_string();
            }
            if let Some(target) = call.target.as_deref_mut() {
                select_by_index(target);
            }
            call.args.iter_mut().for_each(select_by_index);
        }
        Expr::Comprehension(c) => {
            for part in [
                &mut c.iter_range,
                &mut c.accu_init,
                &mut c.loop_cond,
                &mut c.loop_step,
                &mut c.result,
            ] {
                select_by_index(part);
            }
        }
        Expr::List(list) => list.elements.iter_mut().for_each(select_by_index),
        Expr::Map(map) => {
            for entry in &mut map.entries {
                if let EntryExpr::MapEntry(e) = &mut entry.expr {
                    select_by_index(&mut e.key);
                    select_by_index(&mut e.value);
                }
            }
        }
        Expr::Select(select) => select_by_index(&mut select.operand),
        Expr::Struct(_) | Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => {}
    }
}

/// Bracket nesting depth, a cheap bound on parser recursion.
fn nesting(source: &str) -> usize {
    let (mut depth, mut deepest) = (0usize, 0usize);
    for c in source.chars() {
        match c {
            '(' | '[' | '{' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            ')' | ']' | '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    deepest
}

/// Constructs the cel crate cannot evaluate (and would panic on).
fn unsupported_construct(expression: &IdedExpr) -> Option<String> {
    match &expression.expr {
        Expr::Struct(s) => Some(format!(
            "message construction ({}{{...}}) is not supported",
            s.type_name
        )),
        Expr::Unspecified => Some("unsupported expression".into()),
        Expr::Call(call) => call
            .target
            .as_deref()
            .into_iter()
            .chain(call.args.iter())
            .find_map(unsupported_construct),
        Expr::Comprehension(c) => [
            &c.iter_range,
            &c.accu_init,
            &c.loop_cond,
            &c.loop_step,
            &c.result,
        ]
        .into_iter()
        .find_map(unsupported_construct),
        Expr::List(list) => list.elements.iter().find_map(unsupported_construct),
        Expr::Map(map) => map.entries.iter().find_map(|entry| match &entry.expr {
            EntryExpr::StructField(_) => Some("message construction is not supported".into()),
            EntryExpr::MapEntry(e) => {
                unsupported_construct(&e.key).or_else(|| unsupported_construct(&e.value))
            }
        }),
        Expr::Select(select) => unsupported_construct(&select.operand),
        Expr::Ident(_) | Expr::Literal(_) => None,
    }
}

impl Compiled {
    fn run(&self, self_value: &CelValue, old: &OldSelf) -> Result<CelValue, Failure> {
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            let mut context = library::environment();
            context.add_variable_from_value("self", self_value.clone());
            let optional = |value: Option<&CelValue>| {
                let inner =
                    value.map_or_else(OptionalValue::none, |v| OptionalValue::of(v.clone()));
                CelValue::Opaque(Arc::new(inner))
            };
            match old {
                OldSelf::Undeclared => {}
                OldSelf::Plain(value) => context.add_variable_from_value("oldSelf", value.clone()),
                OldSelf::Present(value) => {
                    context.add_variable_from_value("oldSelf", optional(Some(value)))
                }
                OldSelf::Absent => context.add_variable_from_value("oldSelf", optional(None)),
            }
            CelValue::resolve(&self.expression, &context)
        }));
        match outcome {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(error)) => Err(describe(error)),
            Err(_) => Err(Failure::Runtime(
                "internal error: the rule could not be evaluated".into(),
            )),
        }
    }

    /// Evaluate the rule to a boolean.
    pub fn evaluate(&self, self_value: &CelValue, old: &OldSelf) -> Result<bool, Failure> {
        match self.run(self_value, old)? {
            CelValue::Bool(result) => Ok(result),
            _ => Err(Failure::Compile(
                "cel expression must evaluate to a bool".into(),
            )),
        }
    }

    /// Evaluate a `messageExpression`; `None` (fall back to `message`) when it fails or its
    /// result is not an acceptable message, as upstream.
    pub fn message(&self, source: &str, self_value: &CelValue, old: &OldSelf) -> Option<String> {
        let expression = compile(source).ok()?;
        let CelValue::String(text) = expression.run(self_value, old).ok()? else {
            return None;
        };
        let trimmed = text.trim();
        let acceptable =
            !trimmed.is_empty() && trimmed.len() <= MAX_MESSAGE_BYTES && !trimmed.contains('\n');
        acceptable.then(|| trimmed.to_string())
    }
}

/// cel-go's wording of an evaluation error where the meaning matches.
fn describe(error: ExecutionError) -> Failure {
    match error {
        ExecutionError::NoSuchKey(key) => Failure::Runtime(format!("no such key: {key}")),
        ExecutionError::UndeclaredReference(name) => Failure::Compile(format!(
            "compilation failed: ERROR: <input>: undeclared reference to '{name}' (in container '')"
        )),
        ExecutionError::DivisionByZero(_) => Failure::Runtime("division by zero".into()),
        ExecutionError::RemainderByZero(_) => Failure::Runtime("modulus by zero".into()),
        ExecutionError::Overflow(..) => Failure::Runtime("integer overflow".into()),
        ExecutionError::IndexOutOfBounds(index) => {
            Failure::Runtime(format!("index out of range: {}", describe_value(&index)))
        }
        ExecutionError::FunctionError { message, .. } if message.starts_with(NO_SUCH_OVERLOAD) => {
            Failure::NoSuchOverload
        }
        ExecutionError::FunctionError { message, .. } => Failure::Runtime(message),
        ExecutionError::NoSuchOverload
        | ExecutionError::UnsupportedBinaryOperator(..)
        | ExecutionError::UnsupportedUnaryOperator(..)
        | ExecutionError::ValuesNotComparable(..)
        | ExecutionError::NotSupportedAsMethod { .. }
        | ExecutionError::UnsupportedTargetType { .. }
        | ExecutionError::UnexpectedType { .. }
        | ExecutionError::InvalidArgumentCount { .. }
        | ExecutionError::UnsupportedKeyType(_)
        | ExecutionError::UnsupportedIndex(..)
        | ExecutionError::UnsupportedMapIndex(_)
        | ExecutionError::UnsupportedListIndex(_)
        | ExecutionError::MissingArgumentOrTarget => Failure::NoSuchOverload,
        other => Failure::Runtime(other.to_string()),
    }
}

fn describe_value(value: &CelValue) -> String {
    match value {
        CelValue::Int(i) => i.to_string(),
        CelValue::UInt(u) => u.to_string(),
        other => format!("{other:?}"),
    }
}
