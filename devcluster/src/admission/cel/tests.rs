//! CEL rules: the library a rule can use, how results become field errors (checked against
//! apiextensions-apiserver `pkg/apiserver/schema/cel/validation.go` of 1.35), transition rules,
//! and hostile rules that must fail cleanly.

use serde_json::{Value, json};

use super::super::validate;

fn spec_schema(properties: Value, rules: Value) -> Value {
    json!({"type": "object", "properties": {"spec": {
        "type": "object", "properties": properties, "x-kubernetes-validations": rules,
    }}})
}

fn failures(schema: &Value, object: &Value, old: Option<&Value>) -> Vec<String> {
    validate(schema, object, old)
        .iter()
        .map(ToString::to_string)
        .collect()
}

fn library_properties() -> Value {
    json!({
        "s": {"type": "string"},
        "l": {"type": "array", "items": {"type": "integer"}},
        "p": {"x-kubernetes-int-or-string": true},
        "name": {"x-kubernetes-int-or-string": true},
        "ratio": {"type": "number"},
        "d": {"type": "string", "format": "duration"},
        "t": {"type": "string", "format": "date-time"},
        "opt": {"type": "string"},
        "nothing": {"type": "string", "nullable": true},
        "m": {"type": "object", "additionalProperties": {"type": "string"}},
        "x-y": {"type": "integer"},
        "namespace": {"type": "string"},
    })
}

fn library_object() -> Value {
    json!({"spec": {
        "s": "héllo", "l": [1, 2, 3], "p": 8080, "name": "http", "ratio": 2, "d": "90s",
        "t": "2024-01-01T10:00:00+02:00", "nothing": null, "m": {"a": "b"}, "x-y": 1, "namespace": "ns",
    }})
}

#[test]
fn the_library_rules_use_evaluates() {
    let rules = [
        "self.s.size() == 5 && size(self.s) == 5 && size(self.l) == 3 && size(self.m) == 1",
        "type(self.p) == int && type(self.name) == string && type(self.ratio) == double",
        "type(true) == bool && type([]) == list && type({}) == map && type(null) == null_type",
        "type(duration('1s')) == google.protobuf.Duration && type(int) == type && type(dyn(1)) == int",
        "type(self.p) == int ? self.p >= 1 && self.p <= 65535 : self.p.matches('^[a-z]+$')",
        "type(self.name) == int ? self.name >= 1 : self.name.matches('^[a-z]+$')",
        "self.ratio == 2.0 && self.x__dash__y == 1 && self.__namespace__ == 'ns'",
        "duration('1m30s') == duration('90s') && duration('1.5h') == duration('90m') && duration('500ms') < duration('1s')",
        "duration('-1s') < duration('0') && self.d == duration('90s') && string(self.d) == '90s'",
        "self.t == timestamp('2024-01-01T08:00:00Z') && self.t.getHours() == 8 && self.t.getHours('+02:00') == 10",
        "timestamp('2024-01-01T00:00:00Z') + duration('24h') == timestamp('2024-01-02T00:00:00Z')",
        "string(timestamp('2024-01-01T00:00:00.500+01:00')) == '2023-12-31T23:00:00.5Z' && timestamp('2024-03-01T00:00:00Z').getDayOfWeek() == 5",
        "string(1.5) == '1.5' && string(1e6) == '1e+06' && string(true) == 'true' && string(42) == '42' && bool('true')",
        "'abc'.matches('^a') && matches('abc', 'c$') && !'\u{661}'.matches('^\\\\d$')",
        "'abc 123'.find('[0-9]+') == '123' && 'a1b2c3'.findAll('[0-9]') == ['1', '2', '3'] && 'a1b2c3'.findAll('[0-9]', 2) == ['1', '2']",
        "self.l.isSorted() && ![3, 1].isSorted() && self.l.sum() == 6 && [1.5, 2.5].sum() == 4.0 && [].sum() == 0",
        "[3, 1, 2].min() == 1 && [3, 1, 2].max() == 3 && self.l.indexOf(2) == 1 && [1, 2, 1].lastIndexOf(1) == 2 && ['a'].indexOf('b') == -1",
        "'hello'.charAt(1) == 'e' && 'héllo'.indexOf('l') == 2 && 'hello'.indexOf('l', 3) == 3 && 'hello'.lastIndexOf('l') == 3",
        "'ÀB'.lowerAscii() == 'Àb' && 'ab'.upperAscii() == 'AB' && 'aaa'.replace('a', 'b', 2) == 'bba' && 'aaa'.replace('a', 'c') == 'ccc'",
        "'a,b,c'.split(',') == ['a', 'b', 'c'] && 'a,b,c'.split(',', 2) == ['a', 'b,c'] && 'héllo'.substring(1, 3) == 'él' && 'héllo'.substring(3) == 'lo'",
        "'  x '.trim() == 'x' && ['a', 'b'].join('-') == 'a-b' && ['a', 'b'].join() == 'ab' && strings.quote('a\"b') == '\"a\\\\\"b\"'",
        "sets.contains([1, 2, 3], [1, 2]) && sets.intersects([1], [1, 2]) && sets.equivalent([1, 2], [2, 1, 1]) && !sets.contains([1], [2])",
        "[1, [2, [3]]].flatten() == [1, 2, [3]] && [1, 1, 2].distinct() == [1, 2] && [1, 2].reverse() == [2, 1]",
        "[3, 1, 2].sort() == [1, 2, 3] && [1, 2, 3, 4].slice(1, 3) == [2, 3] && lists.range(3) == [0, 1, 2]",
        "self.l.all(x, x > 0) && self.l.exists(x, x == 2) && self.l.exists_one(x, x == 3) && self.l.map(x, x * 2) == [2, 4, 6] && self.l.filter(x, x > 1) == [2, 3]",
        "self.m.all(k, self.m[k] == 'b') && 'a' in self.m && !has(self.opt) && !has(self.nothing) && has(self.s) && self.?opt.orValue('d') == 'd'",
    ];
    let schema = spec_schema(
        library_properties(),
        json!(rules.iter().map(|r| json!({"rule": r})).collect::<Vec<_>>()),
    );
    assert_eq!(
        failures(&schema, &library_object(), None),
        Vec::<String>::new()
    );
}

#[test]
fn rule_results_become_field_errors() {
    let properties = json!({
        "x": {"type": "integer"}, "s": {"type": "string"},
        "m": {"type": "object", "additionalProperties": {"type": "string"}},
        "items": {"type": "array", "items": {"type": "string"}, "x-kubernetes-validations": [{"rule": "self.size() < 2", "message": "too many"}]},
        "missing": {"type": "string"},
    });
    let object = json!({"spec": {"x": 1, "s": "a", "m": {"k": "v"}, "items": ["a", "b"]}});
    let cases: Vec<(Value, &str)> = vec![
        (
            json!({"rule": "self.x > 1"}),
            "spec: Invalid value: failed rule: self.x > 1",
        ),
        (
            json!({"rule": "self.x > 1", "message": " x must exceed 1 "}),
            "spec: Invalid value: x must exceed 1",
        ),
        (
            json!({"rule": "self.x > 1", "messageExpression": "'x is ' + string(self.x)"}),
            "spec: Invalid value: x is 1",
        ),
        (
            json!({"rule": "self.x > 1", "message": "fallback", "messageExpression": "1"}),
            "spec: Invalid value: fallback",
        ),
        (
            json!({"rule": "self.x > 1", "message": "fallback", "messageExpression": "'two\\nlines'"}),
            "spec: Invalid value: fallback",
        ),
        (
            json!({"rule": "self.x > 1", "message": "fallback", "messageExpression": "'  '"}),
            "spec: Invalid value: fallback",
        ),
        (
            json!({"rule": "self.x > 1", "message": "m", "fieldPath": ".x"}),
            "spec.x: Invalid value: m",
        ),
        (
            json!({"rule": "self.x > 1", "message": "m", "fieldPath": ".m['k']"}),
            "spec.m[k]: Invalid value: m",
        ),
        (
            json!({"rule": "self.x > 1", "message": "m", "fieldPath": ".nope"}),
            "spec: Invalid value: m",
        ),
        (
            json!({"rule": "self.x > 1", "message": "m", "reason": "FieldValueForbidden"}),
            "spec: Forbidden: m",
        ),
        (
            json!({"rule": "self.x > 1", "message": "m", "reason": "FieldValueRequired"}),
            "spec: Required value: m",
        ),
        (
            json!({"rule": "self.x > 1", "message": "m", "reason": "FieldValueDuplicate"}),
            "spec: Duplicate value",
        ),
        (
            json!({"rule": "self.missing == 'a'"}),
            r#"spec: Invalid value: "object": no such key: missing evaluating rule: self.missing == 'a'"#,
        ),
        (
            json!({"rule": "self.s + 1 == 2"}),
            r#"spec: Invalid value: "object": 'no such overload': call arguments did not match a supported operator, function or macro signature for rule: self.s + 1 == 2"#,
        ),
        (
            json!({"rule": "self.x"}),
            r#"spec: Invalid value: "object": rule compile error: cel expression must evaluate to a bool"#,
        ),
        (
            json!({"rule": "nope(self)"}),
            r#"spec: Invalid value: "object": rule compile error: compilation failed: ERROR: <input>: undeclared reference to 'nope' (in container '')"#,
        ),
        (
            json!({"rule": "quantity('1Gi').isGreaterThan(quantity('1Mi'))", "message": "size"}),
            r#"spec: Invalid value: "object": function 'quantity' of the Kubernetes CEL library is not supported by this API server (devcluster admission) evaluating rule: size"#,
        ),
        (
            json!({"rule": "self.m.all(k, v, v != '')", "message": "values"}),
            r#"spec: Invalid value: "object": two-variable comprehension 'all' is not supported by this API server (devcluster admission) evaluating rule: values"#,
        ),
        (
            json!({"rule": "[].min() == 1"}),
            r#"spec: Invalid value: "object": min called on empty list evaluating rule: [].min() == 1"#,
        ),
        (
            json!({"rule": "'abc'.substring(5) == ''"}),
            r#"spec: Invalid value: "object": index out of range: 5 evaluating rule: 'abc'.substring(5) == ''"#,
        ),
        (
            json!({"rule": "1 / (self.x - 1) == 0"}),
            r#"spec: Invalid value: "object": division by zero evaluating rule: 1 / (self.x - 1) == 0"#,
        ),
        (
            json!({"rule": "duration(self.s) > duration('0s')"}),
            r#"spec: Invalid value: "object": type conversion error from 'string' to 'google.protobuf.Duration' evaluating rule: duration(self.s) > duration('0s')"#,
        ),
    ];
    for (rule, want) in cases {
        let schema = spec_schema(properties.clone(), json!([rule]));
        let got = failures(&schema, &object, None);
        assert_eq!(got, [want, "spec.items: Invalid value: too many"], "{rule}");
    }
}

#[test]
fn rules_run_on_every_node_with_a_value() {
    let schema = json!({"type": "object",
    "x-kubernetes-validations": [{"rule": "self.metadata.name.startsWith('w') && self.kind == 'Pool' && !has(self.metadata.namespace)"}],
    "properties": {"spec": {"type": "object", "properties": {
        "m": {"type": "object", "additionalProperties": {"type": "string", "x-kubernetes-validations": [{"rule": "self != 'bad'", "message": "no"}]}},
        "l": {"type": "array", "items": {"type": "integer", "x-kubernetes-validations": [{"rule": "self > 0", "message": "positive"}]}},
        "n": {"type": "object", "nullable": true, "x-kubernetes-validations": [{"rule": "false", "message": "never"}]},
        "a": {"type": "string", "allOf": [{"x-kubernetes-validations": [{"rule": "self != 'x'", "message": "from allOf"}]}]},
    }}}});
    let object = json!({"kind": "Pool", "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"m": {"ok": "fine", "k": "bad"}, "l": [1, 0], "n": null, "a": "x"}});
    assert_eq!(
        failures(&schema, &object, None),
        [
            r#"spec.a: Invalid value: "x": from allOf"#,
            "spec.l[1]: Invalid value: 0: positive",
            r#"spec.m[k]: Invalid value: "bad": no"#
        ]
    );
}

#[test]
fn transition_rules_see_the_correlated_old_value() {
    let schema = spec_schema(
        json!({
            "x": {"type": "string", "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "x is immutable"}]},
            "y": {"type": "string", "x-kubernetes-validations": [{"rule": "!oldSelf.hasValue() || self == oldSelf.value()", "message": "y is immutable", "optionalOldSelf": true}]},
            "ports": {"type": "array", "x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"],
                "items": {"type": "object", "properties": {"name": {"type": "string"}, "port": {"type": "integer"}},
                    "x-kubernetes-validations": [{"rule": "self.port >= oldSelf.port", "message": "ports only grow"}]}},
            "tags": {"type": "array", "items": {"type": "string", "x-kubernetes-validations": [{"rule": "self == oldSelf", "message": "unreachable"}]}},
        }),
        json!([]),
    );
    let old = json!({"spec": {"x": "a", "ports": [{"name": "http", "port": 80}, {"name": "grpc", "port": 90}], "tags": ["a"]}});
    // Create: transition rules do not run, optionalOldSelf rules run with oldSelf = none.
    assert_eq!(
        failures(&schema, &json!({"spec": {"x": "b", "y": "c"}}), None),
        Vec::<String>::new()
    );
    let new = json!({"spec": {"x": "b", "y": "c", "ports": [{"name": "grpc", "port": 91}, {"name": "http", "port": 70}, {"name": "new", "port": 1}], "tags": ["b"]}});
    assert_eq!(
        failures(&schema, &new, Some(&old)),
        [
            r#"spec.ports[1]: Invalid value: ports only grow"#,
            r#"spec.x: Invalid value: "b": x is immutable"#
        ]
    );
    let old_with_y = json!({"spec": {"x": "a", "y": "c"}});
    let changed_y = json!({"spec": {"x": "a", "y": "d"}});
    assert_eq!(
        failures(&schema, &changed_y, Some(&old_with_y)),
        [r#"spec.y: Invalid value: "d": y is immutable"#]
    );
}

#[test]
fn hostile_rules_fail_without_panicking() {
    let too_deep = format!("{}true{}", "(".repeat(300), ")".repeat(300));
    let deep = format!("{}true{}", "[".repeat(240), "]".repeat(240));
    let long_chain = format!("'a'{} == 'a'", ".lowerAscii()".repeat(1200));
    let too_long = vec!["self.x == 1"; 2000].join(" || ");
    let compile_error =
        r#"spec: Invalid value: "object": rule compile error: compilation failed: "#;
    let cases: Vec<(&str, Option<&str>)> = vec![
        ("Foo{a: 1}", Some(compile_error)),
        ("{'a': Foo{b: 1}}.a.b", Some(compile_error)),
        ("self.x ==", Some(compile_error)),
        (too_deep.as_str(), Some(compile_error)),
        (too_long.as_str(), Some(compile_error)),
        (
            "self.x.y.z == 1",
            Some(r#"spec: Invalid value: "object": "#),
        ),
        (
            deep.as_str(),
            Some(
                r#"spec: Invalid value: "object": rule compile error: cel expression must evaluate to a bool"#,
            ),
        ),
        (long_chain.as_str(), None),
    ];
    for (rule, want) in cases {
        let schema = spec_schema(json!({"x": {"type": "integer"}}), json!([{"rule": rule}]));
        let got = failures(&schema, &json!({"spec": {"x": 2}}), None);
        match want {
            None => assert!(got.is_empty(), "{got:?}"),
            Some(prefix) => assert!(got.len() == 1 && got[0].starts_with(prefix), "{got:?}"),
        }
    }
}
