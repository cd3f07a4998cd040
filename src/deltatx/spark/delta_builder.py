"""delta-spark's ``DeltaTableBuilder``: ``DeltaTable.create(spark).location(p).addColumn(...).execute()``.

Four modes, as in Delta: ``create`` (error if a table exists), ``createIfNotExists`` (keep an
existing table untouched), ``replace`` (error if none exists) and ``createOrReplace``. A new table
is the core's ``create_table`` (version 0: protocol + metaData); replacing is one commit of the
core's :func:`~deltatx.tables.ops.replace_table.stage_replace_table` (all files removed, the new
definition in place, the protocol never lowered).

deltatx tables are path tables: ``tableName("db.t")`` is refused with
:class:`UnsupportedOperationError` (``tableName("delta.`/path`")`` is read as the location).
Creating a table over a folder that holds files but no table is refused too
(:class:`LocationNotEmptyError`): VACUUM would later delete those files as unreferenced, and Delta
refuses it for the same reason. Column comments and generation expressions go to the column's
metadata as Delta stores them (``comment``, ``delta.generationExpression``); identity columns
(:class:`IdentityGenerator`) and ``clusterBy`` are the core's ``create_table(identity_columns=,
cluster_by=)``, so the table is exactly what the Python API would create; a table feature the
definition needs that deltatx cannot write fails with ``UnsupportedFeatureError`` before anything
is written.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from ..errors import (
    ArgumentTypeError,
    InvalidArgumentError,
    SchemaMismatchError,
    TableAlreadyExistsError,
    TableNotFoundError,
    UnsupportedOperationError,
)
from ..tables.column_rules import define_column_rules
from ..tables.ops.replace_table import stage_replace_table
from ..tables.table import Table, create_table
from ..txnlog.store import open_store
from .conf import USER_METADATA, session_value
from .delta_args import check_str, column_names
from .options import spark_schema_to_arrow
from .spark_errors import raises_spark_errors

CREATE, CREATE_IF_NOT_EXISTS, REPLACE, CREATE_OR_REPLACE = "create", "createIfNotExists", "replace", "createOrReplace"

_PATH_IDENTIFIER = re.compile(r"^\s*(\w+)\.`(.+)`\s*$", re.S)


def path_identifier(identifier: str, fmt: str) -> str | None:
    """The path of a ``<fmt>.`<path>``` identifier (``delta.`/data/t```), else None."""
    m = _PATH_IDENTIFIER.match(identifier)
    return m.group(2) if m is not None and m.group(1).lower() == fmt else None


@dataclass
class IdentityGenerator:
    """delta-spark's ``IdentityGenerator``: an identity column's ``start`` and ``step``.

    ``addColumn(..., generatedAlwaysAs=IdentityGenerator())`` (no explicit values) or
    ``generatedByDefaultAs=IdentityGenerator(start, step)`` (explicit values allowed). delta-spark's
    own ``delta.tables.IdentityGenerator`` is accepted as well.
    """

    start: int = 1
    step: int = 1


def _is_identity_generator(value: Any) -> bool:
    """Ours, or delta-spark's class of the same name (no import of delta-spark needed)."""
    return isinstance(value, IdentityGenerator) or (
        type(value).__name__ == "IdentityGenerator" and hasattr(value, "start") and hasattr(value, "step"))


def _identity_spec(generator: Any, always: bool) -> dict[str, Any]:
    """delta-spark's checks of an IdentityGenerator, then the core's identity_columns entry."""
    if type(generator.start) is not int:
        raise ArgumentTypeError(f"Column identity generation start must be int. Found {generator.start} with "
                                f"type {type(generator.start)}")
    if type(generator.step) is not int:
        raise ArgumentTypeError(f"Column identity generation step must be int. Found {generator.step} with "
                                f"type {type(generator.step)}")
    if generator.step == 0:
        raise InvalidArgumentError("Column identity generation step cannot be 0.")
    return {"start": generator.start, "step": generator.step, "always": always}


@raises_spark_errors
class DeltaTableBuilder:
    """Define a table (location, columns, partitioning or clustering, properties, comment);
    ``execute()`` makes it."""

    def __init__(self, spark: Any, mode: str):
        self._spark = spark
        self._mode = mode
        self._location: str | None = None
        self._fields: list[Any] = []
        self._partition_by: list[str] = []
        self._cluster_by: list[str] | None = None
        self._identity: dict[str, dict[str, Any]] = {}  # the core's identity_columns
        self._properties: dict[str, str] = {}
        self._comment: str | None = None

    # ------------------------------------------------------------------ definition
    def tableName(self, identifier: str) -> "DeltaTableBuilder":  # noqa: N802
        """Only ``delta.`<path>```: deltatx has no catalog, a table is its location."""
        check_str(identifier, "Identifier")
        path = path_identifier(identifier, "delta")
        if path is None:
            raise UnsupportedOperationError(
                f"tableName({identifier!r}): deltatx tables are path tables without a catalog; "
                f"use .location('<path>') (or tableName('delta.`<path>`'))"
            )
        self._location = path
        return self

    def location(self, location: str) -> "DeltaTableBuilder":
        self._location = check_str(location, "Location")
        return self

    def comment(self, comment: str) -> "DeltaTableBuilder":
        self._comment = check_str(comment, "Table comment")
        return self

    def addColumn(self, colName: str, dataType: Any, nullable: bool = True,  # noqa: N802,N803
                  generatedAlwaysAs: Any = None, generatedByDefaultAs: Any = None,  # noqa: N803
                  comment: str | None = None) -> "DeltaTableBuilder":
        """One column; ``dataType`` is a DDL type string (``"int"``, ``"decimal(10,2)"``) or a DataType.

        delta-spark 3.3's signature: ``generatedAlwaysAs`` is a generation expression (SQL text)
        or an :class:`IdentityGenerator` (GENERATED ALWAYS AS IDENTITY), ``generatedByDefaultAs``
        an IdentityGenerator (GENERATED BY DEFAULT AS IDENTITY); the core defines the identity
        column (a BIGINT, writer feature ``identityColumns``) when the table is created.
        """
        from pyspark.sql.types import DataType, StructField

        check_str(colName, "Column name")
        if type(dataType) is not str and not isinstance(dataType, DataType):
            raise ArgumentTypeError(f"Column data type must be str or DataType. Found {dataType} with type "
                                    f"{type(dataType)}")
        if type(nullable) is not bool:
            raise ArgumentTypeError(f"Column nullable must be bool. Found {nullable} with type {type(nullable)}")
        if generatedAlwaysAs is not None and generatedByDefaultAs is not None:
            raise InvalidArgumentError("generatedByDefaultAs and generatedAlwaysAs cannot both be set.")
        metadata: dict[str, str] = {}
        identity: dict[str, Any] | None = None
        if _is_identity_generator(generatedAlwaysAs):
            identity = _identity_spec(generatedAlwaysAs, always=True)
        elif generatedAlwaysAs is not None:
            if type(generatedAlwaysAs) is not str:
                raise ArgumentTypeError(f"Generated always as expression must be str or IdentityGenerator. "
                                        f"Found {generatedAlwaysAs} with type {type(generatedAlwaysAs)}")
            metadata["delta.generationExpression"] = generatedAlwaysAs
        if generatedByDefaultAs is not None:
            if not _is_identity_generator(generatedByDefaultAs):
                raise ArgumentTypeError(f"Generated by default expression must be IdentityGenerator. Found "
                                        f"{generatedByDefaultAs} with type {type(generatedByDefaultAs)}")
            identity = _identity_spec(generatedByDefaultAs, always=False)
        if comment is not None:
            metadata["comment"] = check_str(comment, "Column comment")
        data_type = _parse_type(dataType) if isinstance(dataType, str) else dataType
        self._fields.append(StructField(colName, data_type, nullable, metadata))
        if identity is not None:
            self._identity[colName] = identity
        return self

    def addColumns(self, cols: Any) -> "DeltaTableBuilder":  # noqa: N802
        """Columns of a StructType, or a list of StructFields."""
        from pyspark.sql.types import StructField, StructType

        if isinstance(cols, list):
            for c in cols:
                if type(c) is not StructField:
                    raise ArgumentTypeError(f"Column in existing schema must be StructField. Found {c} with type "
                                            f"{type(c)}")
            cols = StructType(cols)
        if type(cols) is not StructType:
            raise ArgumentTypeError(f"Schema must be StructType or a list of StructField. Found {cols} with type "
                                    f"{type(cols)}")
        self._fields.extend(cols.fields)
        return self

    def partitionedBy(self, *cols: Any) -> "DeltaTableBuilder":  # noqa: N802
        self._partition_by = column_names(cols, "Partitioning column")
        return self

    def clusterBy(self, *cols: Any) -> "DeltaTableBuilder":  # noqa: N802
        """Liquid clustering by ``cols`` (the core's ``create_table(cluster_by=...)``; not with
        ``partitionedBy``, at most 4 columns with statistics: ``ClusteringError`` otherwise)."""
        self._cluster_by = (self._cluster_by or []) + column_names(cols, "Clustering column")
        return self

    def property(self, key: str, value: str) -> "DeltaTableBuilder":
        if type(key) is not str or type(value) is not str:
            raise ArgumentTypeError(f"Key and value of property must be string. Found {key} with type {type(key)} "
                                    f"Found {value} with type {type(value)}")
        self._properties[key] = value
        return self

    # ------------------------------------------------------------------ execution
    def execute(self) -> Any:
        """Create / replace the table as the mode says; the DeltaTable of it."""
        from .delta_table import DeltaTable

        location = self._location
        if location is None:
            raise UnsupportedOperationError(
                "the table needs .location('<path>'): deltatx tables are path tables (no catalog names)"
            )
        schema = self._schema()
        store = open_store(location)
        exists = store.table_exists()
        if exists and self._mode == CREATE:
            raise TableAlreadyExistsError(f"Table delta.`{location}` already exists")
        if not exists and self._mode == REPLACE:
            raise TableNotFoundError(f"Table delta.`{location}` cannot be replaced as it did not exist; "
                                     f"use createOrReplace() to create it")
        if exists and self._mode == CREATE_IF_NOT_EXISTS:
            return DeltaTable.forPath(self._spark, location)
        if not exists:
            try:
                self._create(store, location, schema)
                return DeltaTable.forPath(self._spark, location)
            except TableAlreadyExistsError:  # created concurrently since the check above
                if self._mode == CREATE_IF_NOT_EXISTS:
                    return DeltaTable.forPath(self._spark, location)
                if self._mode != CREATE_OR_REPLACE:
                    raise
        self._replace(location, schema)
        return DeltaTable.forPath(self._spark, location)

    def _schema(self) -> Any:
        from pyspark.sql.types import StructType

        if not self._fields:
            raise SchemaMismatchError("the table has no columns: add them with addColumn() / addColumns()")
        names = [f.name.lower() for f in self._fields]
        twice = sorted({n for n in names if names.count(n) > 1})
        if twice:
            raise SchemaMismatchError(f"column(s) {twice} are defined more than once")
        return spark_schema_to_arrow(StructType(self._fields))

    def _create(self, store: Any, location: str, schema: Any) -> None:
        # create_table refuses a location holding files (LocationNotEmptyError), as Delta does
        create_table(location, schema, partition_by=self._partition_by, properties=self._properties,
                     description=self._comment, cluster_by=self._cluster_by,
                     identity_columns=dict(self._identity) or None)

    def _replace(self, location: str, schema: Any) -> None:
        if self._cluster_by is not None:
            raise UnsupportedOperationError(
                "clusterBy when replacing a table: deltatx's REPLACE does not define clustering yet; replace "
                "the table, then cluster it with deltatx.Table(path).cluster_by([...])"
            )
        properties = dict(self._properties)
        if self._identity:  # the identity field metadata, as create_table would define it
            schema, properties = define_column_rules(schema, properties, self._partition_by, None,
                                                     dict(self._identity))
        table = Table(location)
        tx = table.transaction(user_metadata=session_value(self._spark, USER_METADATA))
        operation = "REPLACE TABLE" if self._mode == REPLACE else "CREATE OR REPLACE TABLE"
        try:
            stage_replace_table(tx, schema, self._partition_by, properties, self._comment, operation=operation)
            tx.commit()
        except BaseException:
            tx.abort()
            raise


def _parse_type(ddl: str) -> Any:
    """A Spark DataType from a DDL type string; a bad one is InvalidArgumentError (a ValueError)."""
    from pyspark.errors import ParseException
    from pyspark.sql.types import _parse_datatype_string

    try:
        return _parse_datatype_string(ddl)
    except ParseException as exc:
        raise InvalidArgumentError(f"cannot parse column data type {ddl!r}: {str(exc).splitlines()[0]}") from None
