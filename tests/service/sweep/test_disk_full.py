"""A disk that fills while the sweep exports (issue 30 §14), for real: a
16 KiB tmpfs as export.dir (CI runs as root; elsewhere this test is
skipped, saying why). kg-train used to end with TensorFlow's
ResourceExhaustedError traceback; it now exits 2 with one paragraph
(the full disk, what the store keeps, the resume command), registers
nothing, leaves no half-written SavedModel, and `--resume` with room
finishes without training again."""

import re
import subprocess

import pytest

from tests.service import in_process
from tests.service.sweep.test_faults import TINY
from tests.service.sweep.test_faults import _client
from tests.service.sweep.test_faults import _sweep_runs


@pytest.fixture
def full_disk(tmp_path):
    folder = tmp_path / "small"
    folder.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=16k", "tmpfs", str(folder)],
        capture_output=True, text=True,
    )  # fmt: skip
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here (not root?): {mounted.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True)


def test_a_full_disk_during_export_is_one_message_and_resume_finishes(
    tmp_path, monkeypatch, full_disk
):
    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    args = ["--config", TINY, "--tracking-uri", uri, "--set", "activations=[gelu]",
            "--set", "seeds=2", "--set", "training.epochs=2", "--set", "experiment=full"]  # fmt: skip
    monkeypatch.chdir(tmp_path)
    failed = in_process.kg_train(*args, "--set", f"export.dir={full_disk}")
    assert failed.exit_code == 2, (failed.stderr + repr(failed.exception))[-3000:]
    message = failed.stderr
    assert "Traceback" not in message and "ResourceExhausted" not in message, message
    assert "disk is full: " in message and "No space left on device" in message, message
    assert "2 of 2 members are in the tracking store" in message, message
    run_id = re.search(r"--resume (\w+)", message).group(1)
    client = _client(tmp_path)
    (parent,), members = _sweep_runs(client, "full")
    assert parent.info.status == "FAILED" and len(members) == 2
    assert client.search_registered_models() == []
    assert not [p for p in full_disk.rglob("*") if p.is_file()]  # nothing half-written

    resumed = in_process.kg_train(*args, "--resume", run_id)  # export.dir: ./exports
    assert resumed.exit_code == 0, (resumed.stderr + repr(resumed.exception))[-3000:]
    assert "resumed, 2 members already done" in resumed.stdout
    (version,) = client.search_model_versions("name='tiny-gelu'")
    assert str(version.version) == "1"
    assert (tmp_path / "exports" / "tiny-gelu" / "1" / "saved_model.pb").exists()
