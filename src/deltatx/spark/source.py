"""The ``deltatx`` Spark data source: the class Spark instantiates for ``format("deltatx")``.

Only dispatch lives here: the schema of a read, and which reader / writer / streaming writer a
read or write gets. Spark creates a fresh instance (from the options) in a Python worker for each
of these calls, and pickles it between processes, so it holds nothing but its options.
"""

from __future__ import annotations

from typing import Any

from pyspark.sql.datasource import DataSource

from .change_feed import ChangeFeedReader, change_feed_spec, resolve_and_pin, wants_change_feed
from .change_stream import ChangeFeedStreamReader
from .options import PINNED_VERSION_OPTION, read_schema_to_spark, read_spec
from .reader import DeltaTxReader, open_table, select_columns, with_row_tracking_metadata
from .stream_source import DeltaTxStreamReader, refuse_unsupported_source_options, stream_read_spec
from .streaming import DeltaTxStreamWriter, plan_stream
from .writer import DeltaTxWriter, plan_write

FORMAT_NAME = "deltatx"


class DeltaTxDataSource(DataSource):
    """``spark.read/write(Stream).format("deltatx")`` and ``CREATE TEMPORARY VIEW ... USING deltatx``."""

    @classmethod
    def name(cls) -> str:
        return FORMAT_NAME

    def schema(self) -> Any:
        """The table's schema as of the requested version (only the ``columns`` option's, if set;
        with ``.option("readRowTracking", "true")`` also Spark's ``_metadata`` struct of
        ``row_id`` and ``row_commit_version``, so ``select("_metadata.row_id")`` works as in Delta).

        Also pins the version: Spark pickles this instance after ``schema()`` and reuses it for
        every scan of the DataFrame (or temporary view), and caches the planned read of a relation
        (Spark 4.3), so all scans of one ``load()`` read the same version, as a snapshot.
        """
        refuse_unsupported_source_options(self.options)
        if wants_change_feed(self.options):  # readChangeFeed: the range is pinned instead
            return resolve_and_pin(self.options)
        spec = read_spec(self.options)
        table = open_table(spec)
        self.options[PINNED_VERSION_OPTION] = str(table.version)
        schema = select_columns(table.schema, spec.columns)
        if spec.row_tracking:
            schema = with_row_tracking_metadata(schema, table)
        return read_schema_to_spark(schema)

    def reader(self, schema: Any) -> DeltaTxReader | ChangeFeedReader:
        if wants_change_feed(self.options):
            return ChangeFeedReader(change_feed_spec(self.options), schema)
        return DeltaTxReader(read_spec(self.options), schema)

    def writer(self, schema: Any, overwrite: bool) -> DeltaTxWriter:
        return DeltaTxWriter(plan_write(self.options, schema, overwrite))

    def streamWriter(self, schema: Any, overwrite: bool) -> DeltaTxStreamWriter:
        return DeltaTxStreamWriter(plan_stream(self.options, schema, overwrite))

    def streamReader(self, schema: Any) -> DeltaTxStreamReader | ChangeFeedStreamReader:
        if wants_change_feed(self.options):
            return ChangeFeedStreamReader(stream_read_spec(self.options), schema)
        return DeltaTxStreamReader(stream_read_spec(self.options), schema)
