"""Test helper shared across test folders: the data files under a local table (log excluded), and
making them old for VACUUM.

Importable from every test module: pytest puts ``tests/`` on sys.path for its conftest.
"""

from __future__ import annotations

import os
import time
from typing import Iterable


def data_files(uri: str) -> set[str]:
    """Relative paths ('/'-separated) of every file under ``uri`` except ``_delta_log``."""
    out = set()
    for dirpath, dirnames, filenames in os.walk(uri):
        if "_delta_log" in dirnames:
            dirnames.remove("_delta_log")
        for fn in filenames:
            out.add(os.path.relpath(os.path.join(dirpath, fn), uri).replace(os.sep, "/"))
    return out


def age_files(uri: str, hours: float, relative: Iterable[str] | None = None) -> None:
    """Make files look ``hours`` old (mtime in the past, no sleeping): the named ones (relative
    to ``uri``), or every data file."""
    when = time.time() - hours * 3600
    for rel in data_files(uri) if relative is None else relative:
        os.utime(os.path.join(uri, rel), (when, when))


def flip_byte(path: str, at: int, mask: int = 0xFF) -> None:
    """Corrupt the file at ``path`` in place: XOR its byte at offset ``at`` with ``mask``."""
    with open(path, "r+b") as fh:
        fh.seek(at)
        byte = fh.read(1)
        fh.seek(at)
        fh.write(bytes([byte[0] ^ mask]))
