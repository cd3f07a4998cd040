"""Test helper shared across test folders: the data files under a local table (log excluded).

Importable from every test module: pytest puts ``tests/`` on sys.path for its conftest.
"""

from __future__ import annotations

import os


def data_files(uri: str) -> set[str]:
    """Relative paths ('/'-separated) of every file under ``uri`` except ``_delta_log``."""
    out = set()
    for dirpath, dirnames, filenames in os.walk(uri):
        if "_delta_log" in dirnames:
            dirnames.remove("_delta_log")
        for fn in filenames:
            out.add(os.path.relpath(os.path.join(dirpath, fn), uri).replace(os.sep, "/"))
    return out
