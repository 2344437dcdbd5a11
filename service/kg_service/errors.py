"""The one exception type the service raises for a user's mistake."""


class ServiceError(Exception):
    """A mistake the user can fix (bad config, missing file, bad flag).

    The CLI prints its message as one paragraph and exits with code 2; no
    traceback. The message names the file, the key path or argument, what
    was expected, and the closest valid name for a typo.
    """

    exit_code = 2


class SweepInterrupted(ServiceError):
    """SIGINT or SIGTERM stopped a sweep; what is done is in the store.

    Carries the sweep's parent run id, which `--resume` takes.
    """

    exit_code = 130

    def __init__(self, message, run_id):
        super().__init__(message)
        self.run_id = run_id


class StoreUnavailable(ServiceError):
    """The tracking store failed mid-sweep and stayed down past its retries.

    Exit code 75 is sysexits.h's EX_TEMPFAIL ("a temporary failure; the
    user is invited to retry later"): what was trained is kept, and
    `--resume` finishes the sweep once the store is back. Carries the
    sweep's parent run id (None if the sweep never started).
    """

    exit_code = 75

    def __init__(self, message, run_id=None):
        super().__init__(message)
        self.run_id = run_id
