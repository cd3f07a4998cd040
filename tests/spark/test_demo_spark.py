"""`make demo`'s Spark part: the DELETE/append race ends as each isolation level says."""

from __future__ import annotations

from deltatx import demo_spark
from deltatx.errors import ConcurrentAppendException


def test_spark_demo_outcomes_per_isolation_level(spark, tmp_path):
    outcomes = demo_spark.run(str(tmp_path))
    ws, ser = outcomes["WriteSerializable"], outcomes["Serializable"]
    # WriteSerializable: the blind append commits between the DELETE's read and commit; both land
    assert ws["append"].version == 1 and ws["delete"].version == 2 and ws["retry"] is None
    assert ws["remaining"] == 5  # the late rows stay: the DELETE is serialized before them
    # Serializable: the DELETE read the partition the append wrote to, so it fails, then retries
    assert isinstance(ser["delete"], ConcurrentAppendException) and ser["delete"].version == 1
    assert ser["remaining"] == 55 and ser["retry"].version == 2
    assert spark.sparkContext._jsc is not None  # the shared session is still running
