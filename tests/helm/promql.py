"""Just enough PromQL to say which metric names and labels an expression uses: selectors with
their matchers, and the labels of by/without/on/ignoring/group_left/group_right clauses.
Grafana's $variables are tolerated. Used to check the dashboard and the alerts against what
the binaries really export."""

import re

TOKEN = re.compile(r"""
    (?P<string>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*')
  | (?P<range>\[[^\]]*\])
  | (?P<number>\d+(?:\.\d+)?(?:e[+-]?\d+)?)
  | (?P<variable>\$\{?[A-Za-z_][A-Za-z0-9_]*\}?)
  | (?P<name>[A-Za-z_:][A-Za-z0-9_:]*)
  | (?P<op>=~|!~|!=|==|>=|<=|[=<>+\-*/%^,(){}])
  | (?P<space>\s+)
""", re.VERBOSE)

KEYWORDS = {"by", "without", "on", "ignoring", "group_left", "group_right", "bool", "and", "or",
            "unless", "offset"}
GROUPING = {"by", "without", "on", "ignoring", "group_left", "group_right"}


def tokens(expr):
    out, pos = [], 0
    while pos < len(expr):
        m = TOKEN.match(expr, pos)
        if not m:
            raise ValueError(f"cannot read {expr[pos:pos + 20]!r} in {expr!r}")
        pos = m.end()
        kind = m.lastgroup
        if kind != "space":
            out.append((kind, m.group()))
    return out


def uses(expr):
    """({metric: [(label, op, value)]}, {grouping labels}) used by `expr`."""
    toks = tokens(expr)
    metrics, grouping = {}, set()
    i = 0
    while i < len(toks):
        kind, text = toks[i]
        following = toks[i + 1][1] if i + 1 < len(toks) else None
        if kind == "name" and text in GROUPING and following == "(":
            j = i + 2
            while toks[j][1] != ")":
                if toks[j][0] == "name":
                    grouping.add(toks[j][1])
                j += 1
            i = j + 1
            continue
        if kind == "name" and text not in KEYWORDS and following != "(" and following not in GROUPING:
            matchers = []
            i += 1
            if following == "{":
                i += 1
                while toks[i][1] != "}":
                    if toks[i][1] == ",":
                        i += 1
                        continue
                    label, op, value = toks[i][1], toks[i + 1][1], toks[i + 2][1]
                    matchers.append((label, op, value[1:-1]))
                    i += 3
                i += 1
            metrics.setdefault(text, []).extend(matchers)
            continue
        i += 1
    return metrics, grouping


def label_values_query(query):
    """Grafana's label_values(metric, label) -> (metric, label), else None."""
    m = re.fullmatch(r"\s*label_values\(\s*([A-Za-z_:][A-Za-z0-9_:]*)\s*,\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)\s*", query)
    return (m.group(1), m.group(2)) if m else None


def parse_exposition(text):
    """{metric name: {label: {values}}} and {metric family: help text} of /metrics output."""
    series, helps = {}, {}
    for line in text.splitlines():
        if line.startswith("# HELP "):
            name, _, help_text = line[7:].partition(" ")
            helps[name] = help_text
            continue
        if not line or line.startswith("#"):
            continue
        m = re.match(r"([A-Za-z_:][A-Za-z0-9_:]*)(\{(.*)\})?\s", line)
        if not m:
            continue
        labels = series.setdefault(m.group(1), {})
        for label, value in re.findall(r'([A-Za-z_][A-Za-z0-9_]*)="((?:[^"\\]|\\.)*)"', m.group(3) or ""):
            labels.setdefault(label, set()).add(value)
    return series, helps
