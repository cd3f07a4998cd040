"""deltatx.harness: prove that concurrent writers never lose a commit and obey their isolation level.

Usable from pytest and from the ``deltatx`` command line:

- **Scenarios** (:mod:`.scenarios`): declarative cases — setup commits, the transaction's reads,
  concurrent commits by others, the transaction's own actions — with the expected outcome under
  an isolation level. :func:`builtin_scenarios` ships the isolation-level / write-conflict matrix.
- **Interleavings** (:mod:`.interleave`): two or more transactions driven through named phases
  (begin, read, data_files_written, attempt_commit, resolve_conflict, published) in a chosen,
  every, or a seeded random global order — barriers, no sleeps, reproducible from the seed.
- **Stress** (:mod:`.stress`, :mod:`.workloads`): N OS processes run a workload (mixed, bank,
  append) at an isolation level on local disk or S3 and record their histories.
- **Checkers** (:mod:`.checkers`): no lost commit, Serializable / WriteSerializable by serial
  replay, the bank invariant at every version.
- **Faults** (:mod:`.faults`): deliberately broken commit paths that every checker must catch.
- **bank2** (:mod:`.bank2`): transfers between two catalog tables in catalog transactions, checked
  at every catalog commit, with process kills at the catalog phases (staged, ratified, published).

Example::

    from deltatx.harness import run_stress
    report = run_stress("/tmp/stress", processes=4, ops=50, workload="bank", isolation="Serializable")
    assert report.ok, report.anomalies
"""

from .bank2 import Bank2Report, check_bank2, run_bank2
from .checkers import CHECKERS, Anomaly, check_history
from .errors import HarnessError, InterleavingTimeout
from .history import OpRecord, execute, read_history
from .interleave import (
    DEFAULT_PHASES,
    Interleaving,
    InterleavingResult,
    all_orders,
    random_orders,
    run_interleaving,
)
from .ops import (
    Append,
    Delete,
    Merge,
    Operation,
    Optimize,
    Read,
    SetProperties,
    Transfer,
    Update,
    operation_from_dict,
    register_operation,
)
from .scenarios import Scenario, ScenarioResult, builtin_scenarios, run_scenario, run_scenarios, seed_matrix
from .stress import StressReport, run_stress
from .workloads import WORKLOADS, prepare_table

__all__ = [
    "Anomaly", "Append", "Bank2Report", "check_bank2", "run_bank2", "CHECKERS", "DEFAULT_PHASES", "Delete", "HarnessError", "Interleaving",
    "InterleavingResult", "InterleavingTimeout", "Merge", "OpRecord", "Operation", "Optimize", "Read",
    "Scenario", "ScenarioResult", "SetProperties", "StressReport", "Transfer", "Update", "WORKLOADS",
    "all_orders", "builtin_scenarios", "check_history", "execute", "operation_from_dict", "prepare_table",
    "random_orders", "read_history", "register_operation", "run_interleaving", "run_scenario",
    "run_scenarios", "run_stress", "seed_matrix",
]
