"""Maintenance gating of catalog-managed tables (PROTOCOL.md, catalogManaged: maintenance runs
only where the catalog allows it).

Why: VACUUM deletes files, OPTIMIZE rewrites them, and cleaning the staged commits deletes log
files. On a catalog-managed table the catalog is the authority on what is still referenced, so it
decides who may do that. Two conditions, both required:

* the **route**: the handle must come from ``cat.table(name)`` — the catalog's latest ratified
  version, in the catalog's own process. Pinned handles (``cat.table(name, version=...)``,
  ``cat.snapshot().table(name)``) and bare stores (``cat.store(name)``) are refused: a maintenance
  decision taken against an old cut could delete what the latest version still reads;
* the **policy**: the table's ``maintenance`` column in ``deltatx_tables`` is ``allowed``
  (default) — ``cat.set_maintenance(name, False)`` turns it off, e.g. while another engine owns
  maintenance of the table.

Refusals raise :class:`~deltatx.errors.CatalogMaintenanceError` before anything is written.
"""

from __future__ import annotations

from typing import Any

from ..errors import CatalogMaintenanceError

ALLOWED = "allowed"
REFUSED = "refused"
POLICIES = (ALLOWED, REFUSED)


def check_maintenance(store: Any, operation: str) -> None:
    """Raise CatalogMaintenanceError unless ``operation`` may run on the table behind ``store``.

    O(1) and no I/O for a path table (one attribute lookup): this sits in front of VACUUM and
    OPTIMIZE on every table."""
    if getattr(store, "catalog_managed", False):
        store.check_maintenance(operation)


def refuse_route(operation: str, uri: str) -> CatalogMaintenanceError:
    return CatalogMaintenanceError(
        f"{operation} on the catalog-managed table at {uri!r} is refused through this handle: maintenance "
        f"runs only on the catalog's latest version, through cat.table(name) (not a pinned version, a "
        f"catalog snapshot or a bare store)")


def refuse_policy(operation: str, name: str, url: str) -> CatalogMaintenanceError:
    return CatalogMaintenanceError(
        f"{operation} on table {name!r} is not allowed by catalog {url!r} (its maintenance policy is "
        f"{REFUSED!r}); cat.set_maintenance({name!r}, True) allows it again")
