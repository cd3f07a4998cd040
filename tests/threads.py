"""Run a test's workers on threads and surface their errors (shared by concurrency tests)."""

from __future__ import annotations

import threading
from typing import Callable


def run_threads(work: Callable[[int], None], count: int) -> list[BaseException]:
    """``work(i)`` on ``count`` threads, joined; returns what they raised (empty when all passed)."""
    errors: list[BaseException] = []

    def guarded(i: int) -> None:
        try:
            work(i)
        except BaseException as exc:  # noqa: BLE001 - returned to the test
            errors.append(exc)

    threads = [threading.Thread(target=guarded, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors
