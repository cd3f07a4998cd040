"""Data files: Parquet writing and reading, partition folders, add-path and partition-value strings.

``paths`` names things, ``writer`` turns rows into files plus their add actions, ``reader`` turns
add actions back into rows. The log (``deltatx.txnlog``) never touches Parquet data; this package
never touches the log.
"""

from .paths import (
    HIVE_DEFAULT_PARTITION,
    data_file_path,
    decode_path,
    encode_path,
    escape_partition_value,
    partition_dir,
    unescape_partition_value,
)
from ..txnlog.partition_values import (
    parse_partition_value,
    parse_partition_values,
    partition_values_table,
    serialize_partition_value,
)
from .reader import iter_batches, read_files
from .writer import WriteOptions, write_data_files

__all__ = [
    "HIVE_DEFAULT_PARTITION",
    "WriteOptions",
    "data_file_path",
    "decode_path",
    "encode_path",
    "escape_partition_value",
    "iter_batches",
    "parse_partition_value",
    "parse_partition_values",
    "partition_dir",
    "partition_values_table",
    "read_files",
    "serialize_partition_value",
    "unescape_partition_value",
    "write_data_files",
]
