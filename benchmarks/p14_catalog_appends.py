"""P14 — 8 OS processes × 100 blind 1-row appends to one table: through the SQLite coordinator,
through the PostgreSQL coordinator, and on the plain file-system path, in the same run.

Why: a catalog moves the put-if-absent from storage into a database row (table id, version). On
the file-system path every lost race costs a temp file, a failed link and a re-list of the log,
and every append first catches up with the commits since its last; through a catalog a blind
append is ratified after plain winners without reading them (conflicts/commuting.py). Target:
each coordinator ≥ 2× the file-system path's commits/s, 0 failures, every version exact. deltalake
runs the same appends on a path table as the peer (it has no catalog coordinator).

The same three paths then run on S3 (a moto server on 127.0.0.1), where a put-if-absent, a
catch-up read or a listing is a request: the path table commits with conditional PUTs, the
catalog-managed ones publish with them.

The PostgreSQL server is a throwaway one on 127.0.0.1 (:mod:`deltatx.harness.pgserver`).
"""

from __future__ import annotations

from typing import Any

from deltalake import DeltaTable

import deltatx

from .common import BenchResult, scratch_dir
from .p4_concurrent_appends import deltalake_appender  # the same peer workload as P4
from .procs import append_each, combine, run_workers
from .s3 import moto_bucket
from .workloads import SMALL_SCHEMA, deltalake_facts, small_row

ID = "P14"
TITLE = "concurrent blind appends through a catalog coordinator (processes)"
TARGET_RATIO_VS_FILESYSTEM = 2.0
ID_STRIDE = 1_000_000


def appender(index: int, barrier, uri: str, catalog_url: str | None, n: int,
             storage_options: dict[str, Any] | None = None) -> dict[str, Any]:
    """One writer: the table by path (``catalog_url`` None) or by name through the catalog."""
    catalog = deltatx.Catalog(catalog_url, storage_options=storage_options) if catalog_url else None
    table = catalog.table("t") if catalog else deltatx.Table(uri, storage_options=storage_options)
    rows = [small_row(index * ID_STRIDE + i) for i in range(n)]
    try:
        return append_each(index, barrier, table, rows)
    finally:
        if catalog:
            catalog.close()


def _on_s3(urls: dict[str, str], processes: int, n: int) -> dict[str, Any]:
    """The path table and a table per coordinator on a moto S3 bucket: commits/s and checks."""
    with moto_bucket("deltatx-p14") as (bucket, options):
        fs_uri = f"{bucket}/fs"
        deltatx.create_table(fs_uri, SMALL_SCHEMA, storage_options=options)
        for backend, url in urls.items():
            with deltatx.Catalog(url, storage_options=options) as cat:
                cat.create_table("t", f"{bucket}/{backend}", SMALL_SCHEMA)
        runs = {"filesystem": combine(run_workers(appender, processes, (fs_uri, None, n, options)))}
        for backend, url in urls.items():
            runs[backend] = combine(run_workers(appender, processes, ("", url, n, options)))
        versions = {"filesystem": deltatx.Table(fs_uri, storage_options=options).version}
        for backend, url in urls.items():
            with deltatx.Catalog(url, storage_options=options) as cat:
                versions[backend] = cat.table("t").version
    return {"runs": runs, "versions": versions}


def run(quick: bool = False) -> BenchResult:
    from deltatx.harness import pgserver

    processes, n = (2, 10) if quick else (8, 100)
    total = processes * n
    server = pgserver.start()
    try:
        with scratch_dir("p14") as root:
            fs_uri, dl_uri = str(root / "fs"), str(root / "deltalake")
            deltatx.create_table(fs_uri, SMALL_SCHEMA)
            DeltaTable.create(dl_uri, schema=SMALL_SCHEMA)
            urls = {"sqlite": f"sqlite:///{root}/catalog.db", "postgresql": server.new_database()}
            for backend, url in urls.items():
                with deltatx.Catalog(url) as cat:
                    cat.create_table("t", str(root / backend), SMALL_SCHEMA)
            runs = {"filesystem": combine(run_workers(appender, processes, (fs_uri, None, n)))}
            for backend, url in urls.items():
                runs[backend] = combine(run_workers(appender, processes, ("", url, n)))
            dl = combine(run_workers(deltalake_appender, processes, (dl_uri, n)))

            result = BenchResult(
                id=ID, title=TITLE, metric="commits per second (SQLite coordinator)", unit="commits/s",
                higher_is_better=True, deltatx=runs["sqlite"]["commits_per_s"], deltalake=dl["commits_per_s"],
                target=f"each coordinator ≥ {TARGET_RATIO_VS_FILESYSTEM:g}× the file-system path, 0 failures",
                quick=quick,
                parameters={"processes": processes, "appends_per_process": n, "rows_per_append": 1,
                            "paths": ["filesystem", "sqlite", "postgresql"], "postgresql": "local server, fsync=off",
                            "stores": ["local disk", "S3 (moto server on 127.0.0.1)"],
                            "start": "multiprocessing barrier (spawn)"},
                details={**runs, "deltalake": dl},
                deltalake_baseline_notes="deltalake appends to a path table (it has no catalog coordinator)",
            )
            result.check("filesystem final version", total, deltatx.Table(fs_uri).version)
            for backend, url in urls.items():
                with deltatx.Catalog(url) as cat:
                    table = cat.table("t")
                    result.check(f"{backend} final version", total, table.version)
                    result.check(f"{backend} rows", total, table.to_arrow().num_rows)
            for name, r in runs.items():
                result.check(f"{name} failures", 0, r["failures"])
            dl_facts = deltalake_facts(dl_uri)
            result.check("deltalake rows = its successful commits", dl["commits"], dl_facts["rows"])
            s3_urls = {"sqlite": f"sqlite:///{root}/catalog-s3.db", "postgresql": server.new_database()}
            s3 = _on_s3(s3_urls, processes, n)
            result.details["s3"] = s3["runs"]
            for name, version in s3["versions"].items():
                result.check(f"s3 {name} final version", total, version)
            for name, r in s3["runs"].items():
                result.check(f"s3 {name} failures", 0, r["failures"])
    finally:
        pgserver.stop(server)
    for where, these in (("", runs), ("s3 ", result.details["s3"])):
        fs_rate = these["filesystem"]["commits_per_s"] or 0.0
        for backend in ("sqlite", "postgresql"):
            rate = these[backend]["commits_per_s"] or 0.0
            ratio = rate / fs_rate if fs_rate else 0.0
            result.details[f"{where}{backend}_vs_filesystem".replace(" ", "_")] = ratio
            result.criterion(f"{where}{backend} ≥ {TARGET_RATIO_VS_FILESYSTEM:g}× {where}path table",
                             ratio >= TARGET_RATIO_VS_FILESYSTEM,
                             f"{rate:.0f} vs {fs_rate:.0f} commits/s = {ratio:.2f}×")
    result.criterion("no failures", all(r["failures"] == 0 for r in runs.values()),
                     ", ".join(f"{k}: {r['failures']}" for k, r in runs.items()))
    return result
