"""A throwaway S3 for benchmarks: a moto server on 127.0.0.1 and a fresh bucket (P14, soak R4).

The server runs in this process for the duration of the ``with`` block; writer processes reach it
through the storage options it yields. moto accepts any credentials: the ones here are dummies,
not secrets.
"""

from __future__ import annotations

import uuid
from contextlib import contextmanager
from typing import Any, Iterator


@contextmanager
def moto_bucket(prefix: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """Yield (``s3://<new bucket>``, storage options) backed by a moto server stopped on exit."""
    import boto3

    from deltatx.harness import s3server

    server, options = s3server.start()  # conditional PUTs atomic, as on S3 (see the module)
    try:
        endpoint = options["endpoint_url"]
        bucket = f"{prefix}-{uuid.uuid4().hex[:10]}"
        boto3.client("s3", endpoint_url=endpoint, aws_access_key_id="testing", aws_secret_access_key="testing",
                     region_name="us-east-1").create_bucket(Bucket=bucket)
        yield f"s3://{bucket}", options
    finally:
        server.stop()
