"""A throwaway S3 on 127.0.0.1 (moto) for tests, benchmarks (P14) and the soak (R4).

Why here: pytest's fixtures and the benchmarks both start one, and both need the same fix.
moto checks ``If-None-Match: *`` and then stores the object with no lock between the two, so
two concurrent conditional PUTs of one key can both succeed and the second overwrites the first
(soak R4 caught it: a commit acknowledged at version 100 that another writer's commit had
replaced). Real S3 decides a conditional PUT atomically; the servers started here do too, by
serializing moto's conditional PUTs (plain ones stay parallel). moto accepts any credentials: the
ones here are dummies.
"""

from __future__ import annotations

import logging
import socket
import threading
from typing import Any

#: what a client passes to reach the server (plus ``endpoint_url``)
CREDENTIALS = {"key": "testing", "secret": "testing", "client_kwargs": {"region_name": "us-east-1"}}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def atomic_conditional_puts() -> None:
    """Make moto's conditional PutObject (its If-None-Match / If-Match check and the store) one
    atomic step, as on S3. Idempotent."""
    from moto.s3.responses import S3Response

    if getattr(S3Response.put_object, "deltatx_atomic", False):
        return
    guard = threading.Lock()
    locks: dict[tuple[str, str], threading.Lock] = {}  # one per object key: other keys stay parallel
    check_then_put = S3Response.put_object

    def put_object(self: Any, *args: Any, **kwargs: Any) -> Any:
        headers = getattr(self, "headers", None) or {}
        if not (headers.get("If-None-Match") or headers.get("If-Match")):
            return check_then_put(self, *args, **kwargs)  # a plain PUT (data files) stays parallel
        key = (self.bucket_name, self.parse_key_name())
        with guard:
            lock = locks.setdefault(key, threading.Lock())
        with lock:
            return check_then_put(self, *args, **kwargs)

    put_object.deltatx_atomic = True  # type: ignore[attr-defined]
    S3Response.put_object = put_object  # type: ignore[method-assign]


def start() -> tuple[Any, dict[str, Any]]:
    """Start a moto server on a free 127.0.0.1 port; returns (server, storage options).
    Stop it with ``server.stop()``."""
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
    atomic_conditional_puts()
    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    return server, {"endpoint_url": f"http://127.0.0.1:{port}", **CREDENTIALS}
