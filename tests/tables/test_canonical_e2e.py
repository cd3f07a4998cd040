"""Delta's canonical optimistic-transaction cases, end to end through real tables and operations.

``tests/conflicts/test_canonical.py`` checks these cases (OptimisticTransactionSuite /
OptimisticTransactionLegacyTests; shared notes, delta-concurrency-reference.md §5) against the pure
conflict checker with hand-built winning commits. Here every case runs the whole commit path:

1. setup commits on a fresh ``memory://`` table partitioned by ``part`` (file *a* in ``part=1``,
   file *b* in ``part=2``, one commit each);
2. ``tx = table.transaction()`` and its reads (``tx.read(where=...)``);
3. another writer commits a real operation (its own transaction, through a second Table object);
4. the transaction stages its writes on its pinned snapshot and ``tx.commit()``s.

No sleeps: the order is fixed by the test. Each case runs under both table isolation levels and
asserts the exact exception class (and the winning version / operation it names) or success, and
the final rows: after a conflict, exactly setup + the concurrent commits; after a success, the rows
of running both one at a time in the serial order the level allows (``equivalent_to``). Cases
are :class:`deltatx.harness.Scenario` objects; the few steps the harness operations do not offer
(removal by path, schema merge, app-id lookups, protocol upgrades) are plain callables.

Delta's "winning" commit in its harness is a data-changing, non-blind commit (it read the table
first); :class:`InsertSelect` is that winner here. Where the outcome depends on the winner being a
blind append, the blind variant is run as well.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Any, ClassVar

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import deltatx
from deltatx import errors
from deltatx.harness import Append, Delete, Merge, Operation, Optimize, Scenario, SetProperties, Update, run_scenario
from deltatx.harness.scenarios import CONCURRENT_FIRST, TRANSACTION_FIRST, SCHEMA, ScenarioResult, rows
from deltatx.harness.serial import sorted_rows

S, WS = "Serializable", "WriteSerializable"
LEVELS = (S, WS)

#: file a (part=1, ids 100..109) at version 1, file b (part=2, ids 200..209) at version 2
SETUP = [Append(rows(range(100, 110), 1)), Append(rows(range(200, 210), 2))]
#: a second small file in part=1 (ids 110..114), so that OPTIMIZE has two files to rearrange
SETUP_TWO_FILES_IN_PART_1 = SETUP + [Append(rows(range(110, 115), 1))]


# --------------------------------------------------------------------------------------------
# Steps the harness vocabulary does not have
# --------------------------------------------------------------------------------------------


@dataclass
class InsertSelect(Operation):
    """A non-blind append (INSERT ... SELECT): reads ``where`` (None = the whole table), then adds
    ``rows``. Delta's harness winner: it changes data and is not a blind append."""

    kind: ClassVar[str] = "test_insert_select"
    rows: dict[str, list] = field(default_factory=dict)
    where: str | None = None

    def stage(self, tx: deltatx.Transaction) -> dict[str, Any]:
        tx.read(where=self.where)
        tx.append(pa.Table.from_pydict(self.rows, schema=tx.schema))
        return {}


@dataclass
class CountThenInsert(Operation):
    """Read ``where``, then insert one row whose ``value`` is the number of rows read.

    The write depends on the read, so the two serial orders give different rows: the final
    table tells whether a concurrent add was (concurrent-first) or was not (transaction-first)
    visible to this transaction."""

    kind: ClassVar[str] = "test_count_then_insert"
    where: str | None
    id: int
    part: int

    def stage(self, tx: deltatx.Transaction) -> dict[str, Any]:
        seen = tx.read(where=self.where).num_rows
        tx.append(pa.Table.from_pydict(rows([self.id], self.part, value=seen), schema=tx.schema))
        return {"seen": seen}


def remove_files_of_partition(part: int):
    """Remove the partition's files by path, reading nothing (Delta's raw ``RemoveFile`` action)."""

    def step(tx: deltatx.Transaction) -> None:
        files = tx.current_files()
        in_part = pc.equal(pc.map_lookup(files["partitionValues"], "part", "first"), str(part))
        tx.stage_removes(files.filter(in_part))
        tx.note_operation("DELETE", {"predicate": [f"part = {part}"]})

    return step


def append_with_new_column(table: deltatx.Table) -> None:
    """A schema change: append rows with an extra column, schema_mode="merge"."""
    data = pa.Table.from_pydict(rows([300], 3), schema=SCHEMA).append_column("note", pa.array(["new column"]))
    table.append(data, schema_mode="merge")


def look_up_app_then_append(app_id: str, row_id: int):
    """Depend on ``app_id`` (Delta's ``txnVersion``) and write rows without recording a version."""

    def step(tx: deltatx.Transaction) -> None:
        tx.app_version(app_id)
        tx.append(pa.Table.from_pydict(rows([row_id], 1), schema=tx.schema))

    return step


def overwrite_partition_1(table: deltatx.Table) -> None:
    """replaceWhere: removes file a, adds a new file (Delta's "remove a, add b" winner)."""
    table.overwrite(pa.Table.from_pydict(rows([120, 121], 1, value=5), schema=SCHEMA), where="part = 1")


# feature opt-ins deltatx implements, each needing a protocol upgrade from the created (1, 2)
ADD_DOMAIN_METADATA_FEATURE = {"delta.feature.domainMetadata": "supported"}  # writer 7
V2_CHECKPOINTS = {"delta.checkpointPolicy": "v2"}  # reader 3 / writer 7 (v2Checkpoint)


# --------------------------------------------------------------------------------------------
# The cases
# --------------------------------------------------------------------------------------------


@dataclass
class Case:
    """A scenario plus which concurrent commit (0 = the first) the conflict must name."""

    scenario: Scenario
    conflict_with: int = 0


def _case(level: str, name: str, *, transaction, concurrent=(), reads=(), setup=SETUP, expect=None,
          equivalent_to=None, conflict_with: int = 0, **kwargs) -> Case:
    if expect is None and equivalent_to is None:
        equivalent_to = CONCURRENT_FIRST
    return Case(Scenario(name=f"{level}: {name}", setup=list(setup), reads=list(reads),
                         concurrent=list(concurrent), transaction=list(transaction), expect=expect,
                         isolation=level, equivalent_to=equivalent_to, **kwargs), conflict_with)


def canonical_cases(level: str) -> list[Case]:
    serializable = level == S
    # the outcome of "read part P, then write" against a *blind* append into part P
    vs_blind = dict(expect=errors.ConcurrentAppendException) if serializable else dict(equivalent_to=TRANSACTION_FIRST)
    return [
        # ---------------------------------------------------------------- allowed
        _case(level, "append / append",
              transaction=[Append(rows([150], 1))], concurrent=[Append(rows([250], 2))]),
        _case(level, "append / append (same partition)",
              transaction=[Append(rows([150], 1))], concurrent=[Append(rows([151], 1))]),
        _case(level, "disjoint txns (partitions)",
              reads=["part = 1"], transaction=[CountThenInsert("part = 1", 150, 1)],
              concurrent=[InsertSelect(rows([250], 2), where="part = 2")]),
        _case(level, "disjoint txns (application ids)",
              transaction=[Append(rows([150], 1), app_id="t1", app_version=1)],
              concurrent=[Append(rows([250], 2), app_id="t2", app_version=1)]),
        _case(level, "disjoint delete / read",
              reads=["part = 2"], transaction=[CountThenInsert("part = 2", 250, 2)],
              concurrent=[Delete("part = 1")]),
        _case(level, "disjoint add / read",
              reads=["part = 2"], transaction=[CountThenInsert("part = 2", 250, 2)],
              concurrent=[InsertSelect(rows([150], 1))]),
        _case(level, "add / read + no write (empty commit)",
              reads=["part = 1"], transaction=[], concurrent=[InsertSelect(rows([150], 1))]),
        _case(level, "add in part=3 / read part=1,2 / write part=1",
              reads=["part = 1 OR part = 2"], transaction=[CountThenInsert("part = 1 OR part = 2", 150, 1)],
              concurrent=[InsertSelect(rows([350], 3))]),
        # ---------------------------------------------------------------- disallowed
        _case(level, "delete / delete (same file, removed by path)",
              transaction=[remove_files_of_partition(1)], concurrent=[Delete("part = 1")],
              expect=errors.ConcurrentDeleteDeleteException),
        # A real DELETE reads the files it removes first, so the delete-read check (run before
        # delete-delete, as in Delta) is what fails it.
        _case(level, "delete / delete (two DELETEs of the same partition)",
              transaction=[Delete("part = 1")], concurrent=[Delete("part = 1")],
              expect=errors.ConcurrentDeleteReadException),
        _case(level, "add / read + write",
              reads=["part = 1"], transaction=[CountThenInsert("part = 1", 150, 1)],
              concurrent=[InsertSelect(rows([151], 1))], expect=errors.ConcurrentAppendException),
        _case(level, "add / read + write (winner is a blind append)",
              reads=["part = 1"], transaction=[CountThenInsert("part = 1", 150, 1)],
              concurrent=[Append(rows([151], 1))], **vs_blind),
        _case(level, "add in part=2 / read part=1,2 / write part=1",
              reads=["part = 1", "part = 2"], transaction=[Append(rows([150], 1))],
              concurrent=[InsertSelect(rows([250], 2))], expect=errors.ConcurrentAppendException),
        _case(level, "add in part=2 / read part IN (1, 2) / write part=1",
              reads=["part IN (1, 2)"], transaction=[CountThenInsert("part IN (1, 2)", 150, 1)],
              concurrent=[InsertSelect(rows([250], 2))], expect=errors.ConcurrentAppendException),
        _case(level, "add in part=2 / read part IN (1, 2) / write part=1 (winner is a blind append)",
              reads=["part IN (1, 2)"], transaction=[CountThenInsert("part IN (1, 2)", 150, 1)],
              concurrent=[Append(rows([250], 2))], **vs_blind),
        _case(level, "delete / read",
              reads=["part = 1"], transaction=[Append(rows([150], 1))], concurrent=[Delete("part = 1")],
              expect=errors.ConcurrentDeleteReadException),
        _case(level, "schema change",
              reads=["part = 1"], transaction=[CountThenInsert("part = 1", 150, 1)],
              concurrent=[append_with_new_column], expect=errors.MetadataChangedException),
        _case(level, "schema change vs a blind append",
              transaction=[Append(rows([150], 1))], concurrent=[append_with_new_column],
              expect=errors.MetadataChangedException),
        _case(level, "conflicting txns (both write the same application id)",
              transaction=[Append(rows([150], 1), app_id="stream-1", app_version=1)],
              concurrent=[Append(rows([250], 2), app_id="stream-1", app_version=1)],
              expect=errors.ConcurrentTransactionException),
        _case(level, "conflicting txns (the transaction looked the application id up)",
              transaction=[look_up_app_then_append("stream-1", 150)],
              concurrent=[Append(rows([250], 2), app_id="stream-1", app_version=1)],
              expect=errors.ConcurrentTransactionException),
        _case(level, "upgrade / upgrade (writer feature)",
              transaction=[SetProperties(ADD_DOMAIN_METADATA_FEATURE)],
              concurrent=[SetProperties(ADD_DOMAIN_METADATA_FEATURE)], expect=errors.ProtocolChangedException),
        _case(level, "upgrade / upgrade (reader and writer feature)",
              transaction=[SetProperties(V2_CHECKPOINTS)], concurrent=[SetProperties(ADD_DOMAIN_METADATA_FEATURE)],
              expect=errors.ProtocolChangedException),
        # Delta lets a concurrent writer adopt a winner's upgrade to v2 checkpoints (the feature
        # does not fail concurrent transactions at upgrade; the config key is allow-listed).
        _case(level, "blind append vs a concurrent protocol upgrade",
              transaction=[Append(rows([150], 1))], concurrent=[SetProperties(V2_CHECKPOINTS)]),
        _case(level, "read + write vs a concurrent protocol upgrade",
              reads=["part = 1"], transaction=[CountThenInsert("part = 1", 150, 1)],
              concurrent=[SetProperties(V2_CHECKPOINTS)]),
        _case(level, "taint whole table",
              reads=["part = 1", None], transaction=[Append(rows([450], 4))],
              concurrent=[InsertSelect(rows([350], 3))], expect=errors.ConcurrentAppendException),
        _case(level, "taint whole table (winner is a blind append)",
              reads=["part = 1", None], transaction=[CountThenInsert(None, 450, 4)],
              concurrent=[Append(rows([350], 3))], **vs_blind),
        _case(level, "taint whole table + concurrent remove",
              reads=[None], transaction=[Append(rows([150], 1))], concurrent=[Delete("part = 2")],
              expect=errors.ConcurrentDeleteReadException),
        # The removed file was added after the snapshot, so it is not among the files read: only
        # the whole-table read makes the remove a conflict. Serializable already fails on the add.
        _case(level, "taint whole table + concurrent remove of a file it never saw",
              reads=[None], transaction=[Append(rows([150], 1))],
              concurrent=[Append(rows([350], 3)), Delete("part = 3")],
              expect=errors.ConcurrentAppendException if serializable else errors.ConcurrentDeleteReadException,
              conflict_with=0 if serializable else 1),
        _case(level, "taint whole table + concurrent remove (unpartitioned)",
              setup=[Append(rows(range(100, 110), 1))], partition_by=(),
              reads=[None], transaction=[Append(rows([150], 1))], concurrent=[Delete(None)],
              expect=errors.ConcurrentDeleteReadException),
        # ---------------------------------------------------------------- blind appends
        *[_case(level, f"allow blind append against a concurrent {label}",
                transaction=[Append(rows([150], 1))], concurrent=[winner])
          for label, winner in [
              ("DELETE", Delete("part = 1")),
              ("UPDATE", Update("part = 1", {"value": "value + 1"})),
              ("MERGE", Merge(rows([100, 160], 1, value=9), match={"part": 1})),
              ("replaceWhere overwrite", overwrite_partition_1),
              ("read + append", InsertSelect(rows([151], 1))),
          ]],
        # ---------------------------------------------------------------- no data change
        _case(level, "no data change: allow rearrange vs concurrent add",
              setup=SETUP_TWO_FILES_IN_PART_1, transaction=[Optimize("part = 1")],
              concurrent=[InsertSelect(rows([150], 1))]),
        _case(level, "no data change: allow rearrange after a whole-table read vs concurrent add",
              setup=SETUP_TWO_FILES_IN_PART_1, reads=[None], transaction=[Optimize()],
              concurrent=[Append(rows([150], 1))]),
        _case(level, "no data change: allow rearrange vs concurrent delete of another partition",
              setup=SETUP_TWO_FILES_IN_PART_1, transaction=[Optimize("part = 1")],
              concurrent=[Delete("part = 2")]),
        _case(level, "no data change: block rearrange vs concurrent delete of the same file",
              setup=SETUP_TWO_FILES_IN_PART_1, transaction=[Optimize("part = 1")],
              concurrent=[Delete("part = 1")], expect=errors.ConcurrentDeleteReadException),
        _case(level, "no data change: block rearrange vs concurrent rewrite of one of its files",
              setup=SETUP_TWO_FILES_IN_PART_1, transaction=[Optimize("part = 1")],
              concurrent=[Update("part = 1 AND id = 112", {"value": "value + 1"})],
              expect=errors.ConcurrentDeleteReadException),
    ]


CASES = [c for level in LEVELS for c in canonical_cases(level)]


def run_case(case: Case, uri: str | None = None) -> ScenarioResult:
    """Run the scenario and check outcome, conflict details and final rows."""
    scenario = case.scenario
    result = run_scenario(scenario, uri=uri)
    result.assert_ok()  # outcome class, and the rows of the allowed serial order
    first_concurrent = len(scenario.setup) + 1
    if scenario.expect is None:
        assert result.error is None
    else:
        assert type(result.error) is scenario.expect, f"{type(result.error).__name__}: {result.error}"
        assert result.error.version == first_concurrent + case.conflict_with
    return result


@pytest.mark.parametrize("case", CASES, ids=[c.scenario.name for c in CASES])
def test_canonical_case(case: Case):
    result = run_case(case)
    scenario = case.scenario
    if result.error is None and scenario.transaction:
        # committed right after the concurrent commits
        assert result.version == len(scenario.setup) + len(scenario.concurrent) + 1


# --------------------------------------------------------------------------------------------
# Details the scenario checks do not show
# --------------------------------------------------------------------------------------------


def _uri() -> str:
    return f"memory://canonical-e2e/{uuid.uuid4().hex}"


def _case_named(level: str, name: str) -> Case:
    return next(c for c in canonical_cases(level) if c.scenario.name == f"{level}: {name}")


def _ids_and_values(uri: str) -> list[tuple[int, int, int]]:
    t = sorted_rows(deltatx.Table(uri).to_arrow(columns=["id", "part", "value"]))
    return list(zip(t["id"].to_pylist(), t["part"].to_pylist(), t["value"].to_pylist()))


@pytest.mark.parametrize("level", LEVELS)
def test_conflict_names_the_winner_and_the_partition(level):
    result = run_case(_case_named(level, "add / read + write"))
    assert result.error.operation == "WRITE"
    assert result.error.conflict == "part=1"
    result = run_case(_case_named(level, "delete / read"))
    assert result.error.operation == "DELETE"
    assert result.error.conflict.startswith("part=1, file part=1/")


@pytest.mark.parametrize("level", LEVELS)
def test_add_read_no_write_records_no_commit(level):
    uri = _uri()
    result = run_case(_case_named(level, "add / read + no write (empty commit)"), uri=uri)
    assert result.version == 2  # the read version: nothing was written
    assert deltatx.Table(uri).version == 3  # only the concurrent commit


def test_write_serializable_orders_the_reader_before_a_blind_append():
    """WS commits the reader; its row counts the 10 rows it saw, not the 11 after the append."""
    uri = _uri()
    run_case(_case_named(WS, "add / read + write (winner is a blind append)"), uri=uri)
    rows_ = _ids_and_values(uri)
    assert (150, 1, 10) in rows_ and (151, 1, 0) in rows_
    assert len(rows_) == 22
    history = deltatx.Table(uri).history()
    assert history[0]["operation"] == "WRITE" and history[0]["isolationLevel"] == WS
    assert history[0]["isBlindAppend"] is False and history[1]["isBlindAppend"] is True


@pytest.mark.parametrize("level", LEVELS)
def test_blind_append_commits_after_a_concurrent_update_without_being_updated(level):
    uri = _uri()
    run_case(_case_named(level, "allow blind append against a concurrent UPDATE"), uri=uri)
    rows_ = _ids_and_values(uri)
    assert (150, 1, 0) in rows_  # appended after the UPDATE: not updated
    assert [v for i, p, v in rows_ if p == 1 and i < 150] == [1] * 10


@pytest.mark.parametrize("level", LEVELS)
def test_rearrange_commits_at_snapshot_isolation_and_keeps_the_concurrent_rows(level):
    uri = _uri()
    result = run_case(_case_named(level, "no data change: allow rearrange vs concurrent add"), uri=uri)
    assert result.version == 5
    table = deltatx.Table(uri)
    latest = table.history()[0]
    assert latest["operation"] == "OPTIMIZE" and latest["isolationLevel"] == "SnapshotIsolation"
    assert latest["operationMetrics"]["numRemovedFiles"] == "2"
    part_1 = table.files().filter(pc.equal(pc.map_lookup(table.files()["partitionValues"], "part", "first"), "1"))
    assert part_1.num_rows == 2  # the compacted file and the concurrent one
    assert sorted(table.to_arrow(where="part = 1")["id"].to_pylist()) == list(range(100, 115)) + [150]


@pytest.mark.parametrize("level", LEVELS)
def test_upgrade_upgrade_leaves_the_winners_protocol(level):
    uri = _uri()
    run_case(_case_named(level, "upgrade / upgrade (reader and writer feature)"), uri=uri)
    protocol = deltatx.Table(uri).protocol
    assert (protocol.min_reader_version, protocol.min_writer_version) == (1, 7)
    assert "domainMetadata" in protocol.writer_features and "v2Checkpoint" not in protocol.writer_features


@pytest.mark.parametrize("level", LEVELS)
def test_writer_adopts_a_concurrent_upgrade(level):
    uri = _uri()
    run_case(_case_named(level, "read + write vs a concurrent protocol upgrade"), uri=uri)
    table = deltatx.Table(uri)
    assert "v2Checkpoint" in table.protocol.reader_features
    assert table.properties["delta.checkpointPolicy"] == "v2"
    assert (150, 1, 10) in _ids_and_values(uri)


@pytest.mark.parametrize("level", LEVELS)
def test_disjoint_app_ids_both_recorded(level):
    uri = _uri()
    run_case(_case_named(level, "disjoint txns (application ids)"), uri=uri)
    tx = deltatx.Table(uri).transaction()
    assert (tx.app_version("t1"), tx.app_version("t2")) == (1, 1)
    tx.abort()


# --------------------------------------------------------------------------------------------
# Delta's literal "schema change" / "conflicting txns": the loser commits *no* actions
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("name, concurrent, lookup", [
    ("schema change", append_with_new_column, None),
    ("conflicting txns", Append(rows([250], 2), app_id="t1", app_version=0), "t1"),
])
def test_empty_loser_records_nothing_and_cannot_conflict(level, name, concurrent, lookup):
    """Delta's harness forces an empty commit (``commit(Nil)``) in its literal schema-change and
    conflicting-txns cases and expects a conflict. Like Delta's real operations
    (``commitIfNeeded``), deltatx records no empty commit: the transaction returns at its read
    version, nothing is written, and there is nothing for the winner to conflict with."""

    def read_only(tx):
        tx.read(where="part = 1")
        if lookup is not None:
            tx.app_version(lookup)

    scenario = Scenario(name=f"{level}: {name} (no actions)", setup=list(SETUP), transaction=[read_only],
                        concurrent=[concurrent], expect=None, isolation=level,
                        equivalent_to="concurrent-first")
    result = run_scenario(scenario)
    result.assert_ok()
    assert result.version == len(SETUP), "no new version for an empty transaction"


# --------------------------------------------------------------------------------------------
# Partition-disjoint UPDATE / DELETE / MERGE whose predicates name the partition
# --------------------------------------------------------------------------------------------


def dml(kind: str, part: int) -> Operation:
    base = part * 100
    if kind == "UPDATE":
        return Update(f"part = {part} AND id >= {base + 5}", {"value": "value + 1"})
    if kind == "DELETE":
        return Delete(f"part = {part} AND id < {base + 3}")
    return Merge(rows([base + 1, base + 50], part, value=9), match={"part": part})


DML = ("UPDATE", "DELETE", "MERGE")
DISJOINT = [
    (level, mine, theirs, use_stats)
    for level in LEVELS for mine in DML for theirs in DML for use_stats in ("true", "false")
]


@pytest.mark.parametrize("level, mine, theirs, use_stats", DISJOINT,
                         ids=[f"{lv}-{m}-vs-{t}-stats={u}" for lv, m, t, u in DISJOINT])
def test_partition_disjoint_dml_commits(level, mine, theirs, use_stats):
    case = Case(Scenario(
        name=f"{level}: {mine} of part=1 vs concurrent {theirs} of part=2",
        setup=list(SETUP), transaction=[dml(mine, 1)], concurrent=[dml(theirs, 2)],
        isolation=level, equivalent_to=CONCURRENT_FIRST,
        properties={"deltatx.conflictDetection.useStats": use_stats},
    ))
    uri = _uri()
    result = run_case(case, uri=uri)
    assert result.version == 4 and result.outcome == "committed"
    ops = [h["operation"] for h in deltatx.Table(uri).history()[:2]]
    assert ops == [mine, theirs]


@pytest.mark.parametrize("level", LEVELS)
def test_same_partition_dml_still_conflicts(level):
    """The control for the disjoint cases: the same two operations in one partition conflict."""
    case = Case(Scenario(name=f"{level}: UPDATE vs DELETE of part=1", setup=list(SETUP),
                         transaction=[dml("UPDATE", 1)], concurrent=[dml("DELETE", 1)], isolation=level,
                         expect=errors.ConcurrentAppendException,
                         properties={"deltatx.conflictDetection.useStats": "false"}))
    run_case(case)


# --------------------------------------------------------------------------------------------
# The same cases on local disk (put-if-absent through the file system)
# --------------------------------------------------------------------------------------------


LOCAL = [c for c in canonical_cases(S) if "(same" in c.scenario.name or "taint" in c.scenario.name
         or "rearrange" in c.scenario.name]


@pytest.mark.parametrize("case", LOCAL, ids=[c.scenario.name for c in LOCAL])
def test_canonical_case_on_local_disk(case: Case, tmp_path):
    run_case(case, uri=str(tmp_path / "table"))
