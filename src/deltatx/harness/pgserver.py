"""A throwaway PostgreSQL server on 127.0.0.1 for catalog tests, stress runs and benchmarks.

Why here and not in tests/: the benchmarks (P14, P15) and ``deltatx stress --workload bank2``
runs need a real server too, outside pytest. Never a mock.

initdb into a temporary directory owned by the ``postgres`` OS user (PostgreSQL refuses to run
as root), ``pg_ctl start`` on a free 127.0.0.1 port, stopped after the session.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from dataclasses import dataclass


@dataclass
class PostgresServer:
    port: int
    datadir: str
    bindir: str

    def url(self, database: str = "postgres") -> str:
        return f"postgresql://postgres@127.0.0.1:{self.port}/{database}"

    def new_database(self) -> str:
        """A fresh, empty database (one per test: catalogs never share state)."""
        import psycopg

        name = "cat_" + uuid.uuid4().hex[:12]
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f"CREATE DATABASE {name}")
        return self.url(name)


def _bindir() -> str:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not found:
        raise RuntimeError("PostgreSQL binaries not found under /usr/lib/postgresql/*/bin: "
                           "apt-get install -y postgresql (the Makefile's install step does)")
    return os.path.dirname(found[-1])


def _as_postgres(args: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return args
    if shutil.which("runuser") is None:
        raise RuntimeError("running as root but runuser is missing: cannot start PostgreSQL as 'postgres'")
    return ["runuser", "-u", "postgres", "--", *args]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start() -> PostgresServer:
    try:
        import psycopg  # noqa: F401
    except ImportError as exc:
        raise RuntimeError("psycopg 3 is not installed: pip install 'psycopg[binary]>=3.2' (extra 'catalog')") from exc
    bindir = _bindir()
    base = tempfile.mkdtemp(prefix="deltatx-pg-")
    os.chmod(base, 0o755)
    datadir = os.path.join(base, "data")
    os.makedirs(datadir)
    if os.geteuid() == 0:
        shutil.chown(base, "postgres", "postgres")
        shutil.chown(datadir, "postgres", "postgres")
    run = dict(check=True, capture_output=True, text=True, cwd="/")
    try:
        subprocess.run(_as_postgres([f"{bindir}/initdb", "-D", datadir, "-U", "postgres", "-A", "trust",
                                     "--no-sync"]), **run)
        port = _free_port()
        subprocess.run(_as_postgres([f"{bindir}/pg_ctl", "-D", datadir, "-w", "-l", f"{base}/log",
                                     "-o", f"-p {port} -h 127.0.0.1 -k {base} -c fsync=off -c max_connections=200",
                                     "start"]), **run)
    except subprocess.CalledProcessError as exc:
        raise RuntimeError(f"could not start PostgreSQL: {exc.stderr or exc.stdout}") from exc
    return PostgresServer(port, datadir, bindir)


def stop(server: PostgresServer) -> None:
    subprocess.run(_as_postgres([f"{server.bindir}/pg_ctl", "-D", server.datadir, "-m", "fast", "stop"]),
                   capture_output=True, cwd="/")
    shutil.rmtree(os.path.dirname(server.datadir), ignore_errors=True)
