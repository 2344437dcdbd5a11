"""One retry policy for every store operation: which failures are worth
another try, how long to wait between tries, and the loop that says so.

MLflow's own per-request retry (urllib3: 7 retries, about 4 minutes,
silent, resending a create whose answer was lost) is off for these calls
unless the user set MLFLOW_HTTP_REQUEST_MAX_RETRIES: one policy, one
place, bounded in total time.
"""

import logging
import random
import time

import requests
from mlflow.exceptions import RestException

from kg_service.errors import StoreUnavailable
from kg_service.tracking import client

log = logging.getLogger("kg-train")

# HTTP answers worth another try: MLflow's own list
# (mlflow.utils.request_utils._TRANSIENT_FAILURE_RESPONSE_CODES; a test
# keeps them equal). Any other 4xx is a request the store refused: raised
# at once.
TRANSIENT_HTTP_STATUS = frozenset({408, 429, 500, 502, 503, 504})
# MLflow's error codes for a store that is busy rather than refusing: it
# raises every OperationalError of a local database ("database is locked",
# disk I/O) as TEMPORARILY_UNAVAILABLE.
TRANSIENT_ERROR_CODES = frozenset({"TEMPORARILY_UNAVAILABLE", "REQUEST_LIMIT_EXCEEDED"})
# Waits between tries: 1 s, doubling, at most 30 s, each drawn from the
# upper half of that ("equal jitter"), so sweeps sharing a server that
# came back do not all knock at once.
FIRST_WAIT, LONGEST_WAIT = 1.0, 30.0


def backoff_waits(window, rng=random):
    """The waits before each retry of a store operation, in seconds.

    They start at 1 s and double up to 30 s, each with jitter in its upper
    half, and are cut so that the last try comes at most `window` seconds
    after the first failure (a last, shorter wait lands it there).

    Example:
        >>> waits = backoff_waits(120)
        >>> sum(waits) <= 120 and len(waits) >= 6
        True
        >>> backoff_waits(0)
        ()
    """
    waits, total, step = [], 0.0, FIRST_WAIT
    while total < window:
        wait = min(step * (0.5 + 0.5 * rng.random()), window - total)
        waits.append(wait)
        total += wait
        step = min(2 * step, LONGEST_WAIT)
    return tuple(waits)


def transient(error):
    """Whether `error` is a store failure worth retrying: the store could
    not be reached, timed out, answered 5xx/429 or was locked, rather than
    refusing the request (4xx: invalid parameter, no such run...).

    Walks the exception's causes: MLflow wraps a refused connection as an
    MlflowException "API request ... failed" whose context is requests'
    ConnectionError.
    """
    seen = set()
    while error is not None and id(error) not in seen:
        seen.add(id(error))
        if isinstance(
            error,
            (
                ConnectionError,  # refused, reset, aborted, broken pipe
                TimeoutError,
                requests.exceptions.ConnectionError,
                requests.exceptions.Timeout,
                requests.exceptions.RetryError,  # 5xx, MLflow's retries spent
                requests.exceptions.ChunkedEncodingError,
            ),
        ):
            return True
        if isinstance(error, requests.exceptions.HTTPError):
            status = getattr(error.response, "status_code", None)
            return status in TRANSIENT_HTTP_STATUS
        if isinstance(error, RestException):  # the server's own answer
            return error.get_http_status_code() in TRANSIENT_HTTP_STATUS
        if getattr(error, "error_code", None) in TRANSIENT_ERROR_CODES:
            return True
        error = error.__cause__ or error.__context__
    return False


def innermost_reason(error):
    """The innermost cause of `error`, in one short line."""
    while error.__cause__ or error.__context__:
        error = error.__cause__ or error.__context__
    text = " ".join(str(error).split())
    return f"{type(error).__name__}: {text[:200]}"


class Retrier:
    """Runs one store's operations through transient failures.

    Called as `retried(doing, operation, retry=True)`. Once the window has
    passed it holds the `StoreUnavailable` (`down`) and raises it at once
    for every later call: the sweep is over.

    Args:
        tracking_uri: the store, as the warnings name it.
        retry_seconds: how long after the first failure the last try may
            come; also a request's timeout (clipped to 10..120 s).
    """

    def __init__(self, tracking_uri, retry_seconds):
        self.tracking_uri = tracking_uri
        self.retry_seconds = retry_seconds
        self.down = None  # the StoreUnavailable once retries ran out

    def __call__(self, doing, operation, retry=True):
        """Runs `operation()` (one idempotent store operation), retrying it
        for `retry_seconds` after its first transient failure (not at all
        with `retry=False`). Each retry is a warning the user sees.

        Raises:
            StoreUnavailable: once the window has passed.
            Exception: a failure that is not transient (a 4xx), unchanged.
        """
        if self.down is not None:
            raise self.down
        waits = None
        attempt = 0
        first_failure = None
        while True:
            try:
                result = self._once(operation)
                if first_failure is not None:
                    log.warning(
                        f"tracking store {self.tracking_uri} is back after "
                        f"{time.monotonic() - first_failure:.0f} s; {doing} done."
                    )
                return result
            except Exception as error:
                if not transient(error):
                    raise
                if waits is None:
                    first_failure = time.monotonic()
                    waits = backoff_waits(self.retry_seconds) if retry else ()
                if attempt == len(waits):
                    self.down = StoreUnavailable(
                        f"the tracking store {self.tracking_uri} failed while "
                        f"{doing} and did not come back within "
                        f"{self.retry_seconds:g} s ({attempt + 1} tries; last error: "
                        f"{innermost_reason(error)})."
                    )
                    raise self.down from None
                log.warning(
                    f"tracking store {self.tracking_uri} unreachable while {doing} "
                    f"({innermost_reason(error)}); retrying in {waits[attempt]:.0f} s "
                    f"(attempt {attempt + 2}/{len(waits) + 1})"
                )
                time.sleep(waits[attempt])
                attempt += 1

    def _once(self, operation):
        """One try, MLflow's own retries off and its request timeout ours."""
        with client.environ_defaults(
            MLFLOW_HTTP_REQUEST_MAX_RETRIES="0",
            MLFLOW_HTTP_REQUEST_TIMEOUT=str(int(min(120, max(10, self.retry_seconds)))),
        ):
            return operation()
