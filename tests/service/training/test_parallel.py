"""kg_service.training.parallel: data-parallel training on the backends' engines.

The role of a process comes from TF_CONFIG alone (no backend); the
engines run for real on two CPU devices: TensorFlow's MirroredStrategy
over two logical CPU devices, JAX's DataParallel over two host devices,
and MultiWorkerMirroredStrategy across two kg-train processes on
127.0.0.1. Each must train the tiny config to the weights one device
gives. Device settings must precede the backend's start, so those runs
are subprocesses.
"""

import json
import os
import pathlib
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest
from click.testing import CliRunner

from kg_service.cli import train as cli
from kg_service.training import parallel as distribution
from kg_service.config.schema import DeviceConfig
from kg_service.errors import ServiceError

from tests.service.servers import free_port

REPO = pathlib.Path(__file__).resolve().parents[3]
TINY = REPO / "configs" / "tiny.yaml"
# Float32 sums in another order (per replica, then all-reduced): a few ulps.
WEIGHT_TOLERANCE = 1e-6


# --- Which process is the chief: TF_CONFIG, read without TensorFlow. ---------


def _role(tf_config, kind="multi_worker", backend="tensorflow"):
    environ = {} if tf_config is None else {"TF_CONFIG": json.dumps(tf_config)}
    return distribution.role(DeviceConfig(distribution=kind), backend, environ)


def test_worker_zero_is_the_chief_of_a_cluster_without_one():
    cluster = {"worker": ["127.0.0.1:1", "127.0.0.1:2"]}
    first = _role({"cluster": cluster, "task": {"type": "worker", "index": 0}})
    second = _role({"cluster": cluster, "task": {"type": "worker", "index": 1}})
    assert (first.chief, first.index, first.count) == (True, 0, 2)
    assert (second.chief, second.index, second.count) == (False, 1, 2)
    assert str(second) == "worker (process 1 of 2)"


def test_a_chief_task_is_the_chief_and_every_worker_follows_it():
    cluster = {"chief": ["h:1"], "worker": ["h:2", "h:3"]}
    chief = _role({"cluster": cluster, "task": {"type": "chief", "index": 0}})
    worker = _role({"cluster": cluster, "task": {"type": "worker", "index": 0}})
    assert (chief.chief, chief.count) == (True, 3)
    assert (worker.chief, worker.index) == (False, 1)


def test_one_process_distributions_are_their_own_chief():
    for kind in ("none", "mirrored"):
        role = _role(None, kind=kind)
        assert (role.chief, role.count) == (True, 1)


@pytest.mark.parametrize(
    "tf_config, expected",
    [
        (None, "TF_CONFIG (device.distribution: multi_worker): not set. "
               "MultiWorkerMirroredStrategy reads the cluster from it"),
        ("{cluster:", "TF_CONFIG (device.distribution: multi_worker): not valid JSON"),
        ({"cluster": {"worker": ["h:1"]}}, 'expected a JSON object with "cluster" and "task"'),
        ({"cluster": {"worker": ["h:1"], "ps": ["h:2"]}, "task": {"type": "worker"}},
         "the cluster has jobs ['ps', 'worker']; MultiWorkerMirroredStrategy takes"),
        ({"cluster": {"worker": ["h"]}, "task": {"type": "worker", "index": 0}},
         'cluster.worker must be a non-empty list of "host:port" strings; got ["h"]'),
        ({"cluster": {"worker": ["h:1"]}, "task": {"type": "worker", "index": 1}},
         "task index 1 is out of range; cluster.worker has 1 address(es), indexes 0 to 0."),
        ({"cluster": {"worker": ["h:1"]}, "task": {"type": "chief", "index": 0}},
         'task {"type": "chief", "index": 0} is not in the cluster'),
    ],
)
def test_a_bad_tf_config_is_one_clear_error(tf_config, expected):
    environ = {} if tf_config is None else {
        "TF_CONFIG": tf_config if isinstance(tf_config, str) else json.dumps(tf_config)
    }
    with pytest.raises(ServiceError) as info:
        distribution.role(DeviceConfig(distribution="multi_worker"), "tensorflow", environ)
    assert expected in str(info.value)


def test_a_distribution_without_an_engine_on_the_backend_says_what_runs():
    with pytest.raises(ServiceError, match="multi_worker runs on the TensorFlow backend"):
        _role(None, backend="jax")
    with pytest.raises(ServiceError, match="mirrored has no engine on the torch backend; "
                                           "it runs on jax and tensorflow"):
        _role(None, kind="mirrored", backend="torch")


def test_a_device_the_backend_lacks_is_named_with_those_it_has():
    with pytest.raises(ServiceError, match=r"(?i)has no device '/gpu:7'; it has .*cpu:0"):
        distribution.engine(DeviceConfig(distribution="mirrored", devices=("/gpu:7",)))


# --- The command line: refused before anything is written. -------------------


def _kg_train(tmp_path, *args):
    return CliRunner().invoke(
        cli.main,
        ["--config", str(TINY), "--tracking-uri", f"sqlite:///{tmp_path}/mlflow.db",
         "--output-dir", str(tmp_path / "out"), "--set", f"export.dir={tmp_path}/exports",
         *args],
        prog_name="kg-train",
    )


def test_multi_worker_without_tf_config_exits_2_and_writes_nothing(tmp_path, monkeypatch):
    monkeypatch.delenv("TF_CONFIG", raising=False)
    result = _kg_train(tmp_path, "--set", "device.distribution=multi_worker")
    assert result.exit_code == 2, result.output
    if keras.backend.backend() == "tensorflow":
        assert "TF_CONFIG (device.distribution: multi_worker): not set." in result.output
    else:
        assert "multi_worker runs on the TensorFlow backend" in result.output
    assert "Traceback" not in result.output
    assert list(tmp_path.iterdir()) == []


def test_resume_of_a_multi_worker_sweep_is_refused(tmp_path, monkeypatch):
    monkeypatch.setenv("TF_CONFIG", json.dumps(
        {"cluster": {"worker": ["127.0.0.1:1"]}, "task": {"type": "worker", "index": 0}}
    ))
    result = _kg_train(
        tmp_path, "--set", "device.distribution=multi_worker", "--resume", "abc123"
    )
    assert result.exit_code == 2, result.output
    assert "--resume abc123 with device.distribution: multi_worker" in result.output
    assert list(tmp_path.iterdir()) == []


# --- The engines, for real, on two CPU devices. ------------------------------

# Two devices for the backend of the script it starts: TensorFlow's CPU
# split in two logical devices before TensorFlow starts; JAX's two host
# devices come from XLA_FLAGS (`_python`).
TWO_DEVICES = textwrap.dedent("""
    import json, os, sys
    sys.path.insert(0, sys.argv[1])
    if os.environ["KERAS_BACKEND"] == "tensorflow":
        import tensorflow as tf
        cpu = tf.config.list_physical_devices("CPU")[0]
        tf.config.set_logical_device_configuration(
            cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
    """)

# The batches the engine cannot split: the two checks' answers (the error,
# or "ok"), made before anything trains, in `uneven`.
UNEVEN = textwrap.dedent("""
    from kg_service.training import parallel as distribution
    from kg_service.config.schema import DeviceConfig
    from kg_service.errors import ServiceError
    uneven = []
    for batches in (
        {"training.batch_size": 32, "the last training batch": 25},
        {"training.batch_size": 25, "the test split": 60},
    ):
        try:
            distribution.check_batches(DeviceConfig(distribution="mirrored"), batches)
            uneven.append("ok")
        except ServiceError as error:
            uneven.append(str(error))
    """)

# Trains configs/tiny.yaml with each distribution named in argv[3] in turn,
# in one process; prints each one's replicas, weights and histories, and
# (key "uneven") UNEVEN's answers: one process per backend (issue 17), each
# pays the backend's start-up once.
TRAIN = TWO_DEVICES + UNEVEN + textwrap.dedent("""
    from kg_service.tasks import base as tasks
    from kg_service.training import device as device_lib
    from kg_service.training import loop as train
    from kg_service.config.loading import load_config

    out = {"uneven": uneven}
    for kind in sys.argv[3].split(","):
        config = load_config(sys.argv[2], [f"device.distribution={kind}",
            # tiny.yaml as measured here (docs/distribution.md); tiny itself
            # is wider and trains longer since issue 30 §21.
            "model.hidden_units=[8]", "training.epochs=3", "training.learning_rate=0.001"])
        task = tasks.get(config.data.dataset)
        device = device_lib.describe_device(config.device)
        results = train.train_sweep(task, task.load(config.data), config)
        out[kind] = {
            "replicas": device["replicas"],
            "members": {
                f"{r.activation}/{r.seed}": {
                    "weights": [w.ravel().tolist() for w in r.model.get_weights()],
                    "history": r.history,
                    "test_loss": r.test_loss,
                }
                for r in results
            },
        }
    print(json.dumps(out))
    """)


def _python(script, backend, *args):
    """Runs `script` on `backend` with two CPU devices; returns its stdout."""
    proc = subprocess.run(
        [sys.executable, "-c", script, str(REPO), *args],
        env={
            **os.environ,
            "KERAS_BACKEND": backend,
            "TF_CPP_MIN_LOG_LEVEL": "2",
            "JAX_PLATFORMS": "cpu",
            "XLA_FLAGS": "--xla_force_host_platform_device_count=2",
        },
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc.stdout


def _train(backend, kinds):
    out = _python(TRAIN, backend, str(TINY), ",".join(kinds))
    return json.loads(out.strip().splitlines()[-1])


def _assert_same_members(members, reference):
    assert sorted(members) == sorted(reference) == ["gelu/0", "gelu/1", "relu/0", "relu/1"]
    for key, member in members.items():
        expected = reference[key]
        for got, want in zip(member["weights"], expected["weights"]):
            np.testing.assert_allclose(got, want, rtol=0, atol=WEIGHT_TOLERANCE, err_msg=key)
        for name, values in member["history"].items():
            np.testing.assert_allclose(values, expected["history"][name], rtol=0, atol=1e-6)
        assert abs(member["test_loss"] - expected["test_loss"]) < 1e-6


@pytest.fixture(scope="module")
def tensorflow_runs():
    """configs/tiny.yaml on one device and mirrored over two, TensorFlow."""
    return _train("tensorflow", ["none", "mirrored"])


def test_mirrored_over_two_cpu_devices_trains_the_weights_of_one(tensorflow_runs):
    one, mirrored = tensorflow_runs["none"], tensorflow_runs["mirrored"]
    assert (one["replicas"], mirrored["replicas"]) == (1, 2)
    _assert_same_members(mirrored["members"], one["members"])


@pytest.fixture(scope="module")
def jax_runs():
    """configs/tiny.yaml on one device and data-parallel over two host
    devices, JAX."""
    pytest.importorskip("jax")
    return _train("jax", ["none", "mirrored"])


def test_jax_data_parallel_over_two_host_devices_trains_the_weights_of_one(jax_runs):
    runs = jax_runs
    assert (runs["none"]["replicas"], runs["mirrored"]["replicas"]) == (1, 2)
    _assert_same_members(runs["mirrored"]["members"], runs["none"]["members"])


@pytest.mark.parametrize(
    "backend, expected",
    [
        ("jax", [
            "device.distribution: mirrored on JAX splits every batch into 2 equal parts, "
            "one per device, but the last training batch (25) is not a multiple of 2. Pick "
            "training.batch_size and data.n_samples so that they are (the dry run shows "
            "the split sizes), or train on TensorFlow, which splits any batch but the "
            "first.",
            "device.distribution: mirrored on JAX splits every batch into 2 equal parts, "
            "one per device, but training.batch_size (25) is not a multiple of 2. Pick "
            "training.batch_size and data.n_samples so that they are (the dry run shows "
            "the split sizes), or train on TensorFlow, which splits any batch but the "
            "first.",
        ]),
        ("tensorflow", [
            "ok",  # a last partial batch splits unevenly, and trains
            "device.distribution: mirrored splits each training batch across 2 replicas, "
            "and Keras needs the first one in equal slices, but training.batch_size (25) "
            "is not a multiple of 2. Set training.batch_size to a multiple of 2, e.g. "
            "--set training.batch_size=24.",
        ]),
    ],
)
def test_batches_the_engine_cannot_split_are_refused_before_training(backend, expected, request):
    # Checked in the backend's training process (`tensorflow_runs`,
    # `jax_runs`: two devices), before it trains.
    runs = request.getfixturevalue(f"{backend}_runs")
    assert runs["uneven"] == expected


def test_multi_worker_trains_in_two_processes_and_only_the_chief_tracks(
    tmp_path, tensorflow_runs
):
    ports = [free_port(), free_port()]
    cluster = {"worker": [f"127.0.0.1:{port}" for port in ports]}
    processes = []
    for index in (0, 1):
        folder = tmp_path / f"worker{index}"
        folder.mkdir()
        tf_config = {"cluster": cluster, "task": {"type": "worker", "index": index}}
        env = {
            **os.environ,
            "KERAS_BACKEND": "tensorflow",
            "TF_CONFIG": json.dumps(tf_config),
            "TF_CPP_MIN_LOG_LEVEL": "2",
        }
        env.pop("MLFLOW_TRACKING_URI", None)
        command = [
            sys.executable, "-m", "kg_service.cli.train", "--config", str(TINY), "-q",
            "--set", "device.distribution=multi_worker",
            # The sizes `tensorflow_runs` trains at (tiny.yaml before issue 30 §21).
            "--set", "model.hidden_units=[8]", "--set", "training.epochs=3",
            "--set", "training.learning_rate=0.001",
            # Relative: each process's own folder; the worker must not create it.
            "--tracking-uri", "sqlite:///mlflow.db",
        ]
        processes.append(subprocess.Popen(
            command, cwd=folder, env=env, stdout=subprocess.PIPE,
            stderr=subprocess.PIPE, text=True,
        ))
    outputs = []
    try:
        for process in processes:
            outputs.append(process.communicate(timeout=600))
    finally:
        for process in processes:
            process.kill()
    for process, (out, err) in zip(processes, outputs):
        assert process.returncode == 0, err[-3000:]
    assert "worker (process 1 of 2): trained 4 members in lockstep with the chief" in outputs[1][0]
    assert list((tmp_path / "worker1").iterdir()) == []  # no store, no report, no export

    from mlflow.tracking import MlflowClient

    from kg_service.tracking import mlflow_store as tracking

    uri = f"sqlite:///{tmp_path}/worker0/mlflow.db"
    client = MlflowClient(uri, registry_uri=uri)
    experiment = client.get_experiment_by_name("kg-smoke")
    runs = client.search_runs([experiment.experiment_id])
    roles = sorted(run.data.tags["kg.role"] for run in runs)
    assert roles == ["member"] * 4 + ["sweep"]
    (sweep,) = [run for run in runs if run.data.tags["kg.role"] == "sweep"]
    assert sweep.data.tags["device.distribution"] == "multi_worker"
    assert sweep.data.tags["device.replicas"] == "2"
    for name in ("tiny-relu", "tiny-gelu"):
        assert [str(v.version) for v in client.search_model_versions(f"name='{name}'")] == ["1"]
        assert (tmp_path / "worker0" / "exports" / name / "1" / "saved_model.pb").exists()

    logged = tracking.Tracker(uri, "kg-smoke").finished_members(sweep.info.run_id)
    members = {
        f"{a}/{s}": {
            "weights": [w.ravel().tolist() for w in result.model.get_weights()],
            "history": result.history,
            "test_loss": result.test_loss,
        }
        for (a, s), (_, result) in logged.items()
    }
    _assert_same_members(members, tensorflow_runs["none"]["members"])
