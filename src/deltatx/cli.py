"""The ``deltatx`` command line: inspect and maintain tables, and stress-test concurrent writers.

Owns argument parsing, rendering (rich tables for people, ``--json`` for machines) and the
mapping from errors to exit codes. Table logic stays in :class:`deltatx.Table`; the stress run
is :func:`deltatx.harness.run_stress`. Subcommands::

    deltatx history URI [--limit N]
    deltatx describe URI
    deltatx properties URI [--set k=v ...] | [--unset KEY ... [--if-exists]]
    deltatx optimize URI [--where PRED] [--target-size BYTES]
    deltatx vacuum URI [--retention-hours H] [--dry-run] [--no-enforce-retention]
    deltatx cleanup-metadata URI [--dry-run]   (expired _delta_log files: Table.cleanup_metadata)
    deltatx checkpoint URI
    deltatx changes URI --from V [--to V] [--where PRED] [--limit N]   (change data feed)
    deltatx stress URI [--processes N] [--ops N] [--workload mixed|bank|append]
                       [--isolation Serializable|WriteSerializable] [--duration S] [--seed N]
                       [--row-level]   (deletion vectors + row tracking; adds the row_ids checker)
    deltatx stress DIR --workload bank2 --catalog URL [--crash-at staged|ratified|published[:N]]
                       (two catalog tables under DIR, created if missing; transfers between them
                       in catalog transactions, checked at every catalog commit; --crash-at kills
                       writer 0 at the Nth arrival at that phase of a commit, then checks)

Every subcommand takes ``--json`` and ``--storage-option k=v`` (repeatable). Exit codes:
0 success; 1 the stress run found an anomaly; 2 a usage error, a bad URI, a missing table or
any other :class:`~deltatx.errors.DeltaTxError` (printed as one line, never a traceback); 3 a
concurrent commit won (a ``ConcurrentModificationException``: retrying may succeed).
"""

from __future__ import annotations

import argparse
import base64
import json
import math
import os
import sys
from contextlib import contextmanager, nullcontext
from datetime import datetime, timezone
from typing import Any, Callable, Iterator, Sequence

import pyarrow.compute as pc

from . import __version__
from .errors import ConcurrentModificationException, DeltaTxError, InvalidPropertyError, VacuumRetentionError

EXIT_OK = 0
EXIT_ANOMALY = 1
EXIT_USAGE = 2
EXIT_CONFLICT = 3

WORKLOADS = ("mixed", "bank", "append", "bank2")
ISOLATION_LEVELS = ("Serializable", "WriteSerializable")
#: the phases of a catalog commit bank2 can crash a writer at (deltatx.harness.bank2.CRASH_PHASES;
#: spelled here so that building the parser imports no harness)
CRASH_PHASES = ("staged", "ratified", "published")


class CliError(Exception):
    """A problem the user can fix (bad option value, unusable URI): one line, exit code 2."""


# --------------------------------------------------------------------------------------------
# Parsing
# --------------------------------------------------------------------------------------------


def _key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value


def _property_name(text: str) -> str:
    if not text.strip():
        raise argparse.ArgumentTypeError("expected a property name, got an empty one")
    return text.strip()


def _number_parser(convert, ok, expected: str):
    """An argparse type: ``convert(text)`` that must satisfy ``ok``; else "expected <expected>"."""
    def parse(text: str):
        try:
            value = convert(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}") from None
        if not ok(value):
            raise argparse.ArgumentTypeError(f"expected {expected}, got {text!r}")
        return value
    return parse


_positive_int = _number_parser(int, lambda v: v > 0, "a positive integer")
_non_negative_int = _number_parser(int, lambda v: v >= 0, "a version (an integer ≥ 0)")
_non_negative_float = _number_parser(float, lambda v: v >= 0, "a number ≥ 0")
_seconds = _number_parser(float, lambda v: math.isfinite(v) and 0 < v <= 7 * 24 * 3600,
                          "a number of seconds > 0 (at most a week)")


def _crash_point(text: str) -> tuple[str, int]:
    """``PHASE`` or ``PHASE:N`` (N ≥ 1, default 1) → ``(phase, n)``, as run_bank2's ``crash_at``."""
    phase, sep, count = text.strip().partition(":")
    if phase not in CRASH_PHASES:
        raise argparse.ArgumentTypeError(f"expected {'|'.join(CRASH_PHASES)}[:N], got {text!r}")
    if not sep:
        return phase, 1
    try:
        n = int(count)
    except ValueError:
        n = 0
    if n < 1:
        raise argparse.ArgumentTypeError(f"expected {phase}:N with N a positive integer (the Nth arrival), "
                                         f"got {text!r}")
    return phase, n


def _location(text: str) -> str:
    """A table location; an empty one would be the working directory, which nobody typed."""
    if not text.strip():
        raise argparse.ArgumentTypeError("the table location is empty: give a path, file:// or s3://bucket/path")
    return text


def build_parser() -> argparse.ArgumentParser:
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("uri", type=_location, help="table location: a path, file:// or s3://bucket/path")
    common.add_argument("--json", action="store_true", help="print machine-readable JSON on stdout")
    common.add_argument("--storage-option", action="append", type=_key_value, default=[], metavar="K=V",
                        help="storage option (e.g. endpoint_url=http://127.0.0.1:9000); repeatable")

    parser = argparse.ArgumentParser(prog="deltatx", description="Inspect, maintain and stress-test Delta tables.")
    parser.add_argument("--version", action="version", version=f"deltatx {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("history", parents=[common], help="commits, newest first")
    p.add_argument("--limit", type=_positive_int, default=None, help="only the newest N commits")

    sub.add_parser("describe", parents=[common], help="schema, partitioning, properties, files, size, protocol")

    p = sub.add_parser("properties", parents=[common],
                       help="show table properties, set some with --set or remove some with --unset")
    p.add_argument("--set", action="append", type=_key_value, default=[], metavar="K=V", dest="set_values",
                   help="property to set (repeatable); all are committed as one version")
    p.add_argument("--unset", action="append", type=_property_name, default=[], metavar="KEY", dest="unset_keys",
                   help="property to remove (repeatable; UNSET TBLPROPERTIES); all are committed as one version")
    p.add_argument("--if-exists", action="store_true",
                   help="with --unset: skip keys the table does not have instead of failing")

    p = sub.add_parser("optimize", parents=[common], help="compact small files")
    p.add_argument("--where", default=None, help="only files matching this SQL predicate")
    p.add_argument("--target-size", type=_positive_int, default=None, help="target file size in bytes")

    p = sub.add_parser("vacuum", parents=[common], help="delete files no retained version needs")
    p.add_argument("--retention-hours", type=_non_negative_float, default=None,
                   help="keep files removed within this many hours (default: the table's retention)")
    p.add_argument("--dry-run", action="store_true", help="list the files without deleting them")
    p.add_argument("--no-enforce-retention", action="store_true",
                   help="allow a retention shorter than delta.deletedFileRetentionDuration")

    p = sub.add_parser("cleanup-metadata", parents=[common],
                       help="delete expired _delta_log files (older than delta.logRetentionDuration)")
    p.add_argument("--dry-run", action="store_true", help="list the files without deleting them")

    sub.add_parser("checkpoint", parents=[common], help="write a checkpoint of the latest version")

    p = sub.add_parser("changes", parents=[common], help="the change data feed of a range of versions")
    p.add_argument("--from", dest="from_version", type=_non_negative_int, required=True, metavar="V",
                   help="first version (inclusive)")
    p.add_argument("--to", dest="to_version", type=_non_negative_int, default=None, metavar="V",
                   help="last version (inclusive; default: the latest)")
    p.add_argument("--where", default=None, help="only change rows matching this SQL predicate")
    p.add_argument("--limit", type=_positive_int, default=None, help="show at most N rows (human output)")

    for name, command in sub.choices.items():  # a catalog-managed table is opened through its catalog
        command.add_argument("--catalog", default=None, metavar="URL", dest="catalog_url",
                             help="URI is a table name in this catalog (sqlite:///path/catalog.db or "
                                  "postgresql://...), opened through it")

    p = sub.add_parser("stress", parents=[common], help="run concurrent writers and check their history")
    p.add_argument("--processes", type=_positive_int, default=8, help="writer processes (default 8)")
    p.add_argument("--ops", type=_positive_int, default=250, help="operations per process (default 250)")
    p.add_argument("--workload", choices=WORKLOADS, default="mixed")
    p.add_argument("--isolation", choices=ISOLATION_LEVELS, default=None,
                   help="the table's isolation level (default WriteSerializable); not with --workload bank2, "
                        "whose tables keep their default level")
    p.add_argument("--duration", type=_seconds, default=None,
                   help="run for this many seconds instead of a fixed number of operations; not with "
                        "--workload bank2, which runs --ops transfers per process")
    p.add_argument("--seed", type=int, default=0, help="seed of the workload's random choices")
    p.add_argument("--row-level", action="store_true",
                   help="create the table with deletion vectors and row tracking (row-level concurrency; "
                        "the row_ids checker runs too); not with --workload bank2")
    p.add_argument("--catalog", default=None, metavar="URL",
                   help="catalog URL (sqlite:///path/catalog.db or postgresql://...); required by --workload "
                        "bank2, whose two tables are created under URI (a local directory, created if missing); "
                        "--storage-option applies to those tables")
    p.add_argument("--crash-at", type=_crash_point, default=None, metavar="PHASE[:N]",
                   help=f"with --workload bank2: crash injection — writer 0 dies (os._exit) the Nth time "
                        f"(default 1) it reaches PHASE of a catalog commit ({', '.join(CRASH_PHASES)}); the "
                        f"others go on, then the checker proves every transfer changed both tables or none")
    return parser


# --------------------------------------------------------------------------------------------
# Output
# --------------------------------------------------------------------------------------------


def _console(stderr: bool = False):
    from rich.console import Console

    stream = sys.stderr if stderr else sys.stdout
    width = None if stream.isatty() else 200  # piped: wide enough that no table is cropped
    # markup off: table content (predicates, values, property text) is printed as it is; "[/]" in
    # a value crashed rich and "[red]x" lost its brackets
    return Console(file=stream, width=width, highlight=False, soft_wrap=False, markup=False)


def _print_json(value: Any) -> None:
    """Strict JSON (RFC 8259) as Spark's to_json writes values: NaN and infinities as the strings
    "NaN" / "Infinity" / "-Infinity", binary as base64; anything else without a JSON form as text."""
    sys.stdout.write(json.dumps(_jsonable(value), indent=2, default=str, ensure_ascii=False, allow_nan=False) + "\n")


def _jsonable(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    return value


def _iso(ms: Any) -> str:
    if not isinstance(ms, (int, float)):
        return ""
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + "Z"


def _human_bytes(n: int) -> str:
    size = float(n)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if size < 1024 or unit == "TiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{n} B"


#: C0 controls, DEL and C1 controls: a value holding them (ESC starts a terminal escape sequence)
#: would drive the user's terminal instead of being shown
_CONTROL = {c: f"\\x{c:02x}" for c in (*range(0x20), *range(0x7F, 0xA0))}


def _shown(value: Any) -> str:
    """A value as a table cell shows it: text with control characters written out (``\\x1b``)."""
    return "" if value is None else str(value).translate(_CONTROL)


def _kv_table(title: str, rows: Sequence[tuple[str, Any]]):
    from rich.table import Table as RichTable

    table = RichTable(title=title, show_header=False, title_justify="left")
    table.add_column("key", style="bold")
    table.add_column("value", overflow="fold")
    for key, value in rows:
        table.add_row(_shown(key), _shown(value))
    return table


def _pairs(mapping: Any) -> str:
    """``{"mode": "Append", "n": "3"}`` → ``mode=Append n=3`` (commitInfo maps hold strings)."""
    if not isinstance(mapping, dict):
        return "" if mapping is None else str(mapping)
    return " ".join(f"{k}={v}" for k, v in mapping.items())


# --------------------------------------------------------------------------------------------
# Commands
# --------------------------------------------------------------------------------------------


@contextmanager
def _uri_errors(uri: str) -> Iterator[None]:
    """A URI no store understands (unknown scheme, missing fsspec backend) becomes a one-line CliError."""
    try:
        yield
    except DeltaTxError:
        raise
    except (ValueError, ImportError, NotADirectoryError) as exc:
        raise CliError(f"cannot open {uri!r}: {exc}") from None


def _open(args: argparse.Namespace):
    """The table at ``args.uri`` — or, with ``--catalog``, the table of that name in the catalog
    (a catalog-managed table refuses to be opened by path). The catalog is closed at exit."""
    import deltatx

    storage_options = dict(args.storage_option) or None
    if getattr(args, "catalog_url", None):
        import atexit

        url = args.catalog_url
        if url.lower().startswith("sqlite:"):
            from .catalog.db import sqlite_database_path

            path = sqlite_database_path(url)
            if not os.path.exists(path):
                # opening would create an empty catalog: a typo in the path is a missing catalog here
                raise CliError(f"no catalog database at {path!r} (from --catalog {url!r})")
        catalog = deltatx.Catalog(url, storage_options=storage_options)
        atexit.register(catalog.close)
        return catalog.table(args.uri)
    with _uri_errors(args.uri):
        return deltatx.Table(args.uri, storage_options=storage_options)


def cmd_history(args: argparse.Namespace) -> int:
    table = _open(args)
    history = table.history(limit=args.limit)
    if args.json:
        _print_json(history)
        return EXIT_OK
    from rich.table import Table as RichTable

    out = RichTable(title=f"History of {args.uri}", title_justify="left")
    out.add_column("version", justify="right", no_wrap=True)
    out.add_column("timestamp (UTC)", no_wrap=True)
    out.add_column("operation", no_wrap=True)
    out.add_column("read version", justify="right", no_wrap=True)
    out.add_column("isolation", no_wrap=True)
    out.add_column("parameters / metrics", overflow="fold", min_width=40)
    for entry in history:
        details = _shown(_pairs(entry.get("operationParameters")))
        metrics = _shown(_pairs(entry.get("operationMetrics")))
        out.add_row(
            _shown(entry.get("version")),
            _iso(entry.get("timestamp")),
            _shown(entry.get("operation", "")),
            _shown(entry.get("readVersion")),
            _shown(entry.get("isolationLevel", "")),
            details + ("\n" + metrics if details and metrics else metrics),
        )
    _console().print(out)
    return EXIT_OK


def describe_table(table) -> dict[str, Any]:
    """What ``deltatx describe`` shows, as a JSON-ready dict."""
    files = table.files()
    total = pc.sum(files["size"]).as_py() if files.num_rows else 0
    metadata = table.metadata
    return {
        "uri": table.uri,
        "version": table.version,
        "id": metadata.id,
        "name": metadata.name,
        "description": metadata.description,
        "created_time": metadata.created_time,
        "schema": [{"name": f.name, "type": str(f.type), "nullable": f.nullable} for f in table.schema],
        "partition_columns": table.partition_columns,
        "properties": table.properties,
        "isolation_level": _isolation_text(table),
        "num_files": files.num_rows,
        "size_bytes": int(total or 0),
        "protocol": table.protocol.to_json(),
    }


def _isolation_text(table) -> str:
    """The table's isolation level; a value in the log that no writer accepts is shown with the
    way out instead of failing ``describe``, the command a user runs to find what is wrong."""
    try:
        return str(table.isolation_level)
    except InvalidPropertyError as exc:
        return f"invalid: {exc} Fix it with: deltatx properties URI --set delta.isolationLevel=WriteSerializable"


def cmd_describe(args: argparse.Namespace) -> int:
    info = describe_table(_open(args))
    if args.json:
        _print_json(info)
        return EXIT_OK
    protocol = info["protocol"]
    features = sorted(set(protocol.get("readerFeatures") or []) | set(protocol.get("writerFeatures") or []))
    console = _console()
    console.print(_kv_table(f"Table {info['uri']}", [
        ("version", info["version"]),
        ("id", info["id"]),
        ("name", info["name"]),
        ("created", _iso(info["created_time"])),
        ("partitioned by", ", ".join(info["partition_columns"]) or "(not partitioned)"),
        ("isolation level", info["isolation_level"]),
        ("files", info["num_files"]),
        ("size", f"{_human_bytes(info['size_bytes'])} ({info['size_bytes']} bytes)"),
        ("protocol", f"reader {protocol['minReaderVersion']}, writer {protocol['minWriterVersion']}"
                     + (f"; features: {', '.join(features)}" if features else "")),
    ]))
    from rich.table import Table as RichTable

    schema = RichTable(title="Schema", title_justify="left")
    for column in ("column", "type", "nullable", "partition"):
        schema.add_column(column)
    for field in info["schema"]:
        schema.add_row(_shown(field["name"]), _shown(field["type"]), "yes" if field["nullable"] else "no",
                       "yes" if field["name"] in info["partition_columns"] else "")
    console.print(schema)
    console.print(_kv_table("Properties", sorted(info["properties"].items()) or [("(none)", "")]))
    return EXIT_OK


def cmd_properties(args: argparse.Namespace) -> int:
    _check_property_changes(args)
    table = _open(args)
    committed = False
    # values the table has already, or only missing keys with --if-exists, commit nothing
    # (attempts == 0): say so
    if args.set_values:
        committed = table.set_properties(dict(args.set_values)).attempts > 0
    elif args.unset_keys:
        try:
            committed = table.unset_properties(args.unset_keys, if_exists=args.if_exists).attempts > 0
        except InvalidPropertyError as exc:  # say it in the command line's words
            raise InvalidPropertyError(str(exc).replace("pass if_exists=True", "pass --if-exists")) from None
    properties = table.properties
    if args.json:
        _print_json({"version": table.version, "committed": committed, "properties": properties})
        return EXIT_OK
    changing = bool(args.set_values or args.unset_keys)
    title = f"Properties at version {table.version}" + (" (committed)" if committed else
                                                         " (nothing changed)" if changing else "")
    _console().print(_kv_table(title, sorted(properties.items()) or [("(none)", "")]))
    return EXIT_OK


def _check_property_changes(args: argparse.Namespace) -> None:
    """One change per run: SET and UNSET are separate commands in Delta, each one commit; a key
    in both would leave its outcome to the order they ran in."""
    if args.set_values and args.unset_keys:
        raise CliError("--set and --unset cannot be combined: run one, then the other")
    if args.if_exists and not args.unset_keys:
        raise CliError("--if-exists only goes with --unset")


def _commit_summary(result) -> dict[str, Any]:
    return {"version": result.version, "operation": result.operation, "attempts": result.attempts,
            "metrics": result.metrics, "read_version": result.read_version}


def cmd_optimize(args: argparse.Namespace) -> int:
    table = _open(args)
    result = table.optimize(where=args.where, target_size=args.target_size)
    summary = _commit_summary(result)
    summary["committed"] = result.attempts > 0
    if args.json:
        _print_json(summary)
        return EXIT_OK
    rows = [("version", result.version),
            ("committed", "yes" if summary["committed"] else "no (nothing to compact)")]
    rows += sorted((k, v) for k, v in (result.metrics or {}).items())
    _console().print(_kv_table(f"OPTIMIZE {args.uri}", rows))
    return EXIT_OK


def cmd_vacuum(args: argparse.Namespace) -> int:
    table = _open(args)
    try:
        files = table.vacuum(retention_hours=args.retention_hours, dry_run=args.dry_run,
                             enforce_retention_duration=not args.no_enforce_retention)
    except VacuumRetentionError as exc:  # say it in the command line's words
        raise VacuumRetentionError(
            str(exc).replace("pass enforce_retention_duration=False", "pass --no-enforce-retention")
            .replace("with set_properties()", "with deltatx properties --set")) from None
    _print_deleted(args, "VACUUM", "file(s)", files, "")
    return EXIT_OK


def _print_deleted(args: argparse.Namespace, title: str, noun: str, files: list[str], prefix: str,
                   **extra: object) -> None:
    """What a deleting command (VACUUM, metadata cleanup) deleted or, with --dry-run, would."""
    if args.json:
        _print_json({"dry_run": args.dry_run, "num_files": len(files), "files": files, **extra})
        return
    verb = "would delete" if args.dry_run else "deleted"
    console = _console()
    console.print(f"{title} {args.uri}: {verb} {len(files)} {noun}")
    for path in files:
        console.print(f"  {prefix}{path}", markup=False)


def cmd_cleanup_metadata(args: argparse.Namespace) -> int:
    """Exit 1 (EXIT_ANOMALY) when expired files could not be shown safe to delete: the log needs
    a look (a gap, an unreadable checkpoint), and a script should hear it."""
    import warnings

    from .errors import LogCleanupWarning

    table = _open(args)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", LogCleanupWarning)
        files = table.cleanup_metadata(dry_run=args.dry_run)
    blocked = next((str(w.message) for w in caught if issubclass(w.category, LogCleanupWarning)), None)
    _print_deleted(args, "METADATA CLEANUP", "log file(s)", files, "_delta_log/", blocked=blocked)
    if blocked and not args.json:
        _console().print(f"  nothing could be deleted: {blocked}", markup=False)
    return EXIT_ANOMALY if blocked else EXIT_OK


def cmd_checkpoint(args: argparse.Namespace) -> int:
    table = _open(args)
    table.checkpoint()
    if args.json:
        _print_json({"version": table.version, "checkpoint": f"{table.version:020d}.checkpoint.parquet"})
        return EXIT_OK
    _console().print(f"checkpoint written at version {table.version}")
    return EXIT_OK


def cmd_changes(args: argparse.Namespace) -> int:
    table = _open(args)
    rows = table.changes(starting_version=args.from_version, ending_version=args.to_version, where=args.where)
    rows = rows.take(pc.sort_indices(rows["_commit_version"]))  # for people and scripts: version order
    if args.json:
        records = rows.to_pylist()
        for record in records:
            stamp = record.get("_commit_timestamp")
            if stamp is not None:
                record["_commit_timestamp"] = stamp.isoformat(timespec="milliseconds") + "Z"
        _print_json(records)
        return EXIT_OK
    from rich.table import Table as RichTable

    shown = rows if args.limit is None else rows.slice(0, args.limit)
    last = min(args.to_version, table.version) if args.to_version is not None else table.version
    out = RichTable(title=f"Changes of {args.uri}, versions {args.from_version}..{last}: {rows.num_rows} row(s)",
                    title_justify="left")
    for name in shown.column_names:
        out.add_column(name, no_wrap=name.startswith("_"), overflow="fold")
    for record in shown.to_pylist():
        out.add_row(*(_shown(v) for v in record.values()))
    console = _console()
    console.print(out)
    if shown.num_rows < rows.num_rows:
        console.print(f"({rows.num_rows - shown.num_rows} more row(s); use --json for all)")
    return EXIT_OK


def _anomaly_line(anomaly: Any) -> Any:
    """"anomaly" in red, then the checker and its message as they are (never read as markup)."""
    from rich.text import Text

    return Text.assemble(("anomaly", "red"), f" [{anomaly.checker}] {anomaly.message}")


def _stress_progress(enabled: bool):
    """A (callback, context manager) pair drawing a rich progress bar on stderr."""
    if not enabled:
        return None, nullcontext()
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    progress = Progress(TextColumn("stress"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                        console=_console(stderr=True), transient=True)
    task = progress.add_task("stress", total=None)

    def update(done: int, total: int | None) -> None:
        progress.update(task, completed=done, total=total)

    return update, progress


def cmd_stress(args: argparse.Namespace) -> int:
    try:
        from .harness import run_stress
        from .harness.stress import ROW_LEVEL_PROPERTIES
    except ImportError as exc:
        raise CliError(f"the stress harness is not available ({exc})") from None
    from .txnlog.store import open_store

    if args.crash_at is not None and args.workload != "bank2":
        raise CliError(f"--crash-at only goes with --workload bank2 (got --workload {args.workload})")
    if args.workload == "bank2" or args.catalog is not None:
        return _stress_bank2(args)
    with _uri_errors(args.uri):  # before any process starts
        open_store(args.uri, dict(args.storage_option) or None)
    callback, context = _stress_progress(not args.json)
    with context:
        report = run_stress(
            args.uri, processes=args.processes, ops=args.ops, workload=args.workload,
            isolation=args.isolation or "WriteSerializable", duration_s=args.duration,
            storage_options=dict(args.storage_option) or None, seed=args.seed, progress=callback,
            properties=ROW_LEVEL_PROPERTIES if args.row_level else None,
        )
    failed = bool(report.anomalies) or not report.ok
    if args.json:
        _print_json(report.to_dict())
        return EXIT_ANOMALY if failed else EXIT_OK
    console = _console()
    console.print(_kv_table(f"Stress {args.uri} ({args.workload}, {args.isolation or 'WriteSerializable'})", [
        ("processes × ops", f"{args.processes} × {args.ops}") if args.duration is None
        else ("processes × time", f"{args.processes} × {args.duration:g} s"),
        ("commits", report.commits),
        ("commits/s", f"{report.commits_per_s:.1f}"),
        ("attempts", report.attempts),
        ("anomalies", len(report.anomalies)),
        ("result", "OK" if not failed else "ANOMALIES FOUND"),
    ]))
    conflicts = sorted((report.conflicts_by_class or {}).items())
    console.print(_kv_table("Conflicts by class", conflicts or [("(none)", 0)]))
    errors = sorted((getattr(report, "errors_by_class", None) or {}).items())
    if errors:
        console.print(_kv_table("Other errors by class", errors))
    for anomaly in report.anomalies:
        console.print(_anomaly_line(anomaly))
    return EXIT_ANOMALY if failed else EXIT_OK


def _stress_bank2(args: argparse.Namespace) -> int:
    """``--workload bank2 --catalog URL``: two catalog tables, transfers across them."""
    if args.workload != "bank2":
        raise CliError(f"--catalog is only used by --workload bank2 (got --workload {args.workload})")
    if args.catalog is None:
        raise CliError("--workload bank2 needs --catalog URL (sqlite:///path/catalog.db or postgresql://...)")
    if "://" in args.uri:
        raise CliError(f"--workload bank2 creates its tables under a local directory, got {args.uri!r}")
    ignored = [flag for flag, given in (("--duration", args.duration is not None), ("--row-level", args.row_level),
                                        ("--isolation", args.isolation is not None)) if given]
    if ignored:  # its transfers read what they write, and every writer runs --ops of them
        raise CliError(f"--workload bank2 does not take {', '.join(ignored)}: it runs --ops transfers per "
                       f"process on two catalog tables at their default level")
    from .catalog.db import open_database
    from .harness.bank2 import BANK2_TABLES, run_bank2
    from .txnlog.store import open_store

    options = dict(args.storage_option) or None
    with _uri_errors(args.uri):  # a bad option value (fsync=maybe) fails here, before anything is made
        open_store(os.path.join(args.uri, BANK2_TABLES[0]), options)
    # DIR first, as run_bank2 and every other workload make it: the README's
    # --catalog sqlite:///DIR/catalog.db lives inside it
    made = _make_directory(args.uri)
    try:
        open_database(args.catalog).close()  # a bad URL fails here, before any process starts
    except BaseException:
        _remove_made(made, args.uri)  # a refused run leaves nothing behind
        raise
    callback, context = _stress_progress(not args.json)
    with context:
        report = run_bank2(args.catalog, args.uri, processes=args.processes, ops=args.ops, seed=args.seed,
                           progress=callback, crash_at=args.crash_at, storage_options=options)
    if args.json:
        _print_json(report.to_dict())
        return EXIT_OK if report.ok else EXIT_ANOMALY
    console = _console()
    rows: list[tuple[str, Any]] = [
        ("processes × ops", f"{args.processes} × {args.ops}"),
        ("commits", report.commits),
        ("commits/s", f"{report.commits_per_s:.1f}"),
        ("catalog commits", report.catalog_commits),
    ]
    if args.crash_at is not None:
        phase, nth = args.crash_at
        rows.append(("crash injected", f"writer 0 at arrival {nth} at '{phase}': "
                     + ("killed there" if report.crashed else "never got there, nothing was killed")))
    rows += [("anomalies", len(report.anomalies)), ("result", "OK" if report.ok else "ANOMALIES FOUND")]
    console.print(_kv_table(f"Stress bank2 {args.uri} (catalog {args.catalog})", rows))
    for anomaly in report.anomalies:
        console.print(_anomaly_line(anomaly))
    return EXIT_OK if report.ok else EXIT_ANOMALY


def _make_directory(path: str) -> str | None:
    """``os.makedirs(path)``; returns the topmost directory this call made (None: it existed)."""
    path = os.path.abspath(path)
    top = None
    probe = path
    while not os.path.exists(probe):
        top = probe
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    os.makedirs(path, exist_ok=True)
    return top


def _remove_made(top: str | None, path: str) -> None:
    """Remove the empty directories :func:`_make_directory` made, from ``path`` up to ``top``
    (best effort: anything that is not empty stays)."""
    if top is None:
        return
    current = os.path.abspath(path)
    while True:
        try:
            os.rmdir(current)
        except OSError:
            return
        if current == top:
            return
        current = os.path.dirname(current)


COMMANDS: dict[str, Callable[[argparse.Namespace], int]] = {
    "history": cmd_history,
    "describe": cmd_describe,
    "properties": cmd_properties,
    "optimize": cmd_optimize,
    "vacuum": cmd_vacuum,
    "cleanup-metadata": cmd_cleanup_metadata,
    "checkpoint": cmd_checkpoint,
    "changes": cmd_changes,
    "stress": cmd_stress,
}


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())
    return text or type(exc).__name__


#: modules whose exceptions are storage errors (S3 through s3fs/botocore), not deltatx bugs
_STORAGE_CLIENTS = ("botocore", "aiobotocore", "s3fs", "fsspec")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``deltatx`` console script; returns the exit code."""
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help, or a usage error argparse already printed
        return exc.code if isinstance(exc.code, int) else EXIT_USAGE
    try:
        return COMMANDS[args.command](args)
    except (DeltaTxError, CliError) as exc:
        named = isinstance(exc, CliError) or _one_line(exc).startswith(f"{type(exc).__name__}:")
        kind = "" if named else f"{type(exc).__name__}: "  # a conflict's message names its class already
        hint = ""
        if type(exc).__name__ == "CatalogManagedTableError" and not getattr(args, "catalog_url", None):
            hint = " (here: pass the table's name and --catalog URL)"
        sys.stderr.write(f"deltatx {args.command}: error: {kind}{_one_line(exc)}{hint}\n")
        return EXIT_CONFLICT if isinstance(exc, ConcurrentModificationException) else EXIT_USAGE
    except OSError as exc:
        sys.stderr.write(f"deltatx {args.command}: storage error: {type(exc).__name__}: {_one_line(exc)}\n")
        return EXIT_USAGE
    except Exception as exc:
        if not type(exc).__module__.startswith(_STORAGE_CLIENTS):
            raise
        # the object store's client (no credentials, an endpoint that does not answer)
        sys.stderr.write(f"deltatx {args.command}: storage error: {type(exc).__name__}: {_one_line(exc)}\n")
        return EXIT_USAGE
    except KeyboardInterrupt:
        sys.stderr.write(f"deltatx {args.command}: interrupted\n")
        return 130


if __name__ == "__main__":  # pragma: no cover - `python -m deltatx.cli`
    sys.exit(main())
