"""One writer per sweep: a lease on the sweep's parent run (issue 30 §1).

Two `kg-train --resume RUN` of one sweep at once used to train members
twice and register a model twice. Now the process that writes a sweep
holds its lease, kept in the tracking store itself, so it works the same
on a sqlite file and on a shared server:

- the owner is a write-once param `kg.lease.<n>` (`TrackingStore.claim`:
  a SQL store's primary key lets exactly one insert commit), whose value
  names it: what, host, pid, pid namespace, start time;
- a tag `kg.lease.<n>.heartbeat` (Unix seconds), rewritten every
  `stale_after / 10` s by a background thread, says it is alive; a tag
  `kg.lease.<n>.released` says it let go (end of the sweep, a clean
  failure, an interrupt);
- a lease is free when released, when its heartbeat is older than
  `stale_after` (`tracking.lease_seconds`), or at once when its holder
  ran on this host (same hostname and pid namespace) and its pid is gone
  (a kill -9). The next taker claims `kg.lease.<n+1>`: of two takers of
  one stale lease, exactly one wins.

A sharded sweep's jobs write disjoint slices: each job leases its own
slice (`scope`, e.g. `shard-1-of-2`), so two copies of one shard are
refused while the other shards run on.
Heartbeats compare clocks across hosts: keep them within `stale_after`.
"""

import contextlib
import json
import logging
import os
import socket
import threading
import time

from kg_service.errors import Holder
from kg_service.errors import LeaseHeld
from kg_service.errors import LeaseLost

log = logging.getLogger("kg-train")

PREFIX = "kg.lease"
WAIT_POLL_SECONDS = 2.0  # how often --wait reads the lease again


def _namespace():
    """This process's pid namespace (a container's pids are its own)."""
    try:
        return str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        return ""


def _prefix(scope):
    return PREFIX if scope is None else f"{PREFIX}.{scope}"


def _alive(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError):
        return True  # someone else's process: alive
    return True


def current(store, run_id, scope=None):
    """`(number, owner dict or None, heartbeat, released)` of the newest
    lease on the run (number 0: never leased)."""
    params, tags = store.run_marks(run_id)
    prefix = _prefix(scope)
    numbers = [
        int(key[len(prefix) + 1 :])
        for key in params
        if key.startswith(prefix + ".") and key[len(prefix) + 1 :].isdigit()
    ]
    if not numbers:
        return 0, None, None, False
    number = max(numbers)
    key = f"{prefix}.{number}"
    try:
        owner = json.loads(params[key])
    except ValueError:
        owner = {"what": params[key], "host": "?", "pid": 0, "started": 0.0}
    try:
        beat = float(tags.get(f"{key}.heartbeat", owner.get("started", 0.0)))
    except ValueError:
        beat = float(owner.get("started", 0.0))
    return number, owner, max(beat, float(owner.get("started", 0.0))), f"{key}.released" in tags


def _holder(owner, beat):
    return Holder(
        what=str(owner.get("what", "?")),
        host=str(owner.get("host", "?")),
        pid=int(owner.get("pid", 0)),
        started=float(owner.get("started", 0.0)),
        heartbeat=beat,
    )


def _free(owner, beat, released, stale_after, now):
    if owner is None or released or now - beat > stale_after:
        return True
    here = owner.get("host") == socket.gethostname() and owner.get("ns") == _namespace()
    return here and owner.get("pid") != os.getpid() and not _alive(int(owner.get("pid", 0)))


class Lease:
    """A lease this process holds: beats until `release`."""

    def __init__(self, store, run_id, number, stale_after, scope=None):
        self.store = store
        self.run_id = run_id
        self.number = number
        self.scope = scope
        self.key = f"{_prefix(scope)}.{number}"
        self.interval = max(0.5, stale_after / 10)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name="kg-lease", daemon=True)
        self._thread.start()

    def _beat(self):
        while not self._stop.wait(self.interval):
            try:
                self.store.set_tag(self.run_id, f"{self.key}.heartbeat", repr(time.time()))
            except Exception as error:  # the store's retries said it; try again next beat
                log.debug(f"lease heartbeat on run {self.run_id} failed: {error}")

    def confirm(self):
        """Raises `LeaseLost` if another process took the lease over."""
        number, owner, beat, _ = current(self.store, self.run_id, self.scope)
        if number != self.number:
            raise LeaseLost(self.run_id, _holder(owner, beat))

    def release(self):
        """Stops the heartbeat and marks the lease released (one try: a
        store that is down leaves it to go stale)."""
        if self._stop.is_set():
            return
        self._stop.set()
        self._thread.join(timeout=5)
        try:
            self.store.set_tag(self.run_id, f"{self.key}.released", repr(time.time()))
        except Exception as error:  # never hides why the sweep stopped
            log.warning(
                f"could not release the lease on sweep run {self.run_id} ({error}); "
                f"it goes stale after its stale time."
            )


def take(store, run_id, *, what, stale_after, scope=None,
         wait=False, on_wait=None):  # fmt: skip
    """Takes the lease on sweep `run_id` (its slice `scope`); returns a `Lease`.

    Raises:
        LeaseHeld: another live process holds it (unless `wait`: then
            this waits for it to be released or go stale; `on_wait(error)`
            is called once, when the wait begins).
    """
    while True:
        number, owner, beat, released = current(store, run_id, scope)
        now = time.time()
        if _free(owner, beat, released, stale_after, now):
            mine = {"what": what, "host": socket.gethostname(), "pid": os.getpid(),
                    "ns": _namespace(), "started": now}  # fmt: skip
            if store.claim(run_id, f"{_prefix(scope)}.{number + 1}", json.dumps(mine)):
                return Lease(store, run_id, number + 1, stale_after, scope)
            continue  # another taker won this number: read who
        held = LeaseHeld(run_id, _holder(owner, beat), stale_after, scope, now)
        if not wait:
            raise held
        if on_wait is not None:
            on_wait(held)
            on_wait = None
        time.sleep(min(WAIT_POLL_SECONDS, max(0.1, stale_after / 10)))


@contextlib.contextmanager
def released_on_error(lease):
    """Releases `lease` (None: nothing) if the block raises, then re-raises."""
    try:
        yield
    except BaseException:
        if lease is not None:
            lease.release()
        raise
