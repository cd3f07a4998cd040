"""Row groups chosen from the footer in Python agree with Arrow's fragment pruning."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from deltatx.expr import bind, parse_predicate, to_arrow
from deltatx.io.reader import _groups_by_footer

SCHEMA = pa.schema([("id", pa.int64()), ("small", pa.int16()), ("name", pa.string())])


@pytest.fixture(scope="module")
def parquet_file(tmp_path_factory) -> str:
    path = str(tmp_path_factory.mktemp("rg") / "f.parquet")
    ids = np.arange(10_000, dtype=np.int64)
    table = pa.table({"id": ids, "small": (ids % 300 - 150).astype(np.int16),
                      "name": [f"n{i % 7}" for i in range(10_000)]}, schema=SCHEMA)
    pq.write_table(table, path, row_group_size=1_000)
    return path


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_footer_choice_matches_arrows_fragment_pruning(parquet_file, data):
    path = parquet_file
    column = data.draw(st.sampled_from(["id", "small"]))
    op = data.draw(st.sampled_from(["=", "!=", "<", "<=", ">", ">="]))
    value = data.draw(st.integers(-200, 10_200))
    sql = f"{column} {op} {value}"
    if data.draw(st.booleans()):
        sql = f"({sql}) {data.draw(st.sampled_from(['AND', 'OR']))} id IN ({data.draw(st.integers(0, 9999))}, 5)"
    bound = bind(parse_predicate(sql), SCHEMA)
    pf = pq.ParquetFile(path)
    mine = _groups_by_footer(bound, pf)
    fragment = ds.ParquetFileFormat().make_fragment(path, filesystem=pafs.LocalFileSystem())
    arrows = [g.id for g in fragment.subset(filter=to_arrow(bound), schema=pf.schema_arrow).row_groups]
    assert mine is not None
    assert set(arrows) <= set(mine), sql  # never drops a group Arrow keeps
    # and keeps no more than the exact answer: groups holding a matching row
    exact = [g for g in range(pf.metadata.num_row_groups) if pf.read_row_group(g).filter(to_arrow(bound)).num_rows]
    assert set(exact) <= set(mine), sql


def test_predicates_outside_the_subset_use_arrows_pruning(parquet_file):
    pf = pq.ParquetFile(parquet_file)
    assert _groups_by_footer(bind(parse_predicate("name = 'n1'"), SCHEMA), pf) is None
    assert _groups_by_footer(bind(parse_predicate("id + 1 = 5"), SCHEMA), pf) is None
    assert _groups_by_footer(bind(parse_predicate("id = 4321"), SCHEMA), pf) == [4]
