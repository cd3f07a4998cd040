"""Turning Spark's generic errors back into deltatx's typed exceptions.

Spark wraps whatever a Python data source raises: an error in the driver-side commit arrives as
``AnalysisException`` (condition ``PYTHON_DATA_SOURCE_ERROR``), an error in a task as a job
failure, both with the Python exception only as text in the message (gotcha 6). Users need
``except ConcurrentAppendException`` to work, with the winning version.

Two sources, best first: the commit's own report (the pickled exception, written to a driver-local
file whose path :func:`deltatx.spark.write` passes as an internal option), then the message text:
the last ``deltatx.errors.<Class>: <message>`` line is parsed, and for concurrency exceptions the
winning version and operation are read back from the message's ``Conflicting commit: version N
(OP).`` sentence, which every ``ConcurrentModificationException`` message carries.
"""

from __future__ import annotations

import re

from .. import errors

_CLASS_LINE = re.compile(r"deltatx\.errors\.([A-Za-z_][A-Za-z0-9_]*): (.*)")
_CONFLICT = re.compile(r"Conflicting commit: version (\d+)(?: \(([^)]*)\))?\.")
_WHERE = re.compile(r"Conflict at: (.+?)\. ")
_VERSION = re.compile(r"\bversion (\d+)")


def _error_class(name: str) -> type[errors.DeltaTxError] | None:
    cls = getattr(errors, name, None)
    if isinstance(cls, type) and issubclass(cls, errors.DeltaTxError):
        return cls
    return None


def typed_error(exc: BaseException) -> errors.DeltaTxError | None:
    """The deltatx exception named in ``exc``'s message, rebuilt; None when there is none."""
    if isinstance(exc, errors.DeltaTxError):
        return exc
    from .dml_tasks import decode_error

    carried = decode_error(exc)  # a task's error, marked with its class and attributes
    if carried is not None:
        return carried
    text = str(exc)
    matches = list(_CLASS_LINE.finditer(text))
    if not matches:
        return None
    last = matches[-1]
    cls = _error_class(last.group(1))
    if cls is None:
        return None
    message = last.group(2).strip()
    if issubclass(cls, errors.ConcurrentModificationException):
        return _concurrent(cls, message)
    if issubclass(cls, (errors.StreamingSourceError, errors.ChangeDataFeedError)):  # version named first
        found = _VERSION.search(message)
        return cls(message, version=int(found.group(1)) if found else None)
    try:
        return cls(message)
    except TypeError:  # a class that needs more than a message (e.g. UnsupportedFeatureError)
        return errors.DeltaTxError(f"{cls.__name__}: {message}")


def _concurrent(cls: type[errors.ConcurrentModificationException], message: str) -> errors.DeltaTxError:
    prefix = f"{cls.__name__}: "
    body = message[len(prefix):] if message.startswith(prefix) else message
    conflict = _CONFLICT.search(body)
    version = int(conflict.group(1)) if conflict else None
    operation = conflict.group(2) if conflict else None
    where = _WHERE.search(body)
    summary = body[: conflict.start()].strip() if conflict else body
    if summary.endswith(cls.advice):
        summary = summary[: -len(cls.advice)].strip()
    return cls(summary, version=version, operation=operation, conflict=where.group(1) if where else None)
