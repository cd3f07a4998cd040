"""Shared pieces of the interop suite: the test schema, row builders, an independent in-memory
model of what a table must contain, readers for each foreign client, and order-insensitive
comparison.

The model (``Model``) applies appends, overwrites, deletes and updates with pyarrow compute on a
plain Table, so a reader's answer is checked against something deltatx did not produce.

Foreign readers avoid deltalake's ``to_pyarrow_table()`` / ``to_pandas()``: they can abort the
interpreter at exit (delta-rs #2184). deltalake is read through ``pyarrow.table(dt.scan())``.
"""

from __future__ import annotations

import os
import shutil
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta, timezone
from typing import Any, Callable

import pyarrow as pa
import pyarrow.compute as pc
from duckdb_delta import duckdb_delta_extension, read_duckdb  # noqa: F401 - re-exported

SCHEMA = pa.schema([
    ("id", pa.int64()),
    ("part", pa.int32()),
    ("value", pa.float64()),
    ("name", pa.string()),
    ("flag", pa.bool_()),
    ("day", pa.date32()),
    ("ts", pa.timestamp("us", tz="UTC")),
])

EPOCH_DAY = date(2024, 1, 1)
EPOCH_TS = datetime(2024, 1, 1, tzinfo=timezone.utc)


def rows(start: int, n: int, part: int | None = None, parts: int = 3, tag: str = "n") -> pa.Table:
    """``n`` rows with ids ``start..start+n-1``; ``part`` fixed, or ``id % parts`` when None.

    Every column has a few nulls (never ``id`` or ``part``) so null handling is exercised.
    """
    ids = list(range(start, start + n))
    return pa.table({
        "id": ids,
        "part": [part if part is not None else i % parts for i in ids],
        "value": [None if i % 7 == 3 else i * 0.5 for i in ids],
        "name": [None if i % 11 == 5 else f"{tag}{i}" for i in ids],
        "flag": [None if i % 13 == 4 else i % 2 == 0 for i in ids],
        "day": [EPOCH_DAY + timedelta(days=i % 40) for i in ids],
        "ts": [EPOCH_TS + timedelta(seconds=i * 61, microseconds=i) for i in ids],
    }, schema=SCHEMA)


# ---------------------------------------------------------------------------------- comparison
def _normalise_field(f: pa.Field, name: str | None = None) -> pa.Field:
    return pa.field(name if name is not None else f.name, _normalise_type(f.type), f.nullable)


def _normalise_type(t: pa.DataType) -> pa.DataType:
    """One spelling per logical type, recursively (list item names, map/struct children too)."""
    if pa.types.is_large_string(t) or pa.types.is_string_view(t):
        return pa.string()
    if pa.types.is_large_binary(t) or pa.types.is_binary_view(t):
        return pa.binary()
    if pa.types.is_dictionary(t):
        return _normalise_type(t.value_type)
    if pa.types.is_timestamp(t) and t.tz in ("Etc/UTC", "+00:00", "UTC"):
        return pa.timestamp(t.unit, tz="UTC")
    if pa.types.is_map(t):
        return pa.map_(_normalise_type(t.key_type), _normalise_type(t.item_type))
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_list_view(t) \
            or pa.types.is_large_list_view(t):
        return pa.list_(_normalise_field(t.value_field, "item"))
    if pa.types.is_struct(t):
        return pa.struct([_normalise_field(t.field(i)) for i in range(t.num_fields)])
    return t


def normalise(table: pa.Table | pa.RecordBatchReader) -> pa.Table:
    """View/large strings → string, dictionaries → values, ``Etc/UTC`` → ``UTC``; one chunk."""
    if isinstance(table, pa.RecordBatchReader):
        table = table.read_all()
    schema = pa.schema([pa.field(f.name, _normalise_type(f.type), f.nullable) for f in table.schema])
    columns = [table.column(i).cast(f.type) for i, f in enumerate(schema)]
    return pa.Table.from_arrays(columns, schema=schema).combine_chunks()


def sort_by_id(table: pa.Table) -> pa.Table:
    return table.sort_by([("id", "ascending")]) if table.num_rows else table


def _without_nullability(schema: pa.Schema) -> list[tuple[str, str]]:
    """Names and types, ignoring nullability (readers disagree on it for nested children)."""
    return [(f.name, str(f.type).replace(" not null", "")) for f in schema]


def assert_same_rows(actual: Any, expected: pa.Table, label: str) -> None:
    """Same column names, types (after normalising) and rows, regardless of row order."""
    got = normalise(actual)
    want = normalise(expected)
    assert _without_nullability(got.schema) == _without_nullability(want.schema), (
        f"{label}: schema differs\n got: {got.schema}\nwant: {want.schema}"
    )
    got, want = sort_by_id(got), sort_by_id(want)
    if got.num_rows != want.num_rows:
        got_ids, want_ids = set(got["id"].to_pylist()), set(want["id"].to_pylist())
        raise AssertionError(
            f"{label}: {got.num_rows} rows, expected {want.num_rows}; "
            f"extra ids {sorted(got_ids - want_ids)[:10]}, missing ids {sorted(want_ids - got_ids)[:10]}"
        )
    for name in want.column_names:
        a, b = got[name], want[name]
        if not a.equals(b):
            bad = [i for i, (x, y) in enumerate(zip(a.to_pylist(), b.to_pylist())) if x != y][:5]
            raise AssertionError(
                f"{label}: column {name!r} differs at sorted rows {bad}: "
                f"got {[a[i].as_py() for i in bad]}, expected {[b[i].as_py() for i in bad]}"
            )


# ---------------------------------------------------------------------------------- the model
@dataclass
class Model:
    """Expected contents of a table at each version, computed with pyarrow only."""

    schema: pa.Schema = SCHEMA
    versions: list[pa.Table] = field(default_factory=list)

    @property
    def current(self) -> pa.Table:
        return self.versions[-1] if self.versions else self.schema.empty_table()

    def record(self, table: pa.Table, version: int) -> None:
        """Store the contents of ``version`` (versions with no data change repeat the last one)."""
        while len(self.versions) < version:
            self.versions.append(self.current)
        assert len(self.versions) == version, f"model is at {len(self.versions)}, commit says {version}"
        self.versions.append(table.cast(self.schema))

    def append(self, data: pa.Table, version: int) -> None:
        self.record(pa.concat_tables([self.current, data.cast(self.schema)]), version)

    def delete(self, mask: Callable[[pa.Table], pa.ChunkedArray], version: int) -> None:
        cur = self.current
        self.record(cur.filter(pc.invert(pc.fill_null(mask(cur), False))), version)

    def replace_where(self, mask: Callable[[pa.Table], pa.ChunkedArray], data: pa.Table, version: int) -> None:
        cur = self.current
        kept = cur.filter(pc.invert(pc.fill_null(mask(cur), False)))
        self.record(pa.concat_tables([kept, data.cast(self.schema)]), version)

    def update(self, mask: Callable[[pa.Table], pa.ChunkedArray], column: str,
               new_value: Callable[[pa.Table], pa.ChunkedArray], version: int) -> None:
        cur = self.current
        hit = pc.fill_null(mask(cur), False)
        col = pc.if_else(hit, new_value(cur), cur[column])
        self.record(cur.set_column(cur.schema.get_field_index(column), column, col), version)


# ---------------------------------------------------------------------------------- a deltatx-written table
def build_deltatx_table(uri: str, partitioned: bool, storage_options: dict[str, Any] | None = None,
                        checkpoint_interval: int = 3) -> Model:
    """Create a table with deltatx and run appends, replaceWhere, delete, update and a full
    overwrite on it; checkpoints every ``checkpoint_interval`` commits. Returns the model."""
    import deltatx

    model = Model()
    t = deltatx.create_table(uri, SCHEMA, partition_by=["part"] if partitioned else None,
                             properties={"delta.checkpointInterval": str(checkpoint_interval)},
                             storage_options=storage_options)
    model.record(SCHEMA.empty_table(), t.version)

    for start in (0, 30, 60):
        batch = rows(start, 30)
        model.append(batch, t.append(batch).version)

    # replaceWhere: part 1 is replaced with fresh rows of part 1
    fresh = rows(1000, 12, part=1, tag="r")
    res = t.overwrite(fresh, where="part = 1")
    model.replace_where(lambda tb: pc.equal(tb["part"], 1), fresh, res.version)

    res = t.delete(where="id >= 10 AND id < 40")
    model.delete(lambda tb: pc.and_(pc.greater_equal(tb["id"], 10), pc.less(tb["id"], 40)), res.version)

    res = t.update(where="part = 2", set={"value": "value * 2"})
    model.update(lambda tb: pc.equal(tb["part"], 2), "value", lambda tb: pc.multiply(tb["value"], 2.0),
                 res.version)

    batch = rows(2000, 9, tag="late")
    model.append(batch, t.append(batch).version)

    res = t.delete(where="name IS NULL")
    model.delete(lambda tb: pc.is_null(tb["name"]), res.version)
    return model


def deltatx_log_names(uri: str) -> list[str]:
    return sorted(os.listdir(os.path.join(uri, "_delta_log")))


def assert_has_checkpoint(uri: str) -> int:
    """The local table at ``uri`` has at least one classic checkpoint; returns the newest version."""
    names = deltatx_log_names(uri)
    checkpoints = [int(n.split(".")[0]) for n in names if ".checkpoint." in n and n.endswith(".parquet")]
    assert checkpoints, f"no checkpoint in {names}"
    assert "_last_checkpoint" in names
    return max(checkpoints)


# ---------------------------------------------------------------------------------- foreign readers
def copy_with_checkpoint_only(uri: str, dest: str) -> str:
    """Copy a local table and drop every commit up to its newest checkpoint: the checkpoint must
    then carry the whole state for any reader."""
    shutil.copytree(uri, dest)
    drop_commits_up_to(dest, assert_has_checkpoint(dest))
    return dest


def drop_commits_up_to(uri: str, last: int) -> None:
    """Delete the JSON commits of versions ≤ ``last`` (what log cleanup does)."""
    log = os.path.join(uri, "_delta_log")
    for name in os.listdir(log):
        if name.endswith(".json") and int(name.split(".")[0]) <= last:
            os.remove(os.path.join(log, name))


def read_deltalake(uri: str, version: int | None = None, storage_options: dict[str, str] | None = None) -> pa.Table:
    from deltalake import DeltaTable

    dt = DeltaTable(uri, version=version, storage_options=storage_options)
    return pa.table(dt.scan())


def read_polars(uri: str, version: int | None = None) -> pa.Table:
    import polars as pl

    if version is None:
        return pl.read_delta(uri).to_arrow()
    return pl.scan_delta(uri, version=version).collect().to_arrow()


def deltalake_storage_options(s3_options: dict[str, Any]) -> dict[str, str]:
    """The s3fs-style options of the ``s3_server`` fixture, spelled for delta-rs."""
    return {
        "AWS_ENDPOINT_URL": s3_options["endpoint_url"],
        "AWS_ACCESS_KEY_ID": s3_options["key"],
        "AWS_SECRET_ACCESS_KEY": s3_options["secret"],
        "AWS_REGION": s3_options.get("client_kwargs", {}).get("region_name", "us-east-1"),
        "AWS_ALLOW_HTTP": "true",
    }
