"""``deltatx stress DIR --workload bank2 --catalog URL`` (in-process through ``main([...])``, SQLite
catalogs, small runs): DIR is made before the catalog inside it is opened; ``--crash-at
PHASE[:N]`` kills writer 0 at that phase of a catalog commit and the checker then proves every
transfer changed both tables or none; ``--storage-option`` reaches the tables (parent and every
writer); ``--help`` says which options bank2 does not take."""

from __future__ import annotations

import json
import os

import pytest

import deltatx
from deltatx.cli import CRASH_PHASES, EXIT_OK, EXIT_USAGE, _crash_point, build_parser, main
from deltatx.harness import bank2
from deltatx.harness.bank2 import BANK2_ACCOUNTS, BANK2_OPENING_BALANCE, BANK2_TABLES, check_bank2

TOTAL = len(BANK2_TABLES) * BANK2_ACCOUNTS * BANK2_OPENING_BALANCE
#: where a writer records the storage options its catalog was opened with (worker_init below)
OPTIONS_LOG = "DELTATX_TEST_BANK2_OPTIONS_LOG"


def _total(cat: deltatx.Catalog) -> int:
    snap = cat.snapshot()
    return sum(sum(snap.table(t).to_arrow()["balance"].to_pylist()) for t in BANK2_TABLES)


def _bank2(directory, url: str, *extra: str) -> list[str]:
    return ["stress", str(directory), "--workload", "bank2", "--catalog", url, "--processes", "1", *extra]


# ------------------------------------------------------------------------------- the directory
def test_bank2_makes_its_directory_before_opening_the_catalog_inside_it(capsys, tmp_path):
    """The README's form: the catalog lives in DIR, which does not exist yet."""
    directory = tmp_path / "new" / "bank"
    url = f"sqlite:///{directory}/catalog.db"
    code = main(_bank2(directory, url, "--ops", "2", "--json"))
    out, err = capsys.readouterr()
    assert code == EXIT_OK, err
    report = json.loads(out)
    assert report["ok"] and report["operations"] == 2 and report["crash_at"] is None
    with deltatx.Catalog(url) as cat:
        assert sorted(cat.list_tables()) == sorted(BANK2_TABLES) and _total(cat) == TOTAL
        assert all(cat._entry(t).uri == os.path.join(directory, t) for t in BANK2_TABLES)


def test_a_refused_bank2_run_leaves_no_directory(capsys, tmp_path):
    directory = tmp_path / "a" / "b"
    code = main(_bank2(directory, f"sqlite:///{tmp_path}/missing/catalog.db", "--ops", "1"))
    assert code == EXIT_USAGE and "CatalogURLError" in capsys.readouterr().err
    assert not (tmp_path / "a").exists()


# ------------------------------------------------------------------------------- crash injection
@pytest.mark.parametrize("point, expected", [("staged", ["staged", 1]), ("ratified:2", ["ratified", 2]),
                                             ("published", ["published", 1])])
def test_crash_at_kills_writer_0_at_that_phase_and_the_checker_passes(capsys, tmp_path, point, expected):
    """One writer: nothing keeps it from reaching the phase (every transfer moves money), so the
    crash happens; the run then checks every catalog commit, as ``run_bank2(crash_at=...)``."""
    url = f"sqlite:///{tmp_path}/catalog.db"
    code = main(_bank2(tmp_path / "bank", url, "--ops", "4", "--crash-at", point, "--json"))
    out, err = capsys.readouterr()
    assert code == EXIT_OK, err
    report = json.loads(out)
    assert report["crash_at"] == expected and report["crashed"] and report["ok"], report["anomalies"]
    assert report["operations"] < 4  # writer 0 died mid-run: its in-flight transfer has no record
    with deltatx.Catalog(url) as cat:
        assert check_bank2(cat) == [] and _total(cat) == TOTAL


def test_crash_at_a_phase_never_reached_says_so(capsys, tmp_path):
    code = main(_bank2(tmp_path / "bank", f"sqlite:///{tmp_path}/catalog.db", "--ops", "1",
                       "--crash-at", "published:50"))
    out, err = capsys.readouterr()
    assert code == EXIT_OK, err
    assert "crash injected" in out and "never got there, nothing was killed" in out and "OK" in out


@pytest.mark.parametrize("text, expected", [("staged", ("staged", 1)), ("ratified:3", ("ratified", 3)),
                                            (" published:1 ", ("published", 1))])
def test_crash_point_parses_phase_and_count(text, expected):
    assert _crash_point(text) == expected


def test_the_command_line_names_the_phases_run_bank2_has():
    assert CRASH_PHASES == bank2.CRASH_PHASES


@pytest.mark.parametrize("point", ["begin", "staged:0", "staged:-1", "staged:x", "staged:", ""])
def test_a_bad_crash_point_is_a_usage_error_before_anything_runs(capsys, tmp_path, point):
    code = main(_bank2(tmp_path / "bank", f"sqlite:///{tmp_path}/catalog.db", "--crash-at", point))
    assert code == EXIT_USAGE and "--crash-at" in capsys.readouterr().err
    assert not (tmp_path / "bank").exists() and not (tmp_path / "catalog.db").exists()


def test_crash_at_only_goes_with_bank2(capsys, tmp_path):
    code = main(["stress", str(tmp_path / "t"), "--workload", "append", "--crash-at", "staged"])
    assert code == EXIT_USAGE and "--crash-at only goes with --workload bank2" in capsys.readouterr().err
    assert not (tmp_path / "t").exists()


# ------------------------------------------------------------------------------- --help
def _stress_help() -> dict[str, str]:
    sub = build_parser()._subparsers._group_actions[0]  # the subcommands' action
    return {opt: action.help or "" for action in sub.choices["stress"]._actions for opt in action.option_strings}


def test_help_says_which_options_bank2_refuses_and_offers_crash_injection():
    helps = _stress_help()
    for option in ("--duration", "--isolation", "--row-level"):
        assert "not with --workload bank2" in helps[option], option
    assert all(phase in helps["--crash-at"] for phase in CRASH_PHASES)
    assert "--storage-option applies to those tables" in helps["--catalog"]


# ------------------------------------------------------------------------------- --storage-option
def test_storage_options_are_passed_to_run_bank2(capsys, tmp_path, monkeypatch):
    seen: dict = {}

    def recorder(catalog_url, root, **kwargs):
        seen.update(kwargs, catalog_url=catalog_url, root=root)
        return bank2.Bank2Report(catalog_url, kwargs["processes"], kwargs["ops"], kwargs["seed"])

    monkeypatch.setattr(bank2, "run_bank2", recorder)
    code = main(_bank2(tmp_path / "bank", f"sqlite:///{tmp_path}/catalog.db", "--ops", "3", "--json",
                       "--storage-option", "fsync=false", "--crash-at", "ratified:2"))
    assert code == EXIT_OK, capsys.readouterr().err
    assert seen["storage_options"] == {"fsync": "false"} and seen["crash_at"] == ("ratified", 2)
    assert seen["root"] == str(tmp_path / "bank") and seen["ops"] == 3 and seen["processes"] == 1


def test_a_bad_storage_option_fails_before_anything_is_made(capsys, tmp_path):
    code = main(_bank2(tmp_path / "bank", f"sqlite:///{tmp_path}/bank/catalog.db", "--ops", "1",
                       "--storage-option", "fsync=maybe"))
    assert code == EXIT_USAGE and "fsync" in capsys.readouterr().err
    assert not (tmp_path / "bank").exists()


def record_catalog_options() -> None:
    """worker_init of the test below, run first in every writer process: each catalog the writer
    opens appends the storage options it was given to the file named by $DELTATX_TEST_BANK2_OPTIONS_LOG."""
    from deltatx.catalog.catalog import Catalog

    opened = Catalog.__init__

    def recording_init(self, url, storage_options=None):
        with open(os.environ[OPTIONS_LOG], "a") as fh:
            fh.write(json.dumps(storage_options) + "\n")
        opened(self, url, storage_options)

    Catalog.__init__ = recording_init  # type: ignore[method-assign]


def test_every_writer_opens_the_tables_with_the_storage_options(tmp_path, monkeypatch):
    """What --storage-option hands to run_bank2 reaches the writer processes' catalogs too."""
    log = tmp_path / "options.log"
    monkeypatch.setenv(OPTIONS_LOG, str(log))
    report = bank2.run_bank2(f"sqlite:///{tmp_path}/catalog.db", str(tmp_path / "bank"), processes=2, ops=1,
                             worker_init=f"{__name__}:record_catalog_options", storage_options={"fsync": "false"})
    assert report.ok, report.anomalies
    assert [json.loads(line) for line in log.read_text().splitlines()] == [{"fsync": "false"}] * 2
