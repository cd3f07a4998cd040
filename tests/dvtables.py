"""Test helper: tables whose files carry deletion vectors, built to PROTOCOL.md byte for byte.

deltatx writes no deletion vectors, so tests make them here: a table is written normally, then
one commit upgrades the protocol and re-adds chosen files with a DV (inline, in a ``u`` file
under a random prefix, or at an absolute ``p`` path). DuckDB's delta extension and polars read
these tables as the oracles of the tests.
"""

from __future__ import annotations

import json
import os
import struct
import uuid
import zlib
from typing import Iterable

from pyroaring import BitMap

Z85 = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ.-:+=^!/*?&<>()[]{}@%$#"


def z85_encode(data: bytes) -> str:
    data = data + b"\0" * (-len(data) % 4)
    out = []
    for i in range(0, len(data), 4):
        value = int.from_bytes(data[i:i + 4], "big")
        digits = []
        for _ in range(5):
            digits.append(Z85[value % 85])
            value //= 85
        out.append("".join(reversed(digits)))
    return "".join(out)


def portable_bitmap(rows: Iterable[int], run_optimize: bool = False) -> bytes:
    """Delta's DV bytes: magic, then the portable 64-bit Roaring layout (buckets by high 32 bits)."""
    buckets: dict[int, list[int]] = {}
    for r in rows:
        buckets.setdefault(r >> 32, []).append(r & 0xFFFFFFFF)
    out = struct.pack("<I", 1681511377) + struct.pack("<Q", len(buckets))
    for key in sorted(buckets):
        bm = BitMap(buckets[key])
        if run_optimize:
            bm.run_optimize()
        out += struct.pack("<I", key) + bm.serialize()
    return out


def dv_file(directory: str, name: str, payloads: list[bytes]) -> list[int]:
    """Write a DV file holding ``payloads``; returns each one's offset."""
    offsets, blob = [], bytearray(b"\x01")
    for data in payloads:
        offsets.append(len(blob))
        blob += struct.pack(">I", len(data)) + data + struct.pack(">I", zlib.crc32(data))
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, name), "wb") as fh:
        fh.write(bytes(blob))
    return offsets


def add_deletion_vectors(uri: str, deleted: dict[str, list[int]], storage: str = "u") -> int:
    """Commit DVs deleting ``deleted[path]`` rows of each named file (paths as in the log).

    ``storage``: ``i`` inline, ``u`` one shared file under a random prefix, ``p`` absolute path.
    Returns the new version.
    """
    import deltatx

    table = deltatx.Table(uri)
    adds = {a["path"]: a for a in table.files().to_pylist()}
    version = table.version + 1
    payloads = {path: portable_bitmap(rows) for path, rows in deleted.items()}
    descriptors: dict[str, dict] = {}
    if storage == "i":
        for path, data in payloads.items():
            descriptors[path] = {"storageType": "i", "pathOrInlineDv": z85_encode(data), "sizeInBytes": len(data)}
    else:
        u = uuid.uuid4()
        prefix = "dv" if storage == "u" else ""
        name = f"deletion_vector_{u}.bin"
        offsets = dv_file(os.path.join(uri, prefix), name, list(payloads.values()))
        where = (prefix + z85_encode(u.bytes)) if storage == "u" else "file://" + os.path.join(os.path.abspath(uri), name)
        for (path, data), offset in zip(payloads.items(), offsets):
            descriptors[path] = {"storageType": storage, "pathOrInlineDv": where, "offset": offset,
                                 "sizeInBytes": len(data)}
    actions = [
        {"commitInfo": {"timestamp": 1, "operation": "DELETE", "operationParameters": {}}},
        {"protocol": {"minReaderVersion": 3, "minWriterVersion": 7, "readerFeatures": ["deletionVectors"],
                      "writerFeatures": ["deletionVectors"]}},
    ]
    for path, rows in deleted.items():
        add = adds[path]
        dv = {**descriptors[path], "cardinality": len(set(rows))}
        values = dict(add["partitionValues"] or [])
        actions.append({"remove": {"path": path, "deletionTimestamp": 1, "dataChange": True,
                                   "partitionValues": values, "size": add["size"]}})
        actions.append({"add": {"path": path, "partitionValues": values, "size": add["size"],
                                "modificationTime": add["modificationTime"], "dataChange": True,
                                "stats": add["stats"], "deletionVector": dv}})
    with open(os.path.join(uri, "_delta_log", f"{version:020d}.json"), "w") as fh:
        fh.write("\n".join(json.dumps(a) for a in actions) + "\n")
    return version
