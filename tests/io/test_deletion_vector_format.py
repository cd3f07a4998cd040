"""Decoding deletion vectors: the protocol's own examples, both bitmap layouts, every check."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from dvtables import portable_bitmap, z85_encode
from pyroaring import BitMap

from deltatx.errors import CorruptDeletionVectorError
from deltatx.io.deletion_vectors import (
    decode_bitmap,
    deleted_rows,
    dv_file_relative_path,
    keep_mask,
    z85_decode,
)


def test_the_protocols_inline_example_decodes_to_its_rows():
    # PROTOCOL.md "JSON Example 3 - Inline": rows 3, 4, 7, 11, 18, 29 (the older native layout)
    descriptor = {"storageType": "i", "pathOrInlineDv": "wi5b=000010000siXQKl0rr91000f55c8Xg0@@D72lkbi5=-{L",
                  "sizeInBytes": 40, "cardinality": 6}
    assert deleted_rows(None, descriptor, "f.parquet").tolist() == [3, 4, 7, 11, 18, 29]


def test_the_protocols_relative_path_example():
    # PROTOCOL.md "JSON Example 1": prefix "ab", then the UUID in Z85
    assert dv_file_relative_path("ab^-aqEH.-t@S}K{vb[*k^") == \
        "ab/deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin"
    assert dv_file_relative_path("^-aqEH.-t@S}K{vb[*k^") == "deletion_vector_d2c639aa-8816-431a-aaf6-d3fe2512ff61.bin"


@pytest.mark.parametrize("run_optimize", [False, True], ids=["plain", "run-containers"])
def test_portable_layout_with_several_buckets_and_every_container_kind(run_optimize):
    rows = ([1, 2, 3] + list(range(70_000, 80_000))          # array, then a dense (bitmap/run) container
            + [(1 << 32) + 5, (1 << 32) + 6] + [(7 << 32) + k for k in range(0, 20_000, 2)])
    decoded = decode_bitmap(portable_bitmap(rows, run_optimize=run_optimize))
    assert decoded.dtype == np.uint64 and decoded.tolist() == sorted(rows)


def test_z85_round_trip_and_bad_text():
    data = bytes(range(40))
    assert z85_decode(z85_encode(data)) == data
    with pytest.raises(ValueError, match="multiple of 5"):
        z85_decode("abcd")
    with pytest.raises(ValueError, match="not a Z85 character"):
        z85_decode("abc~d")
    with pytest.raises(ValueError, match="outside ASCII"):
        z85_decode("abcdé")
    with pytest.raises(ValueError, match="out of range"):
        z85_decode("00000#####")  # '#' is 84: 85**5 - 1 does not fit in 4 bytes


def test_descriptors_that_do_not_add_up_are_corrupt(tmp_path):
    good = portable_bitmap([1, 5])
    inline = {"storageType": "i", "pathOrInlineDv": z85_encode(good), "sizeInBytes": len(good), "cardinality": 2}
    assert deleted_rows(None, inline, "f").tolist() == [1, 5]
    with pytest.raises(CorruptDeletionVectorError, match="holds 2 rows, its descriptor says 3"):
        deleted_rows(None, {**inline, "cardinality": 3}, "f")
    bad_magic = struct.pack("<I", 7) + good[4:]
    with pytest.raises(CorruptDeletionVectorError, match="magic number"):
        deleted_rows(None, {**inline, "pathOrInlineDv": z85_encode(bad_magic)}, "f")
    with pytest.raises(CorruptDeletionVectorError, match="storageType"):
        deleted_rows(None, {**inline, "storageType": "x"}, "f")
    with pytest.raises(CorruptDeletionVectorError, match="deletes row 5, but the file has 5 rows"):
        keep_mask(5, np.array([1, 5], dtype=np.uint64), "f")
    assert keep_mask(4, np.array([0, 2], dtype=np.uint64), "f").tolist() == [False, True, False, True]
    assert BitMap.deserialize(good[16:]) == BitMap([1, 5])  # the layout the helper writes


@pytest.mark.parametrize("run_optimize", [False, True], ids=["plain", "run-containers"])
def test_a_truncated_portable_bitmap_is_corrupt(run_optimize):
    rows = [1, 2, 3] + list(range(70_000, 80_000)) + [(3 << 32) + 9]
    good = portable_bitmap(rows, run_optimize=run_optimize)
    for cut in (4, 8, 12, 13, len(good) // 2, len(good) - 1):
        payload = good[:cut]
        inline = {"storageType": "i", "pathOrInlineDv": z85_encode(payload), "sizeInBytes": len(payload)}
        with pytest.raises(CorruptDeletionVectorError):
            deleted_rows(None, inline, "f")


def test_io_errors_other_than_a_missing_file_are_not_called_corruption(tmp_path):
    class _FailingFs:
        def open_input_file(self, location):
            raise PermissionError(13, "Permission denied", location)

    class _Store:
        root = arrow_root = str(tmp_path)
        arrow_fs = _FailingFs()

    descriptor = {"storageType": "p", "pathOrInlineDv": f"file://{tmp_path}/dv.bin", "sizeInBytes": 10,
                  "offset": 1, "cardinality": 1}
    with pytest.raises(PermissionError) as info:
        deleted_rows(_Store(), descriptor, "f")
    assert not isinstance(info.value, CorruptDeletionVectorError)
