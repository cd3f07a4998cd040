"""SQL text for the expression model: identifiers, constants and type names in Spark syntax.

Owns rendering only, so that ``str(expr)`` is SQL that :func:`deltatx.expr.parse_predicate` reads
back to the same tree (tested by round trip) and that Spark users recognise in error messages and
``commitInfo.operationParameters.predicate``.
"""

from __future__ import annotations

import datetime as _dt
import functools
import logging
import re
from decimal import Decimal
from typing import Any

import pyarrow as pa
import sqlglot
from sqlglot.dialects.spark import Spark
from sqlglot.errors import SqlglotError

_KEYWORDS = frozenset(k for k in Spark.Tokenizer.KEYWORDS if k.isidentifier())
_PLAIN_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class _Quiet(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return False


@functools.lru_cache(maxsize=4096)
def _reads_as_column(name: str) -> bool:
    """Whether a keyword-like bare word still parses as a column (``date = 1`` does)."""
    logger = logging.getLogger("sqlglot")
    quiet = _Quiet()
    logger.addFilter(quiet)  # sqlglot logs when it falls back to a generic command
    try:
        node = sqlglot.parse_one(f"{name} = 1", read="spark")
    except SqlglotError:
        return False
    finally:
        logger.removeFilter(quiet)
    left = node.this if isinstance(node, sqlglot.exp.EQ) else None
    return isinstance(left, sqlglot.exp.Column) and left.name == name and not left.table


def quote_identifier(name: str) -> str:
    """``name`` as a Spark SQL identifier (backticks when needed)."""
    if _PLAIN_IDENTIFIER.match(name):
        if name.upper() not in _KEYWORDS and name.lower() != "if":
            return name
        if _reads_as_column(name):
            return name
    return "`" + name.replace("`", "``") + "`"


def string_sql(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace("'", "\\'").replace("\n", "\\n").replace("\r", "\\r")
    return f"'{escaped}'"


def literal_sql(value: Any, t: pa.DataType | None = None) -> str:
    """SQL text of a constant (Spark syntax)."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if value != value or value in (float("inf"), float("-inf")):
            name = "NaN" if value != value else ("Infinity" if value > 0 else "-Infinity")
            return f"CAST('{name}' AS DOUBLE)"
        text = repr(value)
        return text if ("e" in text or "E" in text) else f"{text}E0"
    if isinstance(value, Decimal):
        text = format(value, "f")
        return text if "." in text else text + ".0"  # a dot keeps it a decimal, not an integer
    if isinstance(value, str):
        return string_sql(value)
    if isinstance(value, bytes):
        return f"X'{value.hex().upper()}'"
    if isinstance(value, _dt.datetime):
        if value.tzinfo is not None:
            utc = value.astimezone(_dt.timezone.utc).replace(tzinfo=None)
            return f"TIMESTAMP '{utc.isoformat(sep=' ')}Z'"
        return f"TIMESTAMP_NTZ '{value.isoformat(sep=' ')}'"
    if isinstance(value, _dt.date):
        return f"DATE '{value.isoformat()}'"
    return string_sql(str(value))


def type_sql(t: pa.DataType) -> str:
    """Spark SQL name of an Arrow type (for CAST text)."""
    simple = {
        pa.int8(): "TINYINT", pa.int16(): "SMALLINT", pa.int32(): "INT", pa.int64(): "BIGINT",
        pa.float32(): "FLOAT", pa.float64(): "DOUBLE", pa.string(): "STRING", pa.large_string(): "STRING",
        pa.bool_(): "BOOLEAN", pa.binary(): "BINARY", pa.date32(): "DATE",
    }
    if t in simple:
        return simple[t]
    if pa.types.is_decimal(t):
        return f"DECIMAL({t.precision},{t.scale})"
    if pa.types.is_timestamp(t):
        return "TIMESTAMP" if t.tz is not None else "TIMESTAMP_NTZ"
    return str(t).upper()
