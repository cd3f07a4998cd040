"""P13 — append 10M rows under two CHECK constraints and one generated column, vs the same append
without them (same run, same output).

The constrained table has ``delta.constraints.id_nonneg = id >= 0``,
``delta.constraints.value_range = value >= 0 AND value < 1e12`` and a generated column
``twice = id * 2`` (BIGINT); the data leaves ``twice`` out, so deltatx computes it and checks both
constraints in the write pass. The plain table has the same schema without rules and gets ``twice``
in the data: both runs store the same rows in the same files. Repetitions alternate plain and
constrained, each into a fresh table, partitioned by ``part`` like P6. The peer is deltalake doing
the constrained append (``write_deltalake`` into a table with the same constraints and generation
expression). One warm-up repetition is not counted; the order of the two deltatx runs alternates. Target: constrained ≤ 1.15× plain. Checks: row counts, the generated values, a
violating append refused with nothing written, and deltalake reading deltatx's table.
"""

from __future__ import annotations

import shutil

import pyarrow as pa
import pyarrow.compute as pc
from deltalake import DeltaTable, write_deltalake
from deltalake.schema import Field, PrimitiveType, Schema

import deltatx
from deltatx.errors import ConstraintViolationError

from .common import BenchResult, median, scratch_dir, time_call
from .workloads import PARTITIONS, WIDE_SCHEMA, wide_rows

ID = "P13"
TITLE = "append 10M rows under 2 CHECK constraints + 1 generated column"
TARGET_OVERHEAD = 1.15
CONSTRAINTS = {"id_nonneg": "id >= 0", "value_range": "value >= 0 AND value < 1e12"}
GENERATED = {"twice": "id * 2"}
SCHEMA = WIDE_SCHEMA.append(pa.field("twice", pa.int64()))


def _constrained(uri: str) -> deltatx.Table:
    return deltatx.create_table(uri, SCHEMA, partition_by=["part"], generated_columns=GENERATED,
                                properties={f"delta.constraints.{k}": v for k, v in CONSTRAINTS.items()})


def _plain(uri: str) -> deltatx.Table:
    return deltatx.create_table(uri, SCHEMA, partition_by=["part"])


def _deltalake_constrained(uri: str) -> None:
    types = {"id": "long", "part": "integer", "value": "double", "name": "string"}
    fields = [Field(n, PrimitiveType(t)) for n, t in types.items()]
    fields.append(Field("twice", PrimitiveType("long"), metadata={"delta.generationExpression": GENERATED["twice"]}))
    DeltaTable.create(uri, schema=Schema(fields), partition_by=["part"])
    DeltaTable(uri).alter.add_constraint(dict(CONSTRAINTS))


def run(quick: bool = False) -> BenchResult:
    rows = 200_000 if quick else 10_000_000
    reps, warmup = (3, 1) if quick else (5, 1)
    data = wide_rows(rows)
    full = data.append_column("twice", pc.multiply(data["id"], 2))
    plain_times, constrained_times, dl_times = [], [], []
    with scratch_dir("p13") as root:
        for rep in range(warmup + reps):
            plain_uri, cons_uri, dl_uri = (str(root / f"{k}-{rep}") for k in ("plain", "constrained", "deltalake"))
            plain, constrained = _plain(plain_uri), _constrained(cons_uri)
            _deltalake_constrained(dl_uri)
            runs = [(plain_times, lambda: plain.append(full)), (constrained_times, lambda: constrained.append(data))]
            if rep % 2:  # alternate which deltatx run goes first: neither always gets the warmer cache
                runs.reverse()
            runs.append((dl_times, lambda: write_deltalake(dl_uri, data, mode="append")))
            for samples, call in runs:
                t, _ = time_call(call)
                if rep >= warmup:
                    samples.append(t)
            if rep < warmup + reps - 1:
                for uri in (plain_uri, cons_uri, dl_uri):
                    shutil.rmtree(uri, ignore_errors=True)
        table = deltatx.Table(cons_uri)
        stored = table.to_arrow(columns=["id", "twice"])
        wrong_twice = pc.sum(pc.cast(pc.not_equal(stored["twice"], pc.multiply(stored["id"], 2)), pa.int64())).as_py()
        plain_rows = deltatx.Table(plain_uri).to_arrow(columns=["id"]).num_rows
        version = table.version
        try:
            table.append(wide_rows(3, id_start=-3))
            refused = False
        except ConstraintViolationError as exc:
            refused = exc.constraint == "id_nonneg" and exc.num_violations == 3
        after = deltatx.Table(cons_uri)
        dl_reads = pa.table(DeltaTable(cons_uri).scan()).num_rows
        dl_rows = pa.table(DeltaTable(dl_uri).scan()).num_rows

    plain_s, cons_s, dl_s = median(plain_times), median(constrained_times), median(dl_times)
    overhead = cons_s / plain_s if plain_s else None
    result = BenchResult(
        id=ID, title=TITLE, metric="median append time (constrained)", unit="s", deltatx=cons_s, deltalake=dl_s,
        target=f"≤ {TARGET_OVERHEAD:g}× the same append without constraints", quick=quick,
        parameters={"rows": rows, "partitions": PARTITIONS, "repetitions": reps, "warmup": warmup,
                    "constraints": CONSTRAINTS, "generated": GENERATED,
                    "plain": "same schema, no rules, 'twice' given in the data",
                    "deltalake": "write_deltalake into a table with the same constraints and generated column"},
        details={"plain_s": plain_times, "constrained_s": constrained_times, "deltalake_s": dl_times,
                 "plain_median_s": plain_s, "overhead": overhead},
    )
    result.check("constrained: rows", rows, stored.num_rows)
    result.check("plain: rows", rows, plain_rows)
    result.check("generated values wrong", 0, wrong_twice)
    result.check("violating append refused (3 rows, id_nonneg)", True, refused)
    result.check("refused append committed nothing", version, after.version)
    result.check("deltalake reads deltatx's constrained table: rows", rows, dl_reads)
    result.check("deltalake: rows", rows, dl_rows)
    result.criterion(f"≤ {TARGET_OVERHEAD:g}× plain", overhead is not None and overhead <= TARGET_OVERHEAD,
                     f"{overhead:.3f}× ({cons_s:.2f} s vs {plain_s:.2f} s)" if overhead else "no time")
    return result
