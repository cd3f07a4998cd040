"""deltatx's errors as the PySpark exception classes delta-spark raises, at the DeltaTable API.

Code written for delta-spark catches ``AnalysisException`` when a table is missing or already
there, ``IllegalArgumentException`` when VACUUM's retention is too short and
``UnsupportedOperationException`` when a MERGE's source matches a target row twice (its own
Python tests assert these classes), and its concurrent-modification exceptions derive from
PySpark's ``CapturedException``. deltatx raises its typed errors (:mod:`deltatx.errors`),
which know nothing of Spark. At the edge of the delta-spark API the error keeps its deltatx
class and gains the PySpark one: the same object, its class swapped for one deriving from both,
so ``except TableNotFoundError`` and ``except AnalysisException`` both catch it, with the same
message and attributes.
"""

from __future__ import annotations

import functools
from typing import Any, Callable, TypeVar

from pyspark.errors import AnalysisException, IllegalArgumentException, UnsupportedOperationException
from pyspark.errors.exceptions.base import PySparkException
from pyspark.errors.exceptions.captured import CapturedException

from .. import errors

#: the PySpark class delta-spark's failure arrives as, per deltatx error (first match wins)
_AS_SPARK: tuple[tuple[type[errors.DeltaTxError], type[PySparkException]], ...] = (
    (errors.MergeCardinalityError, UnsupportedOperationException),
    (errors.VacuumRetentionError, IllegalArgumentException),
    (errors.TableNotFoundError, AnalysisException),
    (errors.TableAlreadyExistsError, AnalysisException),
    (errors.LocationNotEmptyError, AnalysisException),
    (errors.SchemaMismatchError, AnalysisException),
    (errors.PredicateError, AnalysisException),
    (errors.TimeTravelError, AnalysisException),
    # delta-spark's delta.exceptions: the concurrent-modification family derives from CapturedException
    (errors.ConcurrentModificationException, CapturedException),
)

_FLAVOURED: dict[tuple[type, type], type] = {}

F = TypeVar("F", bound=Callable[..., Any])


def _flavoured(core: type[BaseException], spark: type[PySparkException]) -> type:
    """``core`` deriving from ``spark`` too, named as ``core`` (one class per pair)."""
    cls = _FLAVOURED.get((core, spark))
    if cls is None:
        cls = _FLAVOURED[(core, spark)] = type(core.__name__, (core, spark), {
            "__module__": __name__, "__qualname__": core.__qualname__, "__doc__": core.__doc__,
            "__str__": core.__str__, "__reduce__": _reduce,
        })
    return cls


def _reduce(self: BaseException) -> tuple:
    """Pickle as the plain deltatx error (the flavoured class is made at run time)."""
    core = type(self).__mro__[1]
    return _rebuild, (core, self.args, dict(self.__dict__))


#: what PySparkException.__init__ adds to an instance (dropped when it is pickled back to deltatx's)
_PYSPARK_STATE = frozenset({"_error_reader", "_message", "_errorClass", "_messageParameters", "_contexts",
                            "_desc", "_stackTrace", "_cause", "_origin"})


def _rebuild(core: type[BaseException], args: tuple, state: dict[str, Any]) -> BaseException:
    exc = core.__new__(core, *args)
    exc.args = args
    exc.__dict__.update({k: v for k, v in state.items() if k not in _PYSPARK_STATE})
    return exc


def as_spark_error(exc: BaseException) -> BaseException:
    """``exc`` deriving from the PySpark class delta-spark raises for it too (``exc`` itself,
    changed in place, or unchanged when no PySpark class applies)."""
    for core, spark in _AS_SPARK:
        if isinstance(exc, core):
            if isinstance(exc, spark):
                return exc
            exc.__class__ = _flavoured(type(exc), spark)
            PySparkException.__init__(exc, message=str(exc))  # type: ignore[arg-type]
            if issubclass(spark, CapturedException):  # its state, as for an error with no JVM origin
                exc._desc, exc._stackTrace, exc._cause, exc._origin = str(exc), "", None, None
            return exc
    return exc


def spark_errors(function: F) -> F:
    """Raise ``function``'s deltatx errors as :func:`as_spark_error` makes them."""
    @functools.wraps(function)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, **kwargs)
        except errors.DeltaTxError as exc:
            raise as_spark_error(exc)

    return wrapper  # type: ignore[return-value]


def raises_spark_errors(cls: type) -> type:
    """Wrap every public method of ``cls`` (class methods included) with :func:`spark_errors`."""
    for name, attr in list(vars(cls).items()):
        if name.startswith("_"):
            continue
        if isinstance(attr, classmethod):
            setattr(cls, name, classmethod(spark_errors(attr.__func__)))
        elif isinstance(attr, staticmethod):
            setattr(cls, name, staticmethod(spark_errors(attr.__func__)))
        elif callable(attr):
            setattr(cls, name, spark_errors(attr))
    return cls
