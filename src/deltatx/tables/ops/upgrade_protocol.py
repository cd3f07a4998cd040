"""Upgrade a table's protocol to given reader/writer versions (delta-spark's ``upgradeTableProtocol``).

The protocol only ever grows (PROTOCOL.md: a client must not lower what a table requires), so a
lower version than the table's is refused with :class:`ProtocolDowngradeError`, and asking for
the versions the table already has commits nothing (Delta skips it too). Moving to the named
features protocol (writer 7, reader 3) lists the features the old legacy versions implied, so
nothing the table promised is lost; the result must still be a protocol deltatx can write
(:func:`check_writable`), or the call fails before anything is committed.
"""

from __future__ import annotations

import numbers
from typing import TYPE_CHECKING

import orjson

from ...errors import InvalidArgumentError, ProtocolDowngradeError
from ...txnlog.actions import Protocol
from ...txnlog.features import check_writable, reader_features, writer_features

if TYPE_CHECKING:
    from ..transaction import Transaction

#: highest versions PROTOCOL.md defines
MAX_READER_VERSION = 3
MAX_WRITER_VERSION = 7


def _version(value: object, name: str, maximum: int) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InvalidArgumentError(f"The {name} needs to be an integer but got '{type(value)}'.")
    if not 1 <= int(value) <= maximum:
        raise InvalidArgumentError(f"{name} must be between 1 and {maximum}, got {value}")
    return int(value)


def upgraded_protocol(current: Protocol, reader_version: int, writer_version: int) -> Protocol:
    """The protocol at (reader_version, writer_version) that keeps every feature of ``current``."""
    reader = _version(reader_version, "readerVersion", MAX_READER_VERSION)
    writer = _version(writer_version, "writerVersion", MAX_WRITER_VERSION)
    if reader < current.min_reader_version or writer < current.min_writer_version:
        raise ProtocolDowngradeError(
            f"Protocol version cannot be downgraded from ({current.min_reader_version},"
            f"{current.min_writer_version}) to ({reader},{writer}); a protocol only grows"
        )
    if reader == MAX_READER_VERSION and writer != MAX_WRITER_VERSION:
        raise InvalidArgumentError(
            f"reader version {reader} needs writer version {MAX_WRITER_VERSION} (PROTOCOL.md: table "
            f"features are listed for both); got writer version {writer}"
        )
    if writer < MAX_WRITER_VERSION:
        return Protocol(reader, writer)
    readers = list(reader_features(current)) if reader == MAX_READER_VERSION else None
    writers = list(writer_features(current))
    writers += [f for f in readers or () if f not in writers]  # a reader feature is a writer feature too
    return Protocol(reader, writer, tuple(readers) if readers is not None else None, tuple(writers))


def stage_upgrade_protocol(tx: "Transaction", reader_version: int, writer_version: int) -> Protocol:
    """Stage the upgraded protocol (nothing when the table already has it); returns it."""
    protocol = upgraded_protocol(tx.protocol, reader_version, writer_version)
    if protocol == tx.protocol:
        return protocol
    check_writable(protocol, tx.metadata)
    tx.stage_protocol(protocol)
    tx.note_operation("UPGRADE PROTOCOL", {"newProtocol": orjson.dumps(protocol.to_json()).decode()}, {},
                      changes_data=False)
    return protocol
