"""Bad input the audit of this session found leaking untyped errors, each now a typed one that
names what is wrong, with nothing written: a corrupt data file under a merge-on-read point
DELETE, a predicate whose CAST fails on a new row (replaceWhere) or a change row, data or
arguments of the wrong kind, and a log file that cannot replace its name."""

from __future__ import annotations

import os

import pyarrow as pa
import pytest

import deltatx
from deltatx.cli import EXIT_USAGE, main
from deltatx.errors import (ArgumentTypeError, CorruptDataFileError, InvalidArgumentError, InvalidConstraintError,
                            PredicateError, TimeTravelError)

SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string())])


def _table(uri: str, **properties: str) -> deltatx.Table:
    table = deltatx.create_table(uri, SCHEMA, properties=properties or None)
    table.append(pa.table({"id": list(range(10)), "name": [f"n{i}" for i in range(10)]}, schema=SCHEMA))
    return table


def _log(uri: str) -> list[str]:
    return sorted(os.listdir(os.path.join(uri, "_delta_log")))


@pytest.mark.parametrize("where", ["id = 5", "name = 'n5'"], ids=["point-read", "general-read"])
def test_a_truncated_data_file_under_a_dv_delete_is_named(table_uri, where):
    table = _table(table_uri, **{"delta.enableDeletionVectors": "true"})
    path = table.files()["path"][0].as_py()
    location = os.path.join(table_uri, path)
    with open(location, "r+b") as fh:
        fh.truncate(os.path.getsize(location) // 2)
    log = _log(table_uri)
    with pytest.raises(CorruptDataFileError, match="not a readable Parquet file") as info:
        deltatx.Table(table_uri).delete(where=where)
    assert path in str(info.value)  # which file, not only which table
    with pytest.raises(CorruptDataFileError):
        deltatx.Table(table_uri).overwrite(pa.table({"id": [5], "name": ["n5"]}, schema=SCHEMA), where=where)
    assert _log(table_uri) == log


def test_a_cast_that_fails_on_a_row_is_a_predicate_error_everywhere(table_uri, capsys):
    table = _table(table_uri, **{"delta.enableChangeDataFeed": "true"})
    log = _log(table_uri)
    new = pa.table({"id": [1], "name": ["x"]}, schema=SCHEMA)
    with pytest.raises(PredicateError, match="cannot be evaluated"):
        table.overwrite(new, where="name > 5")  # 'x' cannot be a number: the replaceWhere check
    with pytest.raises(PredicateError, match="cannot be evaluated"):
        table.overwrite(new, where="CAST(name AS DATE) = DATE '2024-01-01'")
    with pytest.raises(PredicateError, match="cannot be evaluated"):
        table.changes(starting_version=1, where="name > 5")
    with pytest.raises(PredicateError, match="cannot be evaluated"):
        table.changes(starting_version=1, where="_change_type = 'insert' AND name > 5")  # filtered after
    assert _log(table_uri) == log
    assert main(["changes", table_uri, "--from", "1", "--where", "name > 5"]) == EXIT_USAGE
    err = capsys.readouterr().err
    assert "PredicateError" in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_arguments_of_the_wrong_kind_are_typed(table_uri):
    table = _table(table_uri)
    version = table.version
    with pytest.raises(ArgumentTypeError, match="cannot write dict") as info:
        table.append({"id": [5]})
    assert isinstance(info.value, TypeError)  # what code catching TypeError expects
    with pytest.raises(ArgumentTypeError, match="cannot write str"):
        table.merge("x", on="t.id = s.id").when_matched_update_all().execute()
    with pytest.raises(InvalidArgumentError, match="app_version must be an integer"):
        table.append(pa.table({"id": [5], "name": ["x"]}, schema=SCHEMA), app_id="job", app_version="y")
    for call in (lambda: table.optimize(where=42), lambda: table.delete(where=42),
                 lambda: table.merge(pa.table({"id": [1], "name": ["x"]}, schema=SCHEMA), on=42)
                 .when_matched_update_all().execute()):
        with pytest.raises(ArgumentTypeError, match="must be SQL text"):
            call()
    assert deltatx.Table(table_uri).version == version
    assert table.to_arrow(columns="id").column_names == ["id"]  # one name, not its letters


def test_a_log_file_that_cannot_take_its_name_leaves_no_temp_file(table_uri):
    table = _table(table_uri)
    os.mkdir(os.path.join(table_uri, "_delta_log", "_last_checkpoint"))  # a folder where the file goes
    before = _log(table_uri)
    with pytest.raises(OSError):
        table.store.write_log_file("_last_checkpoint", b"{}")
    assert _log(table_uri) == before


def test_a_constraint_the_rows_cannot_evaluate_is_named(table_uri):
    table = _table(table_uri)
    version = table.version
    with pytest.raises(InvalidConstraintError, match=r"CHECK constraint 'c1' \(name > 5\) cannot be evaluated"):
        table.add_constraint("c1", "name > 5")  # 'n0' is not a number
    assert deltatx.Table(table_uri).version == version


def test_an_unparseable_timestamp_uses_deltas_wording(table_uri):
    _table(table_uri)
    with pytest.raises(TimeTravelError, match=r"The provided timestamp \('05/04/1999'\) cannot be converted to a "
                                              r"valid timestamp"):
        deltatx.Table(table_uri, timestamp="05/04/1999")
