"""Isolation levels of deltatx tables and commits (see :mod:`deltatx.isolation.levels`)."""

from .levels import (
    DEFAULT_ISOLATION_LEVEL,
    ISOLATION_LEVEL_PROPERTY,
    TABLE_ISOLATION_LEVELS,
    IsolationLevel,
    effective_isolation_level,
    table_isolation_level,
    validate_isolation_property,
)

__all__ = [
    "DEFAULT_ISOLATION_LEVEL",
    "ISOLATION_LEVEL_PROPERTY",
    "TABLE_ISOLATION_LEVELS",
    "IsolationLevel",
    "effective_isolation_level",
    "table_isolation_level",
    "validate_isolation_property",
]
