"""The SQL guard: one read-only SELECT over the allowed tables, re-rendered with a row limit.

Every statement the structured route runs (whoever wrote it: the semantic parser, a user) goes
through `check_sql` first. It parses the statement with sqlglot (SQLite syntax) and refuses, with
`SqlRefused` naming the reason:

* more than one statement ("stacked statements"), and anything but a SELECT (or a UNION /
  INTERSECT / EXCEPT of SELECTs): writes anywhere in the tree (a DELETE in a CTE, SELECT ... INTO),
  PRAGMA, ATTACH, VACUUM, SET, locking reads (FOR UPDATE);
* a table outside `allowed_tables` (CTE names excepted), a qualified table (`main.t`,
  `pg_catalog.pg_user`), a table function (`pragma_table_info(...)`, `json_each(...)`);
* recursive CTEs (they can count or grow strings without bound before any timeout fires);
* any function outside `ALLOWED_FUNCTIONS`, casts to types other than numbers and text;
* LIKE / GLOB / ILIKE patterns longer than `MAX_PATTERN_CHARS` or with more than
  `MAX_PATTERN_WILDCARDS` wildcards, patterns that are not a literal or a `?` parameter, and
  REGEXP / SIMILAR TO / MATCH;
* named or numbered parameters (only `?` is allowed), statements over `MAX_SQL_CHARS`.

What it returns is the statement as sqlglot renders it again, never the text it was given (so a
comment hiding a second statement is gone), with a LIMIT of at most `row_limit` (added, or a
larger or negative one lowered). `dialect="postgres"` transpiles: identifiers are lower-cased and
quoted (so `user` is a column, not the current user), LIKE becomes ILIKE (SQLite's LIKE ignores
ASCII case) and `?` parameters, when their values are given, are inlined as literals.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from functools import lru_cache

import sqlglot
import sqlglot.expressions as exp
from sqlglot.dialects.dialect import Dialect
from sqlglot.errors import SqlglotError
from sqlglot.tokens import TokenType

from amsrag.tables.base import ALLOWED_FUNCTIONS, DEFAULT_ROW_LIMIT, SqlRefused

DIALECTS = ("sqlite", "postgres")
MAX_SQL_CHARS = 20_000
MAX_PATTERN_CHARS = 100
MAX_PATTERN_WILDCARDS = 6
ALLOWED_CAST_TYPES = frozenset({
    "INT", "INTEGER", "BIGINT", "SMALLINT", "REAL", "FLOAT", "DOUBLE", "DECIMAL", "NUMERIC", "TEXT",
    "VARCHAR", "CHAR", "NCHAR", "NVARCHAR", "BOOLEAN",
})


class SqlExecutionError(SqlRefused):
    """A statement the guard passed that the database rejected (no such column, a type error, ...)."""


# The sqlglot node classes each allowed SQL function parses to (IFNULL -> Coalesce, SUBSTR -> Substring,
# MAX(a, b) -> Greatest, ...), and the names refusals print for some others.
_FUNCTION_CLASSES: dict[type[exp.Expression], str] = {
    exp.Count: "COUNT", exp.Sum: "SUM", exp.Avg: "AVG", exp.Min: "MIN", exp.Max: "MAX", exp.Least: "MIN",
    exp.Greatest: "MAX", exp.Abs: "ABS", exp.Lower: "LOWER", exp.Upper: "UPPER", exp.Length: "LENGTH",
    exp.Round: "ROUND", exp.Coalesce: "COALESCE", exp.Cast: "CAST", exp.Substring: "SUBSTR",
    exp.Trim: "TRIM", exp.Nullif: "NULLIF",
}
# Func subclasses that are syntax, not calls: boolean connectives, CASE, EXISTS, COLLATE.
_SYNTAX_FUNCS: tuple[type[exp.Expression], ...] = (exp.And, exp.Or, exp.Case, exp.Exists, exp.Collate)
_WRITES: dict[type[exp.Expression], str] = {
    exp.Insert: "INSERT", exp.Update: "UPDATE", exp.Delete: "DELETE", exp.Drop: "DROP", exp.Create: "CREATE",
    exp.Alter: "ALTER", exp.Merge: "MERGE", exp.TruncateTable: "TRUNCATE", exp.Into: "SELECT ... INTO",
}
_OTHER_STATEMENTS: dict[type[exp.Expression], str] = {
    exp.Pragma: "PRAGMA", exp.Attach: "ATTACH", exp.Detach: "DETACH", exp.Set: "SET", exp.Use: "USE",
    exp.Transaction: "BEGIN", exp.Commit: "COMMIT", exp.Rollback: "ROLLBACK", exp.Copy: "COPY",
    exp.Analyze: "ANALYZE", exp.Describe: "DESCRIBE", exp.Show: "SHOW",
}
_WRITE_COMMANDS = frozenset({"INSERT", "UPDATE", "DELETE", "DROP", "CREATE", "ALTER", "REPLACE", "UPSERT",
                             "TRUNCATE", "MERGE", "GRANT", "REVOKE", "REINDEX"})
_SYSTEM_PREFIXES = ("sqlite_", "pg_", "information_schema")
_PLAIN_NAME = re.compile(r"^[^\W\d]\w*$")
_MARK = "__amsrag_p"  # `?` parameters are numbered :__amsrag_p0, ... while the statement is checked


@dataclass(frozen=True, slots=True)
class CheckedSql:
    """What `guard` returns: the statement to run and the parameters to bind by name (sqlite; empty for
    postgres, whose values are inlined)."""

    sql: str
    params: dict[str, object]


def check_sql(sql: str, allowed_tables: Collection[str], dialect: str = "sqlite",
              row_limit: int = DEFAULT_ROW_LIMIT) -> str:
    """The statement re-rendered in `dialect` with LIMIT <= `row_limit`, or `SqlRefused` naming why not.
    `sql` is SQLite syntax; `?` parameters stay `?` (sqlite) or become `%s` (postgres)."""
    return guard(sql, allowed_tables, dialect, row_limit).sql


def guard(sql: str, allowed_tables: Collection[str], dialect: str = "sqlite", row_limit: int = DEFAULT_ROW_LIMIT,
          params: Sequence[object] | None = None) -> CheckedSql:
    """`check_sql`, and when `params` are given: their number checked, the patterns among them
    checked like literal ones, and for postgres inlined as literals (the result has no parameters)."""
    if dialect not in DIALECTS:
        raise ValueError(f"unknown dialect {dialect!r}; choose one of {', '.join(DIALECTS)}")
    if row_limit < 1:
        raise ValueError(f"row_limit must be at least 1, got {row_limit}")
    if not isinstance(sql, str) or not sql.strip():
        raise SqlRefused("empty statement")
    if len(sql) > MAX_SQL_CHARS:
        raise SqlRefused(f"statement too long: {len(sql):,} characters (at most {MAX_SQL_CHARS:,})")
    allowed = frozenset(t.lower() for t in allowed_tables)
    try:
        if dialect == "sqlite":  # the checked statement does not depend on the values: cached
            template = _sqlite_template(sql, allowed, row_limit)
            _check_values(template.n_marks, template.pattern_params, params)
            if params is None:
                return CheckedSql(template.positional, {})
            # bound by name: the rendered text may order clauses differently from the source
            return CheckedSql(template.named, {f"{_MARK}{i}": value for i, value in enumerate(params)})
        tree, placeholders, pattern_params = _analyse(sql, allowed, row_limit)
        _check_values(len(placeholders), pattern_params, params)
        if params is not None:
            for i, node in placeholders.items():
                node.replace(_literal(params[i]))
        return CheckedSql(_render_postgres(tree), {})
    except RecursionError:
        raise SqlRefused("cannot check the statement: nested too deeply") from None


@dataclass(frozen=True, slots=True)
class _Template:
    named: str  # parameters as :__amsrag_pN
    positional: str  # parameters as ?, in the rendered order
    n_marks: int
    pattern_params: tuple[tuple[int, bool], ...]  # (parameter index, GLOB?) of patterns given as ?


@lru_cache(maxsize=2048)
def _sqlite_template(sql: str, allowed: frozenset[str], row_limit: int) -> _Template:
    tree, placeholders, pattern_params = _analyse(sql, allowed, row_limit)
    named = tree.sql(dialect="sqlite", comments=False)
    for node in placeholders.values():
        node.set("this", None)
    positional = tree.sql(dialect="sqlite", comments=False)
    return _Template(named, positional, len(placeholders), pattern_params)


def _analyse(sql: str, allowed: frozenset[str], row_limit: int
             ) -> tuple[exp.Expression, dict[int, exp.Placeholder], tuple[tuple[int, bool], ...]]:
    """Every check that does not need the parameter values; the tree with the limit enforced."""
    numbered, n_marks = _number_placeholders(sql)
    tree = _parse(numbered)
    _check_statement(tree)
    placeholders = _check_parameters(tree, n_marks)
    _check_tables(tree, allowed)
    _check_functions(tree)
    pattern_params = _check_patterns(tree, placeholders)
    _enforce_limit(tree, row_limit)
    return tree, placeholders, pattern_params


def _check_values(n_marks: int, pattern_params: tuple[tuple[int, bool], ...], params: Sequence[object] | None
                  ) -> None:
    if params is None:
        return
    if len(params) != n_marks:
        raise SqlRefused(f"the statement has {n_marks} ? parameter(s) but {len(params)} value(s) were given")
    for value in params:
        if value is not None and not isinstance(value, (str, int, float)):
            raise SqlRefused(f"parameter values must be text, numbers or None, not {type(value).__name__}")
    for i, glob in pattern_params:
        value = params[i]
        if isinstance(value, str):
            _check_pattern(value, glob)


def _parse(sql: str) -> exp.Expression:
    try:
        statements = [s for s in sqlglot.parse(sql, read="sqlite") if s is not None]
    except SqlglotError as exc:
        raise SqlRefused(f"cannot parse the statement: {str(exc).splitlines()[0][:200]}") from None
    except RecursionError:
        raise SqlRefused("cannot parse the statement: nested too deeply") from None
    if not statements:
        raise SqlRefused("empty statement")
    if len(statements) > 1:
        raise SqlRefused(f"stacked statements: {len(statements)} statements, only one SELECT may run")
    tree = statements[0]
    assert isinstance(tree, exp.Expression)
    return tree


def _command_name(node: exp.Command) -> str:
    return str(node.this).split()[0].upper() if str(node.this).strip() else "?"


def _check_statement(tree: exp.Expression) -> None:
    for node in tree.walk():
        for cls, name in _WRITES.items():
            if isinstance(node, cls):
                raise SqlRefused(f"writes are not allowed: {name}")
        if isinstance(node, exp.Command):
            name = _command_name(node)
            if name in _WRITE_COMMANDS:
                raise SqlRefused(f"writes are not allowed: {name}")
            raise SqlRefused(f"only SELECT statements are allowed, not {name}")
        for cls, name in _OTHER_STATEMENTS.items():
            if isinstance(node, cls):
                raise SqlRefused(f"only SELECT statements are allowed, not {name}")
        if isinstance(node, exp.Lock):
            raise SqlRefused("locking reads (FOR UPDATE / FOR SHARE) are not allowed")
        if isinstance(node, exp.With) and node.args.get("recursive"):
            raise SqlRefused("recursive CTEs are not allowed")
    if not isinstance(tree, (exp.Select, exp.SetOperation)):
        raise SqlRefused(f"only SELECT statements are allowed, not {tree.key.upper()}")
    for node in tree.walk():
        if isinstance(node, exp.SetOperation):
            for side in (node.this, node.expression):
                if not isinstance(side, (exp.Select, exp.SetOperation, exp.Subquery)):
                    raise SqlRefused(f"only SELECT statements are allowed, not {side.key.upper()}")


def _number_placeholders(sql: str) -> tuple[str, int]:
    """`sql` with each `?` token (not one inside a string or a comment) replaced by `:__amsrag_pN`,
    N counting from 0 in text order (the order values bind in), and how many there were."""
    try:
        tokens = Dialect.get_or_raise("sqlite").tokenize(sql)
    except SqlglotError as exc:
        raise SqlRefused(f"cannot parse the statement: {str(exc).splitlines()[0][:200]}") from None
    spans = [(t.start, t.end) for t in tokens if t.token_type == TokenType.PLACEHOLDER and t.text == "?"]
    out, pos = [], 0
    for i, (start, end) in enumerate(spans):
        out.append(sql[pos:start])
        out.append(f":{_MARK}{i}")
        pos = end + 1
    out.append(sql[pos:])
    return "".join(out), len(spans)


def _check_parameters(tree: exp.Expression, n_marks: int) -> dict[int, exp.Placeholder]:
    """The `?` placeholders by their position in the text (refusing `:name`, `$1`, `@x`)."""
    found: dict[int, exp.Placeholder] = {}
    for node in tree.walk():
        if isinstance(node, exp.Identifier) and not node.quoted and not _PLAIN_NAME.match(str(node.this)):
            name = str(node.this)
            if name[:1] in ("$", "@", ":", "?", "#"):
                raise SqlRefused(f"only ? parameters are allowed, not {name[:40]}")
            raise SqlRefused(f"unquoted identifier {name[:40]!r} is not allowed")
        if isinstance(node, exp.Parameter):
            raise SqlRefused(f"only ? parameters are allowed, not {node.sql(dialect='sqlite')}")
        if isinstance(node, exp.Placeholder):
            name = str(node.this or "")
            if not name.startswith(_MARK) or not name[len(_MARK):].isdigit() or int(name[len(_MARK):]) in found:
                raise SqlRefused(f"only ? parameters are allowed, not {':' + name if name else '?'}")
            found[int(name[len(_MARK):])] = node
    if len(found) != n_marks:
        raise SqlRefused("only ? parameters are allowed")
    return found


def _check_tables(tree: exp.Expression, allowed: Collection[str]) -> None:
    cte_names = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
    for table in tree.find_all(exp.Table):
        if not isinstance(table.this, exp.Identifier):
            what = table.this.sql(dialect="sqlite") if table.this is not None else "?"
            raise SqlRefused(f"table functions are not allowed: {what[:80]}")
        name = table.name.lower()
        qualified = ".".join(p.name for p in table.parts)
        if table.args.get("db") is not None or table.args.get("catalog") is not None:
            raise SqlRefused(f"table '{qualified}' is not allowed (no schema-qualified tables)")
        if name.startswith(_SYSTEM_PREFIXES) and name not in allowed:
            raise SqlRefused(f"table '{qualified}' is not allowed (a system table)")
        if name not in allowed and name not in cte_names:
            raise SqlRefused(f"table '{qualified}' is not allowed")


def _function_name(node: exp.Expr) -> str:
    if isinstance(node, exp.Anonymous):
        return str(node.name).lower()
    if isinstance(node, exp.Func):
        rendered = node.sql(dialect="sqlite").split("(")[0].strip().lower()  # as SQLite spells it
        return rendered if rendered.replace("_", "").isalnum() else node.sql_name().lower()
    return node.key.lower()


def _check_functions(tree: exp.Expression) -> None:
    for node in tree.walk():
        if isinstance(node, (exp.RegexpLike, exp.RegexpILike, exp.SimilarTo)):
            raise SqlRefused("regular expressions (REGEXP, SIMILAR TO) are not allowed")
        if isinstance(node, exp.Match):
            raise SqlRefused("MATCH (full-text search) is not allowed")
        if isinstance(node, exp.If) and isinstance(node.parent, exp.Case):
            continue  # CASE's WHEN ... THEN
        if isinstance(node, _SYNTAX_FUNCS):
            if isinstance(node, exp.Collate) and str(node.expression.name).upper() not in ("NOCASE", "BINARY",
                                                                                            "RTRIM"):
                raise SqlRefused(f"collation '{node.expression.name}' is not allowed")
            continue
        if isinstance(node, (exp.Func, exp.AnonymousAggFunc)):
            allowed_as = _FUNCTION_CLASSES.get(type(node))  # type: ignore[arg-type]
            if allowed_as is None or allowed_as not in ALLOWED_FUNCTIONS:
                raise SqlRefused(f"function '{_function_name(node)}' is not allowed")
            if isinstance(node, (exp.Cast, exp.TryCast)):
                to = node.to.this.value if isinstance(node.to, exp.DataType) else None
                if to is None or str(to).upper() not in ALLOWED_CAST_TYPES:
                    raise SqlRefused(f"cast to '{node.to.sql(dialect='sqlite')}' is not allowed")
        if isinstance(node, (exp.Window, exp.WindowSpec)):
            raise SqlRefused("window functions are not allowed")


def _check_pattern(pattern: str, glob: bool) -> None:
    chars = ("*", "?", "[") if glob else ("%", "_")
    wildcards = sum(pattern.count(c) for c in chars)
    if len(pattern) > MAX_PATTERN_CHARS:
        raise SqlRefused(f"pattern too long: {len(pattern)} characters (at most {MAX_PATTERN_CHARS})")
    if wildcards > MAX_PATTERN_WILDCARDS:
        raise SqlRefused(f"pattern with {wildcards} wildcards (at most {MAX_PATTERN_WILDCARDS})")


def _check_patterns(tree: exp.Expression, placeholders: dict[int, exp.Placeholder]
                    ) -> tuple[tuple[int, bool], ...]:
    """Literal patterns checked; (parameter index, GLOB?) of the patterns given as ? parameters."""
    index = {id(p): i for i, p in placeholders.items()}
    out: list[tuple[int, bool]] = []
    for node in tree.walk():
        if not isinstance(node, (exp.Like, exp.ILike, exp.Glob)):
            continue
        glob = isinstance(node, exp.Glob)
        pattern = node.expression
        if isinstance(pattern, exp.Literal) and pattern.is_string:
            _check_pattern(str(pattern.this), glob)
        elif isinstance(pattern, exp.Placeholder):
            out.append((index[id(pattern)], glob))
        elif not isinstance(pattern, exp.Null):
            raise SqlRefused(f"a {'GLOB' if glob else 'LIKE'} pattern must be a string literal or a ? parameter, "
                             f"not {pattern.sql(dialect='sqlite')[:80]}")
    return tuple(out)


def _limit_value(limit: exp.Expression) -> int:
    value = limit.args.get("expression")
    if isinstance(value, exp.Neg) and isinstance(value.this, exp.Literal) and not value.this.is_string:
        return -1  # SQLite: a negative LIMIT is no limit
    if isinstance(value, exp.Literal) and not value.is_string:
        try:
            return int(str(value.this))
        except ValueError:
            pass
    raise SqlRefused(f"LIMIT must be a whole number, not {value.sql(dialect='sqlite') if value else '?'}")


def _enforce_limit(tree: exp.Expression, row_limit: int) -> None:
    for node in tree.find_all(exp.Offset):
        value = node.args.get("expression")
        if not (isinstance(value, exp.Literal) and not value.is_string):
            raise SqlRefused("OFFSET must be a whole number")
    limit = tree.args.get("limit")
    if isinstance(limit, exp.Limit):
        n = _limit_value(limit)
    elif limit is not None:
        raise SqlRefused("only LIMIT n is allowed")
    else:
        n = -1
    if not 0 <= n <= row_limit:
        tree.set("limit", exp.Limit(expression=exp.Literal.number(row_limit)))


def _literal(value: object) -> exp.Expression:
    if value is None:
        return exp.Null()
    if isinstance(value, bool):
        return exp.Literal.number(int(value))
    if isinstance(value, (int, float)):
        if value != value or value in (float("inf"), float("-inf")):  # NaN / infinity
            raise SqlRefused(f"parameter value {value!r} is not a finite number")
        return exp.Literal.number(value) if value >= 0 else exp.Neg(this=exp.Literal.number(-value))
    return exp.Literal.string(str(value).replace("\x00", ""))


def _render_postgres(tree: exp.Expression) -> str:
    for node in list(tree.find_all(exp.Placeholder)):
        node.set("this", None)  # parameters not inlined: %s, bound in order
    for like in list(tree.find_all(exp.Like)):
        like.replace(exp.ILike(this=like.this, expression=like.expression))
    for rnd in list(tree.find_all(exp.Round)):
        if rnd.args.get("decimals") is not None:  # PostgreSQL rounds to n places only numeric values
            rnd.set("this", exp.Cast(this=rnd.this, to=exp.DataType.build("DECIMAL")))
    for collate in list(tree.find_all(exp.Collate)):
        nocase = str(collate.expression.name).upper() == "NOCASE"
        parent = collate.parent
        collate.replace(collate.this)
        if not nocase:
            continue
        if isinstance(parent, (exp.EQ, exp.NEQ, exp.GT, exp.GTE, exp.LT, exp.LTE)):
            for side in ("this", "expression"):  # a = b COLLATE NOCASE: lower(a) = lower(b)
                parent.set(side, exp.Lower(this=parent.args[side]))
        elif isinstance(parent, exp.Ordered):
            parent.set("this", exp.Lower(this=parent.this))
    for ident in tree.find_all(exp.Identifier):
        ident.set("this", str(ident.this).lower())
        ident.set("quoted", True)
    return tree.sql(dialect="postgres", comments=False)
