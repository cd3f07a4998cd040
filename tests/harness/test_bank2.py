"""bank2: two-table transfers through a catalog, checked at every catalog commit, on SQLite and
PostgreSQL; real process kills at the catalog phases; the checker fails on a broken ratification."""

from __future__ import annotations

import json
import os

import pytest

import deltatx
from deltatx.cli import EXIT_ANOMALY, EXIT_OK, main
from deltatx.harness import faults
from deltatx.harness.bank2 import (
    BANK2_ACCOUNTS,
    BANK2_OPENING_BALANCE,
    BANK2_TABLES,
    catalog_commit_order,
    check_bank2,
    prepare_bank2,
    run_bank2,
    transfer,
)
from deltatx.harness.errors import HarnessError

TOTAL = 2 * BANK2_ACCOUNTS * BANK2_OPENING_BALANCE


def _total(cat) -> int:
    snap = cat.snapshot()
    return sum(sum(snap.table(t).to_arrow()["balance"].to_pylist()) for t in BANK2_TABLES)


def test_concurrent_transfers_keep_the_total_at_every_catalog_commit(catalog_url, tmp_path):
    report = run_bank2(catalog_url, str(tmp_path), processes=3, ops=8, seed=1)
    assert report.ok, [str(a) for a in report.anomalies]
    assert report.commits >= 1 and len(report.records) == 24
    with deltatx.Catalog(catalog_url) as cat:
        order = catalog_commit_order(cat)
        transfers = [o for o in order if set(o[2]) == set(BANK2_TABLES) and min(o[2].values()) >= 2]
        assert len(transfers) == report.commits  # every committed transfer is one catalog commit over both
        assert _total(cat) == TOTAL


def test_checker_fails_on_a_ratification_of_one_table(catalog_url, tmp_path):
    """In-process: the broken commit path reports success, the checker does not."""
    with deltatx.Catalog(catalog_url) as cat:
        prepare_bank2(cat, str(tmp_path))
        assert check_bank2(cat) == []
        with faults.ratify_one_table():
            txn_id, moved = transfer(cat, ("bank2_a", 0), ("bank2_b", 1), 10)
        assert moved == 10
        anomalies = check_bank2(cat)
        assert any("ratified only ['bank2_a']" in a.message and a.txn_id == txn_id for a in anomalies)
        assert any(f"total over both tables is {TOTAL - 10}" in a.message for a in anomalies)


def test_checker_fails_when_a_catalog_commit_vanishes_from_the_catalogs_log(catalog_url, tmp_path):
    """Its ratified versions were dropped by the join that orders the catalog's commits: the
    checker passed a history with a whole transfer missing from the commit order."""
    with deltatx.Catalog(catalog_url) as cat:
        prepare_bank2(cat, str(tmp_path))
        for i in range(3):
            transfer(cat, ("bank2_a", i), ("bank2_b", i), 5)
        assert check_bank2(cat) == []
        seq = catalog_commit_order(cat)[-2][0]
        cat._db.transact(lambda cur: cur.execute("DELETE FROM deltatx_catalog_commits WHERE seq = ?", (seq,)))
        messages = [a.message for a in check_bank2(cat)]
        assert any(f"catalog commit {seq}, which is not in the catalog's commit log" in m for m in messages)
        assert any("the versions between belong to no catalog commit" in m for m in messages)


def test_checker_fails_on_broken_ratification_in_writer_processes(tmp_path):
    url = f"sqlite:///{tmp_path}/catalog.db"
    report = run_bank2(url, str(tmp_path), processes=2, ops=4, seed=3,
                       worker_init="deltatx.harness.faults:install_ratify_one_table")
    assert not report.ok and report.commits >= 1
    assert any(a.checker == "bank2" and "ratified only" in a.message for a in report.anomalies)


def test_checker_fails_on_a_transfer_that_committed_but_reported_a_conflict(tmp_path):
    """A transfer keeps the total, so only the outcome can give this fault away: the writer
    records its transaction id on failure too, and the checker finds it among the commits."""
    url = f"sqlite:///{tmp_path}/catalog.db"
    report = run_bank2(url, str(tmp_path), processes=1, ops=3, seed=3,
                       worker_init="deltatx.harness.faults:install_report_commits_as_conflicts")
    assert not report.ok
    assert [r.outcome for r in report.records] == ["conflict"] * 3
    assert all(r.txn_id for r in report.records)
    reported = [a for a in report.anomalies if "reported ConcurrentTransactionException but is a catalog commit"
                in a.message]
    assert {a.txn_id for a in reported} == {r.txn_id for r in report.records}


@pytest.mark.parametrize("phase", ["staged", "ratified", "published"])
def test_process_killed_at_a_catalog_phase_changes_both_tables_or_none(catalog_url, tmp_path, phase):
    """The writer process dies (os._exit) at its 2nd arrival at ``phase`` (one writer: no
    conflict can keep it from getting there); then the survivors transfer on top of what it left."""
    report = run_bank2(catalog_url, str(tmp_path), processes=1, ops=5, seed=7, crash_at=(phase, 2))
    assert report.crashed and report.ok, [str(a) for a in report.anomalies]
    with deltatx.Catalog(catalog_url) as cat:
        for t in BANK2_TABLES:  # every ratified version is published (a reader published the rest)
            uri = cat._entry(t).uri
            latest = cat.cut()[t][1]
            assert os.path.exists(os.path.join(uri, "_delta_log", f"{latest:020d}.json"))
            assert not os.path.exists(os.path.join(uri, "_delta_log", f"{latest + 1:020d}.json"))
        assert _total(cat) == TOTAL
        # setup is 2 catalog commits (creates) + 1 (funding). "staged" is reached once per table, so
        # its 2nd arrival is inside the FIRST transfer (one table staged, the other not): none ratified
        committed_before_crash = 0 if phase == "staged" else 2
        assert len(catalog_commit_order(cat)) == 3 + committed_before_crash
        transfer(cat, ("bank2_b", 2), ("bank2_a", 3), 5)
        transfer(cat, ("bank2_a", 4), ("bank2_b", 5), 7)
        assert check_bank2(cat) == [] and _total(cat) == TOTAL
        if phase == "staged":  # the dead transaction's inline commit died with its database transaction
            assert cat.vacuum_staged("bank2_a", retention_hours=0) == []
            assert not os.path.exists(os.path.join(cat._entry("bank2_a").uri, "_delta_log", "_staged_commits"))


def test_run_bank2_refuses_bad_arguments_and_existing_tables(tmp_path):
    url = f"sqlite:///{tmp_path}/catalog.db"
    with pytest.raises(HarnessError):
        run_bank2(url, str(tmp_path), processes=0)
    with pytest.raises(HarnessError, match="crash phase"):
        run_bank2(url, str(tmp_path), crash_at=("begin", 1))
    with deltatx.Catalog(url) as cat:
        prepare_bank2(cat, str(tmp_path))
        versions = cat.snapshot().versions
        with pytest.raises(HarnessError, match="bank2 tables already"):
            prepare_bank2(cat, str(tmp_path))
        assert cat.snapshot().versions == versions  # nothing written


def test_cli_stress_bank2(capsys, tmp_path):
    url = f"sqlite:///{tmp_path}/catalog.db"
    code = main(["stress", str(tmp_path / "bank"), "--workload", "bank2", "--catalog", url,
                 "--processes", "2", "--ops", "3", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == EXIT_OK and out["ok"] and out["workload"] == "bank2" and out["operations"] == 6
    with deltatx.Catalog(url) as cat:
        assert set(BANK2_TABLES) <= set(cat.list_tables()) and _total(cat) == TOTAL


def test_cli_bank2_needs_a_catalog(capsys, tmp_path):
    code = main(["stress", str(tmp_path / "bank"), "--workload", "bank2", "--ops", "1"])
    assert code not in (EXIT_OK, EXIT_ANOMALY)
    assert "--catalog" in capsys.readouterr().err
    code = main(["stress", str(tmp_path / "bank"), "--workload", "bank", "--catalog", "sqlite:///x.db"])
    assert code not in (EXIT_OK, EXIT_ANOMALY) and "only used by --workload bank2" in capsys.readouterr().err
    code = main(["stress", str(tmp_path / "bank"), "--workload", "bank2", "--catalog", "mysql://nope"])
    assert code not in (EXIT_OK, EXIT_ANOMALY) and "CatalogURLError" in capsys.readouterr().err
    assert not os.path.exists(tmp_path / "bank") and not os.path.exists("x.db")
