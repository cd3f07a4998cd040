"""How deltatx's S3 client waits and fails: bounded timeouts and retries, typed errors.

Why: botocore's defaults (60 s to connect, 60 s per read, up to five attempts) times s3fs's own
retry loop (five more) leave a process opening a table on an endpoint that accepts connections
and never answers blocked for half an hour, and an endpoint that refuses connections surfaced as
botocore's own exception, which is neither an ``OSError`` nor a deltatx error. Here:

- connecting gives up after :data:`CONNECT_TIMEOUT_S` and a silent read after
  :data:`READ_TIMEOUT_S` (delta-rs's ``connect_timeout`` / ``timeout`` options, "5s"-style
  durations, set them; s3fs's ``config_kwargs`` still win), botocore retries in its standard mode
  (throttling and transient errors, with backoff) up to :data:`ATTEMPTS` attempts, and s3fs's
  loop on top of it makes :data:`S3FS_RETRIES` of those, so the worst case is minutes, not half an
  hour;
- a request that cannot reach the endpoint, or gets no answer in time, after those retries, is
  :class:`~deltatx.errors.StorageUnavailableError` (an ``OSError``) naming the endpoint, and one
  to a bucket that does not exist :class:`~deltatx.errors.BucketNotFoundError` naming the bucket.
"""

from __future__ import annotations

import re
from typing import Any

import s3fs
from botocore.exceptions import ConnectionClosedError, ConnectTimeoutError, EndpointConnectionError, ReadTimeoutError

from ..errors import BucketNotFoundError, InvalidArgumentError, StorageUnavailableError

CONNECT_TIMEOUT_S = 10.0
READ_TIMEOUT_S = 30.0
ATTEMPTS = 3
S3FS_RETRIES = 2

#: delta-rs's (object_store's) client options for them, and botocore's name for each
TIMEOUT_OPTIONS = {"timeout": "read_timeout", "connect_timeout": "connect_timeout"}

_UNREACHABLE = (EndpointConnectionError, ConnectTimeoutError, ReadTimeoutError, ConnectionClosedError)
_DURATION = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*(ms|milliseconds?|s|secs?|seconds?|m|mins?|minutes?|h|hours?)?\s*$",
                       re.IGNORECASE)
_UNIT_S = {"ms": 0.001, "milli": 0.001, "s": 1.0, "sec": 1.0, "m": 60.0, "min": 60.0, "h": 3600.0, "hour": 3600.0}


def duration_s(key: str, value: Any) -> float:
    """A timeout option's seconds: a number, or text as delta-rs reads it ("30s", "500ms", "2m")."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        seconds = float(value)
    else:
        match = _DURATION.match(str(value)) if isinstance(value, str) else None
        if match is None:
            raise InvalidArgumentError(f"storage option {key}={value!r} must be a duration such as '30s', "
                                       f"'500ms' or '2m' (or a number of seconds)")
        unit = (match.group(2) or "s").lower()
        factor = next(f for prefix, f in sorted(_UNIT_S.items(), key=lambda kv: -len(kv[0])) if unit.startswith(prefix))
        seconds = float(match.group(1)) * factor
    if not seconds > 0 or seconds == float("inf"):
        raise InvalidArgumentError(f"storage option {key}={value!r} must be a positive, finite duration")
    return seconds


def with_bounded_waits(config_kwargs: dict[str, Any], timeouts: dict[str, float]) -> dict[str, Any]:
    """botocore's Config arguments: the user's own first, then the timeout options, then defaults."""
    out = dict(config_kwargs)
    for name, seconds in timeouts.items():
        out.setdefault(name, seconds)
    out.setdefault("connect_timeout", CONNECT_TIMEOUT_S)
    out.setdefault("read_timeout", READ_TIMEOUT_S)
    out.setdefault("retries", {"mode": "standard", "total_max_attempts": ATTEMPTS})
    return out


class DeltaTxS3FileSystem(s3fs.S3FileSystem):
    """s3fs making :data:`S3FS_RETRIES` attempts (of botocore's), whose unreachable endpoint is a typed error."""

    retries = S3FS_RETRIES

    async def _call_s3(self, method: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            return await super()._call_s3(method, *args, **kwargs)
        except FileNotFoundError as exc:
            if "bucket does not exist" not in str(exc).lower() or isinstance(exc, BucketNotFoundError):
                raise
            raise BucketNotFoundError(
                f"S3 bucket {kwargs.get('Bucket')!r} does not exist at {self._endpoint()}: create it first "
                f"(deltatx creates tables, not buckets)") from exc
        except _UNREACHABLE as exc:
            endpoint = self._endpoint()
            raise StorageUnavailableError(
                f"S3 endpoint {endpoint} did not answer {method if isinstance(method, str) else 'a request'} "
                f"({type(exc).__name__}: {exc}) in {ATTEMPTS * S3FS_RETRIES} attempts. A write whose "
                f"answer was lost may have landed: look at the table's history before retrying a commit. "
                f"Check the endpoint, or set the storage options 'connect_timeout' / 'timeout'") from exc

    def _endpoint(self) -> str:
        return getattr(self, "endpoint_url", None) or (self.client_kwargs or {}).get("endpoint_url") or "AWS S3"
