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
the protocol's own inline example uses. The 32-bit bitmaps are decoded by ``pyroaring``.

Everything that does not add up (magic, size, checksum, cardinality, truncation) raises
:class:`~deltatx.errors.CorruptDeletionVectorError` naming the data file: reading on would
return deleted rows.
"""

from __future__ import annotations

import struct
import uuid
import zlib
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import CorruptDeletionVectorError, DataFileNotFoundError

if TYPE_CHECKING:
    from ..txnlog.store import LogStore

PORTABLE_MAGIC = 1681511377
NATIVE_MAGIC = 1681511376

_Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"
_Z85_VALUE = {c: i for i, c in enumerate(_Z85)}

# Roaring 32-bit portable format (github.com/RoaringBitmap/RoaringFormatSpec)
_COOKIE_NO_RUNS = 12346
_COOKIE_RUNS = 12347
_NO_OFFSET_THRESHOLD = 4


def z85_decode(text: str) -> bytes:
    """Z85 (ZeroMQ RFC 32): every 5 characters are 4 bytes, big-endian base 85."""
    if len(text) % 5:
        raise ValueError(f"Z85 text must be a multiple of 5 characters long, not {len(text)}")
    out = bytearray()
    for i in range(0, len(text), 5):
        value = 0
        for ch in text[i:i + 5]:
            digit = _Z85_VALUE.get(ch)
            if digit is None:
                raise ValueError(f"{ch!r} is not a Z85 character")
            value = value * 85 + digit
        if value > 0xFFFFFFFF:
            raise ValueError(f"Z85 group {text[i:i + 5]!r} is out of range")
        out += value.to_bytes(4, "big")
    return bytes(out)


def dv_file_relative_path(path_or_inline: str) -> str:
    """``u`` descriptor -> the DV file's path relative to the table root."""
    if len(path_or_inline) < 20:
        raise ValueError(f"a 'u' deletion vector names a 20-character UUID, got {path_or_inline!r}")
    prefix, encoded = path_or_inline[:-20], path_or_inline[-20:]
    name = f"deletion_vector_{uuid.UUID(bytes=z85_decode(encoded))}.bin"
    return f"{prefix}/{name}" if prefix else name


def _roaring32_size(data: memoryview, start: int) -> int:
    """Bytes one serialized 32-bit Roaring bitmap takes from ``start`` (the spec's header)."""
    cookie = struct.unpack_from("<I", data, start)[0]
    pos = start + 4
    run_flags = b""
    if cookie & 0xFFFF == _COOKIE_RUNS:
        containers = (cookie >> 16) + 1
        flag_bytes = (containers + 7) // 8
        run_flags = bytes(data[pos:pos + flag_bytes])
        pos += flag_bytes
        has_offsets = containers >= _NO_OFFSET_THRESHOLD
    elif cookie == _COOKIE_NO_RUNS:
        containers = struct.unpack_from("<I", data, pos)[0]
        pos += 4
        has_offsets = True
    else:
        raise ValueError(f"not a Roaring bitmap (cookie {cookie})")
    cardinalities = [struct.unpack_from("<H", data, pos + 4 * i + 2)[0] + 1 for i in range(containers)]
    pos += 4 * containers + (4 * containers if has_offsets else 0)
    for i, cardinality in enumerate(cardinalities):
        if run_flags and run_flags[i // 8] >> (i % 8) & 1:
            runs = struct.unpack_from("<H", data, pos)[0]
            pos += 2 + 4 * runs
        elif cardinality <= 4096:
            pos += 2 * cardinality
        else:
            pos += 8192
    return pos - start


def _bitmap32(data: memoryview, start: int, end: int) -> np.ndarray:
    from pyroaring import BitMap

    return np.asarray(BitMap.deserialize(bytes(data[start:end])).to_array(), dtype=np.uint64)


def decode_bitmap(payload: bytes) -> np.ndarray:
    """A DV's bytes (magic number first) -> the deleted row positions, sorted, uint64."""
    data = memoryview(payload)
    if len(data) < 4:
        raise ValueError("too short for a deletion vector")
    # Each bitmap follows a 4-byte header: its key (portable) or its byte size (native, whose
    # key is the bitmap's index and whose size the portable layout leaves to the bitmap itself).
    if struct.unpack_from("<I", data, 0)[0] == PORTABLE_MAGIC:
        count, pos = struct.unpack_from("<Q", data, 4)[0], 12

        def header(at: int, index: int) -> tuple[int, int]:
            return struct.unpack_from("<I", data, at)[0], _roaring32_size(data, at + 4)
    elif struct.unpack_from(">I", data, 0)[0] == NATIVE_MAGIC:
        count, pos = struct.unpack_from(">I", data, 4)[0], 8

        def header(at: int, index: int) -> tuple[int, int]:
            return index, struct.unpack_from(">I", data, at)[0]
    else:
        raise ValueError("unknown deletion vector format (magic number)")
    parts: list[np.ndarray] = []
    for index in range(count):
        key, size = header(pos, index)
        pos += 4
        parts.append(_bitmap32(data, pos, pos + size) | (np.uint64(key) << np.uint64(32)))
        pos += size
    if pos > len(data):
        raise ValueError("deletion vector is truncated")
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
        raise DataFileNotFoundError(
            f"deletion vector file {location!r} of data file {data_path!r} is missing; VACUUM or a copy "
            f"outside Delta may have removed it"
        ) from exc
    if len(payload) < size or len(checksum) < 4:
        raise ValueError("file is truncated")
    if zlib.crc32(payload) != struct.unpack(">I", checksum)[0]:
        raise ValueError("CRC-32 checksum mismatch")
    return payload


def deleted_rows(store: "LogStore", descriptor: dict[str, Any], data_path: str) -> np.ndarray:
    """Row positions the descriptor deletes from ``data_path`` (sorted uint64), checked."""
    try:
        if descriptor.get("storageType") not in ("i", "u", "p"):
            raise ValueError(f"unknown storageType {descriptor.get('storageType')!r}")
        rows = decode_bitmap(_read_stored(store, descriptor, data_path))
    except (ValueError, KeyError, TypeError, struct.error, OSError) as exc:
        if isinstance(exc, DataFileNotFoundError):
            raise
        raise CorruptDeletionVectorError(f"the deletion vector of {data_path!r} cannot be read: {exc}") from exc
    expected = descriptor.get("cardinality")
    if expected is not None and int(expected) != len(rows):
        raise CorruptDeletionVectorError(
            f"the deletion vector of {data_path!r} holds {len(rows)} rows, its descriptor says {expected}"
        )
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
