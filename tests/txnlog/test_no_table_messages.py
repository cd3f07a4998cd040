"""Opening a path that is not a Delta table says why: no _delta_log folder, or one without
commits."""

from __future__ import annotations

import os

import pytest

import deltatx
from deltatx.errors import TableNotFoundError


def test_a_folder_without_a_log_is_named_as_such(tmp_path):
    with pytest.raises(TableNotFoundError, match="no _delta_log folder"):
        deltatx.Table(str(tmp_path))
    with pytest.raises(TableNotFoundError, match="no _delta_log folder"):
        deltatx.Table(str(tmp_path / "missing"))


def test_a_log_without_commits_is_named_as_such(tmp_path):
    os.makedirs(tmp_path / "t" / "_delta_log")
    with pytest.raises(TableNotFoundError, match="_delta_log holds no commits"):
        deltatx.Table(str(tmp_path / "t"))
