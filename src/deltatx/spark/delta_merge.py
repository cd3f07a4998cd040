"""delta-spark's ``DeltaMergeBuilder`` over deltatx's Spark-distributed MERGE.

``DeltaTable.merge(source, condition)`` returns one; its ``when*`` calls check their arguments
as delta-spark does, turn Columns into SQL text (:mod:`deltatx.spark.delta_args`) and add the
clause to a :class:`~deltatx.spark.dml.SparkMergeBuilder`, whose ``execute()`` runs the MERGE as
Spark tasks and commits once. The semantics (clause order, conditions, NOT MATCHED BY SOURCE,
``*`` clauses, schema evolution, the cardinality check) are therefore the core's MERGE.
"""

from __future__ import annotations

from typing import Any

from ..errors import SchemaMismatchError
from ..tables.constraints import GENERATION_EXPRESSION
from ..txnlog.identity import START as IDENTITY_START
from .conf import AUTO_MERGE, USER_METADATA, session_flag, session_value
from .delta_args import ColumnScope, check_condition, check_mapping
from .delta_frames import merge_frame
from .dml import SparkMergeBuilder
from .spark_errors import raises_spark_errors


@raises_spark_errors
class DeltaMergeBuilder:
    """Collects WHEN clauses (any number, in order); :meth:`execute` runs the MERGE."""

    def __init__(self, spark: Any, builder: SparkMergeBuilder, scope: ColumnScope):
        self._spark = spark
        self._builder = builder
        self._scope = scope

    def _condition(self, condition: Any) -> str | None:
        condition = check_condition(condition)
        return self._scope.sql(condition) if condition is not None else None

    def _values(self, mapping: Any, argname: str) -> dict[str, str]:
        return {k: self._scope.sql(v) for k, v in check_mapping(mapping, argname).items()}

    def whenMatchedUpdate(self, condition: Any = None, set: Any = None) -> "DeltaMergeBuilder":  # noqa: A002,N802
        """Update matched target rows as ``set`` says (``{"col": "s.col + 1"}``), where ``condition`` holds."""
        values = self._values(set, "'set' in whenMatchedUpdate")
        self._builder.when_matched_update(values, self._condition(condition))
        return self

    def whenMatchedUpdateAll(self, condition: Any = None) -> "DeltaMergeBuilder":  # noqa: N802
        """Update every target column of a matched row from the same-named source column."""
        self._builder.when_matched_update_all(self._condition(condition))
        return self

    def whenMatchedDelete(self, condition: Any = None) -> "DeltaMergeBuilder":  # noqa: N802
        """Delete matched target rows where ``condition`` holds (all, without one)."""
        self._builder.when_matched_delete(self._condition(condition))
        return self

    def whenNotMatchedInsert(self, condition: Any = None, values: Any = None) -> "DeltaMergeBuilder":  # noqa: N802
        """Insert a row built by ``values`` for each source row that matched no target row."""
        mapped = self._values(values, "'values' in whenNotMatchedInsert")
        self._builder.when_not_matched_insert(mapped, self._condition(condition))
        return self

    def whenNotMatchedInsertAll(self, condition: Any = None) -> "DeltaMergeBuilder":  # noqa: N802
        """Insert unmatched source rows, target columns taken from the same-named source columns."""
        self._builder.when_not_matched_insert_all(self._condition(condition))
        return self

    def whenNotMatchedBySourceUpdate(self, condition: Any = None, set: Any = None) -> "DeltaMergeBuilder":  # noqa: A002,N802
        """Update target rows no source row matched (``set`` may only name target columns)."""
        values = self._values(set, "'set' in whenNotMatchedBySourceUpdate")
        self._builder.when_not_matched_by_source_update(values, self._condition(condition))
        return self

    def whenNotMatchedBySourceDelete(self, condition: Any = None) -> "DeltaMergeBuilder":  # noqa: N802
        """Delete target rows no source row matched, where ``condition`` holds."""
        self._builder.when_not_matched_by_source_delete(self._condition(condition))
        return self

    def withSchemaEvolution(self) -> "DeltaMergeBuilder":  # noqa: N802
        """Source columns the target lacks join the table, as in Delta: every one through an
        ``UPDATE SET *`` / ``INSERT *`` clause, and the ones an explicit assignment sets by name."""
        self._builder.with_schema_evolution()
        return self

    def execute(self) -> Any:
        """Run the MERGE (Spark tasks, one commit); a one-row DataFrame of Delta's MERGE metrics.

        The session confs delta-spark reads when a MERGE runs apply:
        ``spark.databricks.delta.schema.autoMerge.enabled=true`` is ``withSchemaEvolution()``, and
        ``spark.databricks.delta.commitInfo.userMetadata`` becomes the commit's userMetadata.
        """
        from . import activate

        if session_flag(self._spark, AUTO_MERGE):
            self._builder.with_schema_evolution()
        self._builder.user_metadata = session_value(self._spark, USER_METADATA)
        self._check_star_clauses()
        activate(self._spark)
        return merge_frame(self._spark, self._builder.execute())

    def _check_star_clauses(self) -> None:
        """Delta's resolution of ``UPDATE SET *`` / ``INSERT *`` without schema evolution
        (ResolveDeltaMergeInto): ``*`` stands for ``col = s.col`` for *every* target column, so a
        target column the source lacks cannot be resolved and the MERGE fails before it runs
        (DELTA_MERGE_UNRESOLVED_EXPRESSION). With schema evolution ``*`` means the source's
        columns, and a target column the source lacks keeps its value (update) or gets NULL
        (insert) — the core MERGE's behaviour, which deltatx's own API keeps in both cases.
        Generated and identity columns are left out of the check: the write computes them."""
        builder = self._builder
        if builder._schema_evolution:
            return
        stars = [c for c in builder._clauses if c.assignments is None and c.action in ("update", "insert")]
        if not stars:
            return
        source_columns = {str(c).lower() for c in builder._source.columns}
        target = self._scope.target_schema
        missing = [f.name for f in target if f.name.lower() not in source_columns and not _computed(f)]
        if missing:
            clause = "UPDATE" if stars[0].action == "update" else "INSERT"
            raise SchemaMismatchError(
                f"Cannot resolve {', '.join(f'`{m}`' for m in missing)} in {clause} clause given columns "
                f"{', '.join(builder._source.columns)}: UPDATE SET * / INSERT * assign every target column "
                f"from the source column of the same name. Add the column(s) to the source, list the "
                f"assignments explicitly, or enable schema evolution (withSchemaEvolution() or "
                f"{AUTO_MERGE}=true) to keep (update) or NULL (insert) the columns the source lacks"
            )


def _computed(field: Any) -> bool:
    """A generated or identity column (values the write computes), from its Delta field metadata."""
    keys = {k.decode() if isinstance(k, bytes) else str(k) for k in (field.metadata or {})}
    return GENERATION_EXPRESSION in keys or IDENTITY_START in keys
