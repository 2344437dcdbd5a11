"""Under `pytest -n 2 --dist loadgroup` (.ci/run) a module's tests run on
one worker, so its module-scoped fixtures (a trained sweep, a server) are
built once: tests/conftest.py makes the groups itself (pytest-xdist 3.8's
own `xdist_group` names are lost under pytest 9, issue 17)."""

import collections
import pathlib
import subprocess
import sys
import textwrap

REPO = pathlib.Path(__file__).resolve().parents[2]

PROBE = textwrap.dedent(
    """
    import os
    import pytest

    @pytest.fixture(scope="module")
    def built(request):
        with open(os.environ["PROBE_LOG"], "a") as log:
            log.write(f"built {request.module.__name__}\\n")

    @pytest.mark.parametrize("k", range(4))
    def test_probe(built, k, request):
        with open(os.environ["PROBE_LOG"], "a") as log:
            log.write(f"ran {request.module.__name__} {os.environ['PYTEST_XDIST_WORKER']}\\n")
    """
)


def test_each_module_runs_on_one_worker_and_builds_its_fixture_once(tmp_path):
    for name in ("test_first.py", "test_second.py"):
        (tmp_path / name).write_text(PROBE)
    log = tmp_path / "probe.log"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.conftest", "-n", "2", "--dist",
         "loadgroup", "-q", "-p", "no:cacheprovider", "--rootdir", str(tmp_path), str(tmp_path)],
        cwd=REPO, capture_output=True, text=True, timeout=300,
        env={"PATH": "/usr/bin:/bin", "PROBE_LOG": str(log), "PYTHONPATH": str(REPO),
             "KG_TEST_TIMELINE": str(tmp_path / "timeline.tsv")},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    lines = [line.split() for line in log.read_text().splitlines()]
    assert collections.Counter(m for verb, m, *_ in lines if verb == "built") == {
        "test_first": 1, "test_second": 1,
    }  # fmt: skip
    workers = collections.defaultdict(set)
    for verb, module, *worker in lines:
        if verb == "ran":
            workers[module].update(worker)
    assert {m: len(w) for m, w in workers.items()} == {"test_first": 1, "test_second": 1}
    # KG_TEST_TIMELINE: one line per test, on the worker that ran it, in its group.
    rows = [line.split("\t") for line in (tmp_path / "timeline.tsv").read_text().splitlines()]
    assert len(rows) == 8
    for worker, group, start, end, own_cpu, children_cpu, nodeid in rows:
        assert group == nodeid.split("::")[0] and float(start) <= float(end)
        assert float(own_cpu) >= 0 and float(children_cpu) >= 0
        assert {worker} == workers[pathlib.Path(group).stem]
