"""Deletion vectors: which rows of a data file a DV marks deleted (PROTOCOL.md "Deletion Vectors").

A DV is a set of 0-based row positions in one Parquet file, attached to its ``add`` action by a
descriptor (``storageType``, ``pathOrInlineDv``, ``offset``, ``sizeInBytes``, ``cardinality``):

- ``i``: the bytes are inline, Z85-encoded in ``pathOrInlineDv`` (the first ``sizeInBytes``);
- ``u``: in ``<table>/<prefix>/deletion_vector_<uuid>.bin``, ``pathOrInlineDv`` being the optional
  prefix followed by the UUID's 16 bytes in Z85 (20 characters);
- ``p``: in the file at the absolute path ``pathOrInlineDv``.

A DV file is a format byte (1), then per DV at its ``offset``: its size (4 bytes, big-endian),
its bytes, their CRC-32 (4 bytes, big-endian). The bytes are a 64-bit Roaring bitmap after a
magic number: 1681511377 (little-endian) for the portable layout of the Roaring spec (bucket
count, then per bucket a 32-bit key and a 32-bit Roaring bitmap), or 1681511376 for the older
native layout (big-endian count, then per bitmap its size and bytes; the key is its index), which
the protocol's own inline example uses. ``pyroaring`` decodes the portable layout whole
(``BitMap64``) and the native layout's 32-bit bitmaps (``BitMap``).

Everything that does not add up (magic, size, checksum, cardinality, truncation) raises
:class:`~deltatx.errors.CorruptDeletionVectorError` naming the data file and where the DV is (the
DV file relative to the table root and the DV's offset in it, or "inline"), in the message and as
attributes: reading on would return deleted rows, and the broken file is the one to restore. A
missing DV file raises :class:`~deltatx.errors.MissingDeletionVectorError` (a
:class:`~deltatx.errors.CorruptDeletionVectorError`), named the same way;
other I/O errors propagate as they are.
"""

from __future__ import annotations

import functools

import struct
import uuid
import zlib
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import CorruptDeletionVectorError, MissingDeletionVectorError

if TYPE_CHECKING:
    from ..txnlog.store import LogStore

PORTABLE_MAGIC = 1681511377
NATIVE_MAGIC = 1681511376

_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"


_Z85_TABLE = np.full(256, 255, dtype=np.uint8)
_Z85_TABLE[np.frombuffer(_Z85.encode(), dtype=np.uint8)] = np.arange(85, dtype=np.uint8)
_Z85_WEIGHTS = np.array([85 ** 4, 85 ** 3, 85 ** 2, 85, 1], dtype=np.uint64)


def z85_decode(text: str) -> bytes:
    """Z85 (ZeroMQ RFC 32): every 5 characters are 4 bytes, big-endian base 85.

    Vectorized: an inline DV of a few hundred rows is a kilobyte of text, decoded by every
    conflict check that meets it."""
    if len(text) % 5:
        raise ValueError(f"Z85 text must be a multiple of 5 characters long, not {len(text)}")
    try:
        raw = np.frombuffer(text.encode("ascii"), dtype=np.uint8)
    except UnicodeEncodeError:
        raise ValueError("Z85 text holds a character outside ASCII") from None
    digits = _Z85_TABLE[raw]
    if (digits == 255).any():
        bad = text[int(np.argmax(digits == 255))]
        raise ValueError(f"{bad!r} is not a Z85 character")
    values = digits.reshape(-1, 5).astype(np.uint64) @ _Z85_WEIGHTS
    if (values > 0xFFFFFFFF).any():
        i = int(np.argmax(values > 0xFFFFFFFF)) * 5
        raise ValueError(f"Z85 group {text[i:i + 5]!r} is out of range")
    return values.astype(">u4").tobytes()


def dv_file_relative_path(path_or_inline: str) -> str:
    """``u`` descriptor -> the DV file's path relative to the table root."""
    if len(path_or_inline) < 20:
        raise ValueError(f"a 'u' deletion vector names a 20-character UUID, got {path_or_inline!r}")
    prefix, encoded = path_or_inline[:-20], path_or_inline[-20:]
    name = f"deletion_vector_{uuid.UUID(bytes=z85_decode(encoded))}.bin"
    return f"{prefix}/{name}" if prefix else name


def decode_bitmap(payload: bytes) -> np.ndarray:
    """A DV's bytes (magic number first) -> the deleted row positions, sorted, uint64."""
    from pyroaring import BitMap, BitMap64

    data = memoryview(payload)
    if len(data) < 4:
        raise ValueError("too short for a deletion vector")
    if struct.unpack_from("<I", data, 0)[0] == PORTABLE_MAGIC:
        if len(data) < 12:  # the bucket count; pyroaring reads an empty buffer out of bounds
            raise ValueError("deletion vector is truncated")
        return np.asarray(BitMap64.deserialize(bytes(data[4:])).to_array(), dtype=np.uint64)
    if struct.unpack_from(">I", data, 0)[0] != NATIVE_MAGIC:
        raise ValueError("unknown deletion vector format (magic number)")
    # native: per 32-bit bitmap its byte size, then its bytes; its key is its index
    count, pos = struct.unpack_from(">I", data, 4)[0], 8
    parts: list[np.ndarray] = []
    for key in range(count):
        size = struct.unpack_from(">I", data, pos)[0]
        pos += 4
        if pos + size > len(data):
            raise ValueError("deletion vector is truncated")
        bitmap = BitMap.deserialize(bytes(data[pos:pos + size]))
        parts.append(np.asarray(bitmap.to_array(), dtype=np.uint64) | (np.uint64(key) << np.uint64(32)))
        pos += size
    return np.concatenate(parts) if parts else np.empty(0, dtype=np.uint64)


def _read_stored(store: "LogStore", descriptor: dict[str, Any], data_path: str) -> bytes:
    kind = descriptor["storageType"]
    where = descriptor["pathOrInlineDv"]
    size = int(descriptor["sizeInBytes"])
    if kind == "i":
        return z85_decode(where)[:size]
    from .paths import data_file_path, decode_path

    relative = dv_file_relative_path(where) if kind == "u" else where
    location = data_file_path(store, decode_path(relative) if kind == "p" else relative)
    offset = int(descriptor.get("offset") or 0)
    try:
        with store.arrow_fs.open_input_file(location) as fh:
            fh.seek(offset)
            head = fh.read(4)
            if len(head) < 4:
                raise ValueError(f"file ends before offset {offset}")
            stored_size = struct.unpack(">I", head)[0]
            if stored_size != size:
                raise ValueError(f"the file says {stored_size} bytes at offset {offset}, the log {size}")
            payload = fh.read(size)
            checksum = fh.read(4)
    except FileNotFoundError as exc:
        raise MissingDeletionVectorError(
            f"deletion vector file {location!r} of data file {data_path!r} is missing; VACUUM or a copy "
            f"outside Delta may have removed it",
            data_path=data_path, dv_path=decode_path(relative) if kind == "p" else relative, dv_offset=offset,
        ) from exc
    if len(payload) < size or len(checksum) < 4:
        raise ValueError("file is truncated")
    if zlib.crc32(payload) != struct.unpack(">I", checksum)[0]:
        raise ValueError("CRC-32 checksum mismatch")
    return payload


@functools.lru_cache(maxsize=1024)
def _inline_rows(text: str, size: int) -> np.ndarray:
    """An inline DV's positions, decoded once: the descriptor holds the whole bitmap, so the
    same text always means the same rows, and a point change meets the same DV three times (its
    read, the DV it extends, each conflict check). Read-only: callers share it."""
    rows = decode_bitmap(z85_decode(text)[:size])
    rows.flags.writeable = False
    return rows


def _corrupt(message: str, descriptor: dict[str, Any], data_path: str) -> CorruptDeletionVectorError:
    """The error for a DV that does not add up, naming where it is as well as its data file:
    the data file is what the read was after, the DV file is what is broken (a flipped byte, a
    truncated copy), and one DV file holds every DV a commit wrote, so the offset says which."""
    kind = descriptor.get("storageType")
    where = descriptor.get("pathOrInlineDv")
    dv_path: str | None = None
    offset: int | None = None
    if kind == "i":
        located = "inline in the log"
    elif kind in ("u", "p") and isinstance(where, str):
        try:
            if kind == "u":
                dv_path = dv_file_relative_path(where)
            else:
                from .paths import decode_path

                dv_path = decode_path(where)
            offset = int(descriptor.get("offset") or 0)
        except (ValueError, TypeError):
            pass
        if dv_path is None:
            located = f"its descriptor names no file: pathOrInlineDv {where!r}"
        elif offset is None:
            located = f"in deletion vector file {dv_path!r}, invalid offset {descriptor.get('offset')!r}"
        else:
            located = f"in deletion vector file {dv_path!r} at offset {offset}"
    else:
        located = f"storageType {kind!r}"
    return CorruptDeletionVectorError(
        f"the deletion vector of {data_path!r} ({located}) {message}",
        data_path=data_path, dv_path=dv_path, dv_offset=offset, dv_inline=kind == "i",
    )


def deleted_rows(store: "LogStore", descriptor: dict[str, Any], data_path: str) -> np.ndarray:
    """Row positions the descriptor deletes from ``data_path`` (sorted uint64), checked."""
    try:
        if descriptor.get("storageType") not in ("i", "u", "p"):
            raise ValueError(f"unknown storageType {descriptor.get('storageType')!r}")
        if descriptor["storageType"] == "i":
            rows = _inline_rows(descriptor["pathOrInlineDv"], int(descriptor["sizeInBytes"]))
        else:
            rows = decode_bitmap(_read_stored(store, descriptor, data_path))
    except (ValueError, KeyError, TypeError, IndexError, struct.error) as exc:
        raise _corrupt(f"cannot be read: {exc}", descriptor, data_path) from exc
    expected = descriptor.get("cardinality")
    if expected is not None and int(expected) != len(rows):
        raise _corrupt(f"holds {len(rows)} rows, its descriptor says {expected}", descriptor, data_path)
    return rows


def keep_mask(num_rows: int, deleted: np.ndarray, data_path: str) -> np.ndarray:
    """A boolean mask of the rows to keep; a deleted position past the file's end is corrupt."""
    last = int(deleted.max()) if len(deleted) else -1
    if last >= num_rows:
        raise CorruptDeletionVectorError(
            f"the deletion vector of {data_path!r} deletes row {last}, but the file has {num_rows} rows"
        )
    keep = np.ones(num_rows, dtype=bool)
    keep[deleted.astype(np.int64)] = False
    return keep
