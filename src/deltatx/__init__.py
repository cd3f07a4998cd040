"""deltatx: ACID tables for Python and PySpark on a Delta-Lake-compatible transaction log.

>>> import deltatx, pyarrow as pa
>>> t = deltatx.create_table("/tmp/t", pa.schema([("id", pa.int64())]))   # doctest: +SKIP
>>> t.append(pa.table({"id": [1, 2]}))                                    # doctest: +SKIP
"""

__version__ = "0.1.0"

from . import errors  # noqa: E402
from .isolation import IsolationLevel  # noqa: E402
from .tables import CommitResult, Table, Transaction, create_table  # noqa: E402

from .tables import variant  # noqa: E402
from .tables.variant import VARIANT  # noqa: E402

__all__ = ["Table", "create_table", "Transaction", "CommitResult", "IsolationLevel", "errors", "variant", "VARIANT",
           "__version__"]
from .catalog.catalog import Catalog  # noqa: E402  (after tables: the catalog builds on them)

__all__ += ["Catalog"]
