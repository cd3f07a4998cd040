"""Catalog-managed tables: a commit coordinator in a database (SQLite or PostgreSQL) and atomic
transactions across tables. See :class:`deltatx.catalog.catalog.Catalog`."""

from __future__ import annotations

from typing import Any


def __getattr__(name: str) -> Any:
    # Lazy: tables/ imports the path guard from txnlog, and the catalog imports tables/.
    if name in ("Catalog", "CatalogSnapshot"):
        from . import catalog

        return getattr(catalog, name)
    if name in ("CatalogTableOwnedError", "CatalogManagedPropertyError"):
        from . import rules

        return getattr(rules, name)
    if name == "CatalogTransaction":
        from .transaction import CatalogTransaction

        return CatalogTransaction
    raise AttributeError(name)


__all__ = ["Catalog", "CatalogSnapshot", "CatalogTransaction", "CatalogTableOwnedError", "CatalogManagedPropertyError"]
