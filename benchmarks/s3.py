"""A throwaway S3 for benchmarks: a moto server on 127.0.0.1 and a fresh bucket (P14, soak R4).

The server runs in this process for the duration of the ``with`` block; writer processes reach it
through the storage options it yields. moto accepts any credentials: the ones here are dummies,
not secrets.
"""

from __future__ import annotations

import logging
import socket
import uuid
from contextlib import contextmanager
from typing import Any, Iterator


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def moto_bucket(prefix: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Yield (``s3://<new bucket>``, storage options) backed by a moto server stopped on exit."""
    import boto3
    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
    port = _free_port()
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    try:
        endpoint = f"http://127.0.0.1:{port}"
        options = {"endpoint_url": endpoint, "key": "testing", "secret": "testing",
                   "client_kwargs": {"region_name": "us-east-1"}}
        bucket = f"{prefix}-{uuid.uuid4().hex[:10]}"
        boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="testing", aws_secret_access_key="testing",
                     region_name="us-east-1").create_bucket(Bucket=bucket)
        yield f"s3://{bucket}", options
    finally:
        server.stop()
