"""Arguments of the DeltaTable API: delta-spark's checks, and pyspark Columns as deltatx SQL text.

Why a module of its own: every DeltaTable call takes conditions and ``{column: value}`` maps "as
SQL strings or pyspark Columns", and must refuse bad ones exactly as delta-spark does (same
exception kinds, same message openings, so code written against delta-spark behaves the same),
but with deltatx's typed errors (``ArgumentTypeError`` is a ``TypeError``, ``InvalidArgumentError``
a ``ValueError``).

A string goes to deltatx's SQL parser as is. A Column has no SQL text of its own in Spark 4 (its
unresolved tree prints operators as functions: ``=(key, 'b')``), so it is *analyzed* — never
executed — against a DataFrame with the columns it may name (:class:`ColumnScope`: the target's
schema as an empty local relation, plus the MERGE source), and the resolved expression's
``sql()`` is what deltatx parses: ``(t.value = CAST('1' AS BIGINT))``. Spark's own type coercion
and name resolution thereby apply to Columns, deltatx's to strings. Timestamp literals in
Columns are rendered in the session time zone, which deltatx reads as UTC: keep
``spark.sql.session.timeZone`` at UTC (``deltatx.spark.session`` does) or pass strings.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import pyarrow as pa

from ..errors import ArgumentTypeError, InvalidArgumentError, PredicateError, UnsupportedOperationError
from ..expr import parse_expression, strip_alias

ConditionLike = Any  # str | pyspark.sql.Column
ValueLike = Any  # str | pyspark.sql.Column


def _is_column(value: Any) -> bool:
    from pyspark.sql import Column

    return isinstance(value, Column)


def check_condition(condition: ConditionLike, argname: str = "'condition'") -> ConditionLike:
    """``condition`` if it is None, a SQL string or a Column; delta-spark's TypeError otherwise."""
    if condition is None or isinstance(condition, str) or _is_column(condition):
        return condition
    raise ArgumentTypeError(f"{argname} must be a Spark SQL Column or a string (expression in SQL syntax), "
                            f"found to be of type {type(condition)}")


def check_mapping(mapping: Mapping[str, ValueLike] | None, argname: str) -> dict[str, ValueLike]:
    """A ``{column name: SQL string or Column}`` dict, checked as delta-spark checks ``set``/``values``."""
    if mapping is None:
        raise InvalidArgumentError(f"{argname} cannot be None")
    if type(mapping) is not dict:
        raise ArgumentTypeError(f"{argname} must be a dict, found to be {type(mapping)}")
    for key, value in mapping.items():
        if type(key) is not str:
            raise ArgumentTypeError(f"Keys of dict in {argname} must contain only strings with column names, "
                                    f"found '{key}' of type '{type(key)}'")
        if not (isinstance(value, str) or _is_column(value)):
            raise ArgumentTypeError(f"Values of dict in {argname} must contain only Spark SQL Columns or strings "
                                    f"(expressions in SQL syntax) as values, found '{value}' of type '{type(value)}'")
    return dict(mapping)


def check_str(value: Any, what: str) -> str:
    """delta-spark's builder check (``TypeError: <what> must be str. Found ...``)."""
    if type(value) is not str:
        raise ArgumentTypeError(f"{what} must be str. Found {value} with type {type(value)}")
    return value


def column_names(cols: tuple[Any, ...], what: str) -> list[str]:
    """``f("a", "b")`` or ``f(["a", "b"])`` as a list of names (``partitionedBy``, ``executeZOrderBy``)."""
    if len(cols) == 1 and isinstance(cols[0], (list, tuple)):
        cols = tuple(cols[0])
    return [check_str(c, what) for c in cols]


class ColumnScope:
    """Turns Columns into SQL text by analyzing them where they will be evaluated.

    ``target_schema`` becomes an empty local relation (no job, no file read), aliased
    ``target_alias`` when given; ``source`` (a MERGE's source DataFrame) is cross-joined to it
    under ``source_alias``. The scope DataFrame is built once, on the first Column.
    """

    def __init__(self, spark: Any, target_schema: pa.Schema, target_alias: str | None = None,
                 source: Any = None, source_alias: str | None = None, table_frames: Sequence[Any] = ()):
        self.spark = spark
        self.target_schema = target_schema
        self.target_alias = target_alias
        self.source = source
        self.source_alias = source_alias
        #: DataFrames the table's ``toDF()`` returned lately, oldest first (a live view: a MERGE
        #: builder's clauses may call toDF() after the scope was made); a Column bound to one
        #: (``dt.toDF().id``) resolves against it when the schema alone cannot resolve it
        self.table_frames = table_frames
        self._frame: Any = None

    def frame(self, target: Any = None) -> Any:
        """The scope: the target (an empty relation of its schema, or ``target``) aliased, with the
        MERGE source cross-joined. Only the default one is kept."""
        if target is None and self._frame is not None:
            return self._frame
        from pyspark.sql import DataFrame

        from .options import arrow_schema_to_spark

        if target is None:
            jsession = self.spark._jsparkSession
            jschema = jsession.parseDataType(arrow_schema_to_spark(self.target_schema).json())
            target = DataFrame(jsession.createDataFrame(self.spark._jvm.java.util.ArrayList(), jschema), self.spark)
            keep = True
        else:
            keep = False
        if self.target_alias:
            target = target.alias(self.target_alias)
        if self.source is not None:
            source = self.source.alias(self.source_alias) if self.source_alias else self.source
            target = target.crossJoin(source)
        if keep:
            self._frame = target
        return target

    def sql(self, value: str | Any) -> str:
        """SQL text for a string (unchanged) or a Column (analyzed in this scope)."""
        if isinstance(value, str):
            return value
        try:
            analyzed = self.frame().select(value)._jdf.queryExecution().analyzed()
        except Exception as exc:  # AnalysisException: a name the scope does not have, a bad call
            analyzed = self._analyzed_over_table_frames(value)
            if analyzed is None:
                raise PredicateError(f"cannot resolve the Column {value} against the table"
                                     f"{' and the MERGE source' if self.source is not None else ''}: "
                                     f"{_first_line(exc)}") from None
        expression = analyzed.projectList().head()
        if expression.nodeName() == "Alias":
            expression = expression.child()
        return str(self._qualified(expression, analyzed.child()).sql())

    def _analyzed_over_table_frames(self, value: Any) -> Any:
        """``value`` analyzed with one of :attr:`table_frames` as the target, or None."""
        for frame in reversed(list(self.table_frames)):  # the newest first
            try:
                return self.frame(frame).select(value)._jdf.queryExecution().analyzed()
            except Exception:  # bound to another frame, or not resolvable at all
                continue
        return None

    def _qualified(self, expression: Any, scope_plan: Any) -> Any:
        """``expression`` with every attribute of the scope named as deltatx binds it.

        Why: a Column bound to a DataFrame (``updates.value``, ``updates["value"]``) is resolved
        by its expression id, and prints without a qualifier (``value``), which deltatx would
        read as the target's column or as ambiguous. Each attribute of the target side is
        qualified with the target alias (or none), each of the source with the source alias."""
        sides = [scope_plan.left(), scope_plan.right()] if self.source is not None else [scope_plan]
        aliases = [self.target_alias, self.source_alias] if self.source is not None else [self.target_alias]
        owner: dict[int, str | None] = {}
        for side, alias in zip(sides, aliases):
            output = side.output()
            for i in range(output.size()):
                owner[output.apply(i).exprId().id()] = alias
        references = expression.references().toSeq()
        if self.source is not None and self.table_frames:
            self._refuse_shared_ids([references.apply(i) for i in range(references.size())], sides[1])
        if not any(_needs_qualifier(references.apply(i), owner) for i in range(references.size())):
            return expression
        return self._requalify(expression, owner)

    def _refuse_shared_ids(self, references: list[Any], source_plan: Any) -> None:
        """A source derived from the table's own ``toDF()`` frame carries that frame's ids: a
        Column of the frame then names both sides of the MERGE (delta-spark reports it as
        ambiguous too), never silently the source."""
        source_ids = {source_plan.output().apply(i).exprId().id() for i in range(source_plan.output().size())}
        frame_ids: set[int] = set()
        for frame in list(self.table_frames):
            output = frame._jdf.queryExecution().analyzed().output()
            frame_ids.update(output.apply(i).exprId().id() for i in range(output.size()))
        for attribute in references:
            key = attribute.exprId().id()
            if key in source_ids and key in frame_ids:
                raise PredicateError(
                    f"the Column {attribute.name()!r} is ambiguous: the MERGE source was derived from the table's "
                    f"own toDF(), so it names both the target and the source; alias the source "
                    f"(source.alias('s')) and name columns as strings or col('s.{attribute.name()}')")

    def _requalify(self, expression: Any, owner: dict[int, str | None]) -> Any:
        if expression.nodeName() == "AttributeReference":
            key = expression.exprId().id()
            if key not in owner:
                return expression
            return expression.withQualifier(self._scala_seq([owner[key]] if owner[key] else []))
        children = expression.children()
        if children.size() == 0:
            return expression
        return expression.withNewChildren(self._scala_seq(
            [self._requalify(children.apply(i), owner) for i in range(children.size())]))

    def _scala_seq(self, items: list[Any]) -> Any:
        jlist = self.spark._jvm.java.util.ArrayList()
        for item in items:
            jlist.add(item)
        return self.spark._jvm.scala.jdk.javaapi.CollectionConverters.asScala(jlist).toList()


def _needs_qualifier(attribute: Any, owner: dict[int, str | None]) -> bool:
    """Does this scope attribute print with another qualifier than deltatx binds it under?"""
    key = attribute.exprId().id()
    if key not in owner:
        return False
    qualifier = attribute.qualifier()
    wanted = owner[key]
    if not wanted:
        return qualifier.size() > 0
    return not (qualifier.size() == 1 and str(qualifier.head()) == wanted)


def unaliased_sql(sql: str, alias: str | None) -> str:
    """``sql`` with the target alias dropped (``t.key = 1`` -> ``key = 1``): DELETE and UPDATE
    bind to the bare table schema, while delta-spark lets an aliased table's conditions use it."""
    if not alias:
        return sql
    return str(strip_alias(parse_expression(sql), alias))


def unaliased_column(name: str, alias: str | None) -> str:
    """A SET key ``t.value`` of an aliased table as ``value``."""
    if alias and name.lower().startswith(alias.lower() + "."):
        return name[len(alias) + 1:]
    return name


def dataframe_alias(df: Any) -> str | None:
    """The alias under which Spark would resolve ``alias.col`` against ``df``, or None.

    ``df.alias("s")`` is a SubqueryAlias node, but it need not be the top one:
    ``updates.alias("s").where(...)`` / ``.dropDuplicates()`` / ``.select(...)`` put nodes above
    it, and Spark still resolves ``s.id`` because the attributes those nodes pass through keep
    the qualifier ``s``. So the alias is read where Spark reads it — the qualifiers of the
    analyzed plan's output attributes (one-part ones only: a catalog table's
    ``spark_catalog.db.t`` is its name, not an alias the user chose). Columns computed above the
    alias carry none and do not count. Several different
    qualifiers (a join of two aliased frames) name no single alias: deltatx binds the whole
    source under one name, so :class:`UnsupportedOperationError` says to alias the result.
    """
    plan = df._jdf.queryExecution().analyzed()
    if plan.nodeName() == "SubqueryAlias":
        return str(plan.alias())
    found: list[str] = []
    output = plan.output()
    for i in range(output.size()):
        qualifier = output.apply(i).qualifier()
        if qualifier.size() != 1:  # none, or a catalog table's (catalog, db, name): not an alias
            continue
        name = str(qualifier.head())
        if name not in found:
            found.append(name)
    if len(found) > 1:
        raise UnsupportedOperationError(
            f"the MERGE source's columns come from several aliases {found}; deltatx binds the source "
            f"under one alias: give the source one as its last step, e.g. source.alias('s')"
        )
    return found[0] if found else None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
