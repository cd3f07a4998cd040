"""A local SparkSession tuned for this project, behind a clear check that Java is there.

Why a module of its own: PySpark fails late and obscurely without a JVM (a Py4J gateway error
after seconds of waiting). We check first and say what to install. The settings are the ones
measured to work on a 2-core machine (``shared/notes/pyspark-datasource.md``): no UI, two
shuffle partitions, loopback only, UTC, and the executors' Python = this interpreter (so the
installed ``deltatx`` is importable by the Python workers).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from typing import Any

from ..errors import SparkUnavailableError

MIN_JAVA = 17


def java_version() -> int:
    """Major version of the ``java`` on JAVA_HOME or PATH; SparkUnavailableError if none/too old."""
    home = os.environ.get("JAVA_HOME")
    java = os.path.join(home, "bin", "java") if home else shutil.which("java")
    if not java or not os.path.exists(java):
        raise SparkUnavailableError(
            f"Spark needs Java {MIN_JAVA} or newer and none was found on PATH or JAVA_HOME. "
            f"Install a JDK (e.g. `apt-get install openjdk-17-jre-headless`) and retry."
        )
    out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=60)
    text = out.stderr + out.stdout
    m = re.search(r'version "(\d+)(?:\.(\d+))?', text)
    if not m:
        raise SparkUnavailableError(f"could not read the Java version from `{java} -version`: {text.strip()!r}")
    major = int(m.group(1))
    if major == 1 and m.group(2):  # "1.8" style
        major = int(m.group(2))
    if major < MIN_JAVA:
        raise SparkUnavailableError(
            f"Spark 4 needs Java {MIN_JAVA} or newer; {java} is Java {major}. Point JAVA_HOME at a newer JDK."
        )
    return major


def local_session(app_name: str = "deltatx", cores: int = 2, fast_start: bool = False,
                  conf: dict[str, Any] | None = None):
    """Get or create a ``local[cores]`` SparkSession with deltatx registered.

    ``fast_start`` adds JVM flags that shorten start-up and short jobs (tests); leave it off for
    benchmarks.
    """
    try:
        from pyspark.sql import SparkSession
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise SparkUnavailableError(
            "pyspark is not installed; install deltatx with the spark extra: pip install 'deltatx[spark]'"
        ) from exc
    java_version()
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    settings: dict[str, Any] = {
        "spark.driver.memory": "4g",
        "spark.ui.enabled": "false",
        "spark.ui.showConsoleProgress": "false",
        "spark.sql.shuffle.partitions": str(cores),
        "spark.default.parallelism": str(cores),
        "spark.driver.host": "127.0.0.1",
        "spark.driver.bindAddress": "127.0.0.1",
        "spark.sql.session.timeZone": "UTC",
        "spark.sql.python.filterPushdown.enabled": "true",
    }
    if fast_start:
        settings["spark.driver.extraJavaOptions"] = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
    settings.update(conf or {})
    builder = SparkSession.builder.master(f"local[{cores}]").appName(app_name)
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    from . import register  # importing this module imported the package before any session existed

    register(spark)
    return spark
