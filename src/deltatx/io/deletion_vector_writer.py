"""Writing deletion vectors (PROTOCOL.md "Deletion Vectors"); the reading side is deletion_vectors.py.

A merge-on-read DELETE/UPDATE/MERGE does not rewrite a data file: it marks the file's deleted row
positions in a bitmap and re-adds the file with a descriptor pointing at that bitmap. This module
turns bitmaps into descriptors:

- a bitmap is serialized as Delta's ``RoaringBitmapArray`` portable layout: the magic number
  1681511377 (little-endian), then pyroaring's ``BitMap64`` portable serialization (bucket count,
  then per bucket a 32-bit key and a 32-bit Roaring bitmap) — the layout delta-kernel, Spark and
  deltatx's reader decode;
- a small bitmap (at most :data:`INLINE_MAX_BYTES`) is stored inline (``storageType='i'``, Z85 in
  ``pathOrInlineDv``), saving a file and a read;
- the others of one commit share one ``deletion_vector_<uuid>.bin`` file at the table root
  (``storageType='u'``, the UUID Z85-encoded): a format byte (1), then per bitmap its size
  (4 bytes, big-endian), its bytes and their CRC-32 (4 bytes, big-endian), each at its ``offset``.

Descriptors come back as plain dicts in the ``deletionVector`` struct's field order, ready for the
columnar add/remove tables (``txnlog.actions.DELETION_VECTOR``).
"""

from __future__ import annotations

import struct
import uuid
import zlib
from typing import TYPE_CHECKING, Any, Iterable

import numpy as np
import pyarrow as pa
from pyroaring import BitMap64

from .deletion_vectors import _Z85, PORTABLE_MAGIC, deleted_rows, dv_file_relative_path

if TYPE_CHECKING:
    from ..txnlog.store import LogStore

#: Bitmaps up to this many bytes (a few hundred scattered rows, any number of row ranges) are
#: stored inline in the log. Up to this size a Z85 string in the commit line costs less than a DV
#: file: no file to create and later vacuum, no extra GET for every reader, and a writer that
#: rebases onto a concurrent DV (row-level concurrency) re-encodes a string instead of writing
#: and deleting a file per attempt. Every reader (Spark, delta-kernel, DuckDB, deltalake) reads
#: inline DVs of any size; larger bitmaps go to a shared ``u`` file.
INLINE_MAX_BYTES = 1024

#: The format byte that starts every DV file.
DV_FILE_FORMAT_VERSION = 1


def z85_encode(data: bytes) -> str:
    """Z85 (ZeroMQ RFC 32) of ``data``, zero-padded to a multiple of 4 bytes (the DV's
    ``sizeInBytes`` says how many of the decoded bytes are real)."""
    padded = data + b"\0" * (-len(data) % 4)
    words = np.frombuffer(padded, dtype=">u4").astype(np.uint64)
    digits = np.empty((len(words), 5), dtype=np.uint8)
    for i in range(4, -1, -1):
        digits[:, i] = (words % 85).astype(np.uint8)
        words //= 85
    alphabet = np.frombuffer(_Z85.encode(), dtype=np.uint8)
    return alphabet[digits.ravel()].tobytes().decode()


def serialize_bitmap(rows: BitMap64) -> bytes:
    """A DV's bytes: the magic number, then the 64-bit Roaring portable layout."""
    rows.run_optimize()
    return struct.pack("<I", PORTABLE_MAGIC) + rows.serialize()


def load_bitmap(store: "LogStore", descriptor: dict[str, Any] | None, data_path: str) -> BitMap64:
    """The rows a descriptor deletes, as a bitmap (empty for no DV); checked like every DV read."""
    if descriptor is None:
        return BitMap64()
    return BitMap64(deleted_rows(store, descriptor, data_path).tolist())


class DeletionVectorFile:
    """Collects the bitmaps of one commit and writes the shared ``u`` file once.

    ``add`` returns the descriptor straight away (the offset is known before the bytes land);
    ``write`` puts the file, if any bitmap went into it. ``written`` names the file for cleanup
    when the commit is abandoned.
    """

    def __init__(self, store: "LogStore", inline_max_bytes: int = INLINE_MAX_BYTES):
        self.store = store
        self.inline_max_bytes = inline_max_bytes
        self._uuid = uuid.uuid4()
        self._blob = bytearray([DV_FILE_FORMAT_VERSION])
        self.written: str | None = None

    @property
    def relative_path(self) -> str:
        return f"deletion_vector_{self._uuid}.bin"

    def add(self, rows: BitMap64) -> dict[str, Any]:
        """A descriptor for ``rows`` (inline when small, else a slot in this commit's file)."""
        payload = serialize_bitmap(rows)
        if len(payload) <= self.inline_max_bytes:
            return {"storageType": "i", "pathOrInlineDv": z85_encode(payload), "offset": None,
                    "sizeInBytes": len(payload), "cardinality": len(rows)}
        offset = len(self._blob)
        self._blob += struct.pack(">I", len(payload)) + payload + struct.pack(">I", zlib.crc32(payload))
        return {"storageType": "u", "pathOrInlineDv": z85_encode(self._uuid.bytes), "offset": offset,
                "sizeInBytes": len(payload), "cardinality": len(rows)}

    def write(self) -> None:
        """Put the shared file (nothing when every bitmap was inline)."""
        if len(self._blob) == 1 or self.written is not None:
            return
        assert dv_file_relative_path(z85_encode(self._uuid.bytes)) == self.relative_path
        location = f"{self.store.arrow_root}/{self.relative_path}"
        with self.store.arrow_fs.open_output_stream(location) as sink:
            sink.write(bytes(self._blob))
        self.written = self.relative_path


def write_bitmaps(store: "LogStore", bitmaps: Iterable[BitMap64], inline_max_bytes: int = INLINE_MAX_BYTES
                  ) -> tuple[list[dict[str, Any]], str | None]:
    """Descriptors for several bitmaps sharing one DV file; returns (descriptors, file written or None)."""
    out = DeletionVectorFile(store, inline_max_bytes)
    descriptors = [out.add(b) for b in bitmaps]
    out.write()
    return descriptors, out.written


def descriptors_array(descriptors: list[dict[str, Any] | None]) -> pa.Array:
    """The ``deletionVector`` column for a list of descriptors (None = no DV)."""
    from ..txnlog.actions import DELETION_VECTOR

    return pa.array(descriptors, type=DELETION_VECTOR)
