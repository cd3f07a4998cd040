"""Names of data files: Hive partition folders, add-action path URIs, partition value strings.

Owns the three string encodings a data file's identity goes through, so that every other module
agrees on them byte for byte:

1. **Partition folder** (``a=1/b=x%3Ay``): Hive-style escaping, the character set Spark and Delta
   escape in directory names, so other engines find the same layout they would have written.
   A null partition value lives in ``__HIVE_DEFAULT_PARTITION__``.
2. **add.path**: PROTOCOL.md says the path is an RFC 2396 URI, so the (already Hive-escaped)
   relative path is percent-encoded once more: ``%3A`` in a folder name becomes ``%253A``.
   :func:`decode_path` undoes exactly that, and :func:`data_file_path` maps a decoded path,
   relative or absolute (``file:/…``, ``file:///…``, ``s3://…``), to the store's filesystem.
3. **partitionValues** strings: the protocol's serialization per type and its inverse live in
   ``txnlog.partition_values`` (the log's own code reads them too); re-exported here for the
   writers.
"""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, unquote


if TYPE_CHECKING:
    from ..txnlog.store import LogStore

#: folder name of a null (or empty-string) partition value, as Hive and Spark name it
HIVE_DEFAULT_PARTITION = "__HIVE_DEFAULT_PARTITION__"

_HIVE_ESCAPED = frozenset(
    [chr(c) for c in range(0x00, 0x20)]
    + ['"', "#", "%", "'", "*", "/", ":", "=", "?", "\\", "\x7f", "{", "[", "]", "^"]
)

# RFC 2396 path characters that need no escaping (unreserved marks plus the pchar punctuation);
# ':' is left out on purpose so that a relative path can never be mistaken for a scheme.
_URI_SAFE = "/-_.!~*'(),;$&+=@"

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*):")


# --------------------------------------------------------------------------------------------
# Partition folders
# --------------------------------------------------------------------------------------------


def escape_partition_value(v: str | None) -> str:
    """Hive-escape one path segment (a partition column name or value); null -> default folder."""
    if v is None or v == "":
        return HIVE_DEFAULT_PARTITION
    if not any(ch in _HIVE_ESCAPED for ch in v):
        return v
    return "".join(f"%{ord(ch):02X}" if ch in _HIVE_ESCAPED else ch for ch in v)


def unescape_partition_value(v: str) -> str | None:
    """Inverse of :func:`escape_partition_value` (``%XX`` with two hex digits only)."""
    if v == HIVE_DEFAULT_PARTITION:
        return None
    return re.sub(r"%([0-9A-Fa-f]{2})", lambda m: chr(int(m.group(1), 16)), v)


def partition_dir(partition_columns: list[str], values: dict[str, str | None]) -> str:
    """``col=value/…`` for the serialized partition ``values`` of one file ('' for no partitions)."""
    return "/".join(
        f"{escape_partition_value(col)}={escape_partition_value(values.get(col))}" for col in partition_columns
    )


# --------------------------------------------------------------------------------------------
# add.path URIs
# --------------------------------------------------------------------------------------------


def encode_path(relative: str) -> str:
    """Percent-encode a relative file path into the URI form ``add.path`` requires."""
    return quote(relative, safe=_URI_SAFE)


def decode_path(add_path: str) -> str:
    """The path an ``add.path`` URI names (relative, or absolute with its scheme kept)."""
    return unquote(add_path) if "%" in add_path else add_path


def data_file_path(store: "LogStore", decoded: str) -> str:
    """Where (in ``store.arrow_fs``) the file named by a *decoded* add path lives.

    String surgery rather than ``urlparse``: a decoded path may legitimately contain ``#`` or
    ``?``, which a URI parser would take for a fragment or a query.
    """
    m = _SCHEME.match(decoded)
    if m is None or len(m.group(1)) == 1:  # relative, or a Windows drive letter
        return store.data_path(decoded)
    scheme = m.group(1).lower()
    rest = decoded[m.end():]
    if scheme in ("file", "local"):
        if rest.startswith("//"):
            rest = rest[2:]
            if not rest.startswith("/"):  # file://host/path: drop the host
                rest = rest[rest.find("/"):] if "/" in rest else "/"
        return rest
    if scheme in ("s3", "s3a", "s3n", "gs", "gcs", "abfs", "abfss", "az"):
        return rest[2:] if rest.startswith("//") else rest
    if scheme == "memory":
        return "/" + rest.lstrip("/")
    return store.data_path(decoded)


def missing_files(store: "LogStore", decoded: list[str]) -> list[str]:
    """Those of ``decoded`` (decoded add paths: relative to the table root, or absolute) whose
    file is gone, in one batched stat call."""
    if not decoded:
        return []
    gone = absent(store.arrow_fs, [data_file_path(store, p) for p in decoded])
    return [decoded[i] for i in gone]


def absent(filesystem: Any, locations: list[str]) -> list[int]:
    """Indexes of the ``locations`` (full paths on ``filesystem``) no file is at: one batched stat."""
    import pyarrow.fs as pafs

    infos = filesystem.get_file_info(locations) if locations else []
    return [i for i, info in enumerate(infos) if info.type == pafs.FileType.NotFound]


def first_and_more(names: list[str]) -> str:
    """``'a'`` or ``'a' and 3 more``: how an error names the files it found (never empty)."""
    return f"{names[0]!r}" + (f" and {len(names) - 1} more" if len(names) > 1 else "")
