"""One writer per sweep (issue 30 §1): the lease on a sweep's parent run,
on the in-memory store (the same base-class bookkeeping MLflow's store
runs; tests/service/sweep/test_faults.py and
tests/service/tracking/test_shared_server.py race two real resumes on
sqlite and on a PostgreSQL-backed server)."""

import json
import os
import socket
import subprocess
import threading
import time

import pytest

from kg_service.errors import LeaseHeld
from kg_service.errors import LeaseLost
from kg_service.tracking import lease
from tests.service.memory_store import MemoryStore

STALE = 60.0


def _sweep():
    store = MemoryStore()
    return store, store.create_run("sweep", {}, {"kg.role": "sweep"})


def _forge(store, run_id, number, *, host, pid, beat, ns=None):
    """A lease held by some other process (what a killed one leaves)."""
    owner = {"what": "kg-train", "host": host, "pid": pid, "started": beat,
             "ns": lease._namespace() if ns is None else ns}  # fmt: skip
    assert store.claim(run_id, f"kg.lease.{number}", json.dumps(owner))
    store.set_tag(run_id, f"kg.lease.{number}.heartbeat", repr(beat))


def test_a_second_taker_is_refused_naming_the_holder_until_released():
    store, run_id = _sweep()
    mine = lease.take(store, run_id, what="kg-train", stale_after=STALE)
    with pytest.raises(LeaseHeld) as refused:
        lease.take(store, run_id, what="kg-train", stale_after=STALE)
    held = refused.value.holder
    assert (held.host, held.pid, held.what) == (socket.gethostname(), os.getpid(), "kg-train")
    assert refused.value.stale_after == STALE
    mine.release()
    again = lease.take(store, run_id, what="kg-train", stale_after=STALE)
    assert again.number == 2
    again.release()


def test_a_live_lease_on_another_host_is_refused_and_taken_once_stale():
    store, run_id = _sweep()
    _forge(store, run_id, 1, host="elsewhere", pid=1, beat=time.time() - STALE / 2)
    with pytest.raises(LeaseHeld):
        lease.take(store, run_id, what="kg-train", stale_after=STALE)
    # Its last heartbeat, half a minute ago, is stale for a 10 s stale time.
    taken = lease.take(store, run_id, what="kg-train", stale_after=10)
    assert taken.number == 2
    taken.release()


def test_a_killed_holder_on_this_host_is_taken_over_at_once():
    gone = subprocess.Popen(["true"])
    gone.wait()
    store, run_id = _sweep()
    _forge(store, run_id, 1, host=socket.gethostname(), pid=gone.pid, beat=time.time())
    taken = lease.take(store, run_id, what="kg-train", stale_after=STALE)
    assert taken.number == 2
    taken.release()
    # The same pid in another pid namespace (a container) is not ours to judge.
    store, run_id = _sweep()
    _forge(store, run_id, 1, host=socket.gethostname(), pid=gone.pid, beat=time.time(), ns="x")
    with pytest.raises(LeaseHeld):
        lease.take(store, run_id, what="kg-train", stale_after=STALE)


def test_two_takers_of_one_stale_lease_one_wins():
    store, run_id = _sweep()
    _forge(store, run_id, 1, host="elsewhere", pid=1, beat=time.time() - STALE - 1)
    start, results = threading.Barrier(2), []

    def taker():
        start.wait()
        try:
            results.append(lease.take(store, run_id, what="kg-train", stale_after=STALE))
        except LeaseHeld as error:
            results.append(error)

    threads = [threading.Thread(target=taker) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    won = [r for r in results if isinstance(r, lease.Lease)]
    assert len(won) == 1 and sum(isinstance(r, LeaseHeld) for r in results) == 1
    won[0].release()


def test_wait_takes_the_lease_once_the_holder_releases_it():
    store, run_id = _sweep()
    first = lease.take(store, run_id, what="kg-train", stale_after=STALE)
    seen = []

    def holder_ends(held):  # called once, as the wait begins
        seen.append(held.holder.pid)
        threading.Timer(0.2, first.release).start()

    second = lease.take(store, run_id, what="kg-train", stale_after=5, wait=True,
                        on_wait=holder_ends)  # fmt: skip
    assert seen == [os.getpid()] and second.number == 2
    second.release()


def test_a_holder_whose_lease_was_taken_over_learns_it_before_registering():
    store, run_id = _sweep()
    mine = lease.take(store, run_id, what="kg-train", stale_after=STALE)
    mine.confirm()
    _forge(store, run_id, 2, host="elsewhere", pid=1, beat=time.time())
    with pytest.raises(LeaseLost):
        mine.confirm()
    mine.release()


def test_each_shard_slice_has_its_own_lease():
    store, run_id = _sweep()
    one = lease.take(store, run_id, what="kg-train", stale_after=STALE, scope="shard-1-of-2")
    two = lease.take(store, run_id, what="kg-train", stale_after=STALE, scope="shard-2-of-2")
    with pytest.raises(LeaseHeld):
        lease.take(store, run_id, what="kg-train", stale_after=STALE, scope="shard-1-of-2")
    one.release()
    two.release()


def test_wait_without_a_sweep_to_wait_for_is_a_usage_error():
    from tests.service import in_process
    from tests.service.sweep.test_faults import TINY

    result = in_process.kg_train("--config", TINY, "--wait")
    assert result.exit_code == 2 and "Traceback" not in result.stderr
    assert "--wait" in result.stderr and "--resume" in result.stderr
