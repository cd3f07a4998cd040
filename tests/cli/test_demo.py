"""`make demo`'s local part runs end to end and leaves the table it describes."""

from __future__ import annotations

import deltatx
from deltatx import demo


def test_local_demo_runs_and_its_table_holds_what_it_printed(tmp_path, capsys):
    path = tmp_path / "events"
    demo.main(["--path", str(path), "--no-spark"])
    out = capsys.readouterr().out
    assert "two writers race for the same partition" in out and "time travel to version 1" in out
    table = deltatx.Table(str(path))
    operations = [h["operation"] for h in table.history()]
    assert operations[-1] == "CREATE TABLE" and "DELETE" in operations and operations.count("WRITE") >= 4
    assert deltatx.Table(str(path), version=1).to_arrow().num_rows == 1000
