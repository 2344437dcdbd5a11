"""Serving: a registered kg-train model vs the scoring server's own floor,
and vs its SavedModel called in-process.

Both servers run as real `kg serve models:/...` processes (MLflow's
scoring server behind kg's request guard; `--server mlflow`: plain
`mlflow models serve --env-manager local`) on 127.0.0.1, from one
temporary sqlite store:

- model: the champion of a real (short) `kg-train` sweep on
  configs/moons.yaml, served through service/kg_service/tasks/classification/pyfunc.py;
- floor: a pyfunc model that returns its input, logged with the same
  float32 tensor signature, so MLflow's request parsing, schema
  enforcement and JSON encoding cost it exactly what they cost the model.

The same bounded load goes to each, alternating floor and model round by
round so that a busy machine slows both alike: N requests (2,000) from C
concurrent clients (8 threads, one keep-alive connection each), batch 1
and batch 256. Printed, the median over the rounds: requests/s, p50 and
p99 latency, the server's CPU time per request (its process tree, from
/proc: what the model costs on top of the floor, whatever else the
machine runs), and the model's requests/s over the floor's. Any non-200
answer stops the run.

Beside them, the same load on the champion's SavedModel called in this
process (its `serving_default` signature from C client threads, no HTTP,
no JSON): what TF Serving's own executor would cost at best, without its
network layer.

    python benchmarks/bench_serving.py                       # 5 rounds, --workers 1
    python benchmarks/bench_serving.py --workers 1 2 4 --rounds 3
    python benchmarks/bench_serving.py --server mlflow       # mlflow models serve
"""

import argparse
import concurrent.futures
import contextlib
import http.client
import json
import os
import pathlib
import platform
import socket
import statistics
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import typing
import urllib.request

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VENV_BIN = os.path.dirname(sys.executable)

FLOOR_MODEL = textwrap.dedent(
    '''
    """A pyfunc model that returns its input: the scoring server's floor."""
    import mlflow.pyfunc
    import numpy as np


    class Identity(mlflow.pyfunc.PythonModel):
        def predict(self, context, model_input: np.ndarray, params=None) -> np.ndarray:
            return model_input


    mlflow.models.set_model(Identity())
    '''
)


def free_port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def env(tracking_uri):
    base = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    # `mlflow models serve --env-manager local` runs uvicorn from PATH.
    base["PATH"] = VENV_BIN + os.pathsep + base.get("PATH", "")
    base["MLFLOW_TRACKING_URI"] = tracking_uri
    return base


def train_champion(tmp, tracking_uri, epochs):
    """A short kg-train sweep; returns the winner's `models:/` URI."""
    command = [
        os.path.join(VENV_BIN, "kg-train"),
        "--config", os.path.join(ROOT, "configs", "moons.yaml"),
        "--set", "seeds=[0]",
        "--set", f"training.epochs={epochs}",
        "--set", "export.dir=exports",
        "--tracking-uri", tracking_uri,
        "--output-dir", os.path.join(tmp, "kg-output"),
        "--quiet",
    ]  # fmt: skip
    result = subprocess.run(command, cwd=tmp, env=env(tracking_uri), capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"kg-train failed:\n{result.stdout}\n{result.stderr[-3000:]}")
    (serve_line,) = [l for l in result.stdout.splitlines() if l.startswith("Serve:")]
    return serve_line.split(" -m ")[1].split()[0]


def saved_model_path(tmp, model_name):
    """The newest exported version of `model_name` under tmp/exports."""
    versions = sorted(pathlib.Path(tmp, "exports", model_name).iterdir(), key=lambda p: int(p.name))
    return versions[-1]


def log_floor(tmp, tracking_uri, features):
    """Registers the identity pyfunc; returns its `models:/` URI."""
    import mlflow

    path = os.path.join(tmp, "floor_model.py")
    with open(path, "w") as f:
        f.write(FLOOR_MODEL)
    spec = mlflow.types.TensorSpec(np.dtype("float32"), (-1, features))
    signature = mlflow.models.ModelSignature(
        inputs=mlflow.types.Schema([spec]), outputs=mlflow.types.Schema([spec])
    )
    mlflow.set_tracking_uri(tracking_uri)
    # Artifacts in the temporary folder too, not ./mlruns of the caller.
    experiment = mlflow.create_experiment(
        "serving-floor", artifact_location=pathlib.Path(tmp, "floor-artifacts").as_uri()
    )
    with mlflow.start_run(experiment_id=experiment):
        mlflow.pyfunc.log_model(
            name="model",
            python_model=path,
            signature=signature,
            pip_requirements=[f"mlflow=={mlflow.__version__}"],
            registered_model_name="serving-floor",
        )
    return "models:/serving-floor/1"


class Server(typing.NamedTuple):
    port: int
    pid: int


@contextlib.contextmanager
def serve(model_uri, tracking_uri, workers, log_path, server="kg"):
    port = free_port()
    if server == "kg":
        command = [
            os.path.join(VENV_BIN, "kg"), "serve", model_uri, "--tracking-uri", tracking_uri,
            "--port", str(port), "--workers", str(workers),
        ]  # fmt: skip
    else:
        command = [
            os.path.join(VENV_BIN, "mlflow"), "models", "serve",
            "-m", model_uri, "--env-manager", "local",
            "--host", "127.0.0.1", "--port", str(port), "--workers", str(workers),
        ]  # fmt: skip
    with open(log_path, "w") as log:
        process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, env=env(tracking_uri)
        )
    try:
        deadline = time.monotonic() + 300
        while True:
            if process.poll() is not None:
                sys.exit(f"{model_uri}: server exited:\n{open(log_path).read()[-3000:]}")
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/ping", timeout=2):
                    break
            except OSError:
                if time.monotonic() > deadline:
                    sys.exit(f"{model_uri}: server not up after 300 s")
                time.sleep(0.5)
        yield Server(port, process.pid)
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def cpu_seconds(pid):
    """User + system CPU seconds of process `pid` and its descendants (Linux)."""
    parent, ticks = {}, {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parent[int(entry)] = int(fields[1])
            ticks[int(entry)] = int(fields[11]) + int(fields[12])
    tree, grew = {pid}, True
    while grew:
        grown = tree | {p for p, pp in parent.items() if pp in tree}
        grew, tree = grown != tree, grown
    return sum(ticks.get(p, 0) for p in tree) / os.sysconf("SC_CLK_TCK")


def hammer(new_client, requests, clients):
    """`requests` calls from `clients` threads, each with its own
    `new_client()`: a function of the request index that returns None or
    an error. Returns (seconds, latencies, errors)."""
    latencies = []
    errors = []
    next_index = iter(range(requests))
    lock = threading.Lock()

    def client():
        call = new_client()
        while True:
            with lock:
                index = next(next_index, None)
            if index is None:
                break
            started = time.perf_counter()
            error = call(index)
            elapsed = time.perf_counter() - started
            with lock:
                latencies.append(elapsed)
                if error is not None:
                    errors.append(error)
        getattr(call, "close", lambda: None)()

    started = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        for future in [pool.submit(client) for _ in range(clients)]:
            future.result()
    return time.perf_counter() - started, latencies, errors


def load(port, bodies, requests, clients):
    """POSTs over one keep-alive connection per client."""

    def new_client():
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        headers = {"Content-Type": "application/json"}

        def call(index):
            connection.request("POST", "/invocations", bodies[index % len(bodies)], headers)
            response = connection.getresponse()
            payload = response.read()
            return None if response.status == 200 else (response.status, payload[:200])

        call.close = connection.close
        return call

    return hammer(new_client, requests, clients)


def load_in_process(function, inputs, requests, clients):
    """The same load on a callable, in this process."""

    def call(index):
        function(inputs[index % len(inputs)])

    return hammer(lambda: call, requests, clients)


def measure_in_process(function, inputs, args):
    load_in_process(function, inputs, args.warmup, args.clients)
    cpu = time.process_time()
    seconds, latencies, errors = load_in_process(function, inputs, args.requests, args.clients)
    return summary(seconds, latencies, errors, time.process_time() - cpu, args.requests)


def saved_model_function(path):
    """The SavedModel's serving_default, float32 numpy in and out."""
    import tensorflow as tf

    loaded = tf.saved_model.load(str(path))
    signature = loaded.signatures["serving_default"]
    (output,) = signature.structured_outputs

    def call(x):
        return signature(tf.constant(x))[output].numpy()

    call.loaded = loaded  # keeps the variables alive
    return call


def measure(server, bodies, args):
    load(server.port, bodies, args.warmup, args.clients)
    cpu = cpu_seconds(server.pid)
    seconds, latencies, errors = load(server.port, bodies, args.requests, args.clients)
    return summary(seconds, latencies, errors, cpu_seconds(server.pid) - cpu, args.requests)


def summary(seconds, latencies, errors, cpu, requests):
    ms = np.asarray(latencies) * 1e3
    return {
        "rps": requests / seconds,
        "cpu_ms": cpu / requests * 1e3,
        "p50": float(np.percentile(ms, 50)),
        "p99": float(np.percentile(ms, 99)),
        "errors": len(errors),
        "first_error": errors[0] if errors else None,
    }


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 256])
    parser.add_argument(
        "--workers", type=int, nargs="+", default=[1], help="server processes; several: each measured"
    )
    parser.add_argument("--server", choices=["kg", "mlflow"], default="kg",
                        help="kg serve (default) or mlflow models serve")
    parser.add_argument("--rounds", type=int, default=5, help="alternating floor/model rounds")
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--epochs", type=int, default=5, help="of the kg-train sweep")
    args = parser.parse_args()

    import importlib.metadata
    import warnings

    import mlflow

    # The floor is logged without an input example, deliberately.
    warnings.filterwarnings("ignore", message=".*input example was not provided")
    features = 2  # make_moons
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory(prefix="bench-serving-") as tmp:
        uri = f"sqlite:///{os.path.join(tmp, 'mlflow.db')}"
        print("training a short kg-train sweep (configs/moons.yaml, seed 0)...", flush=True)
        train_champion(tmp, uri, args.epochs)
        model_uri = "models:/moons-gelu@champion"  # keras_gelu's exact GELU
        floor_uri = log_floor(tmp, uri, features)
        in_process = saved_model_function(saved_model_path(tmp, "moons-gelu"))
        rows = []
        for workers in args.workers:
            with serve(floor_uri, uri, workers, os.path.join(tmp, "floor.log"), args.server) as floor, serve(
                model_uri, uri, workers, os.path.join(tmp, "model.log"), args.server
            ) as model:
                for batch in args.batch:
                    arrays = [rng.normal(size=(batch, features)).round(4).astype("float32") for _ in range(16)]
                    bodies = [json.dumps({"inputs": x.tolist()}) for x in arrays]
                    runs = {"floor": [], "model": [], "in-process": []}
                    for round_ in range(args.rounds):
                        order = [("floor", floor), ("model", model)]
                        for name, server in order if round_ % 2 == 0 else order[::-1]:
                            print(f"  workers {workers}, batch {batch}, round {round_ + 1}: {name}", flush=True)
                            runs[name].append(measure(server, bodies, args))
                        if workers == args.workers[0]:
                            print(f"  batch {batch}, round {round_ + 1}: SavedModel in-process", flush=True)
                            runs["in-process"].append(measure_in_process(in_process, arrays, args))
                    for name, each in runs.items():
                        errors = [r for r in each if r["errors"]]
                        if errors:
                            sys.exit(f"{name}: {errors[0]['errors']} errors, e.g. {errors[0]['first_error']}")

                    def median(name, key):
                        return statistics.median(r[key] for r in runs[name])

                    labels = [("floor", "floor (returns its input)"), ("model", model_uri)]
                    if runs["in-process"]:
                        labels.append(("in-process", "SavedModel in-process (no HTTP)"))
                    for name, label in labels:
                        rps = median(name, "rps")
                        rows.append(
                            ("–" if name == "in-process" else workers, batch, label, rps, rps * batch,
                             median(name, "p50"), median(name, "p99"), median(name, "cpu_ms"),
                             rps / median("floor", "rps"),
                             ", ".join(f"{r['rps']:.0f}" for r in runs[name]))
                        )  # fmt: skip

    server = "kg serve" if args.server == "kg" else "mlflow models serve --env-manager local"
    print(
        f"\n{server}; {args.requests} requests per round from {args.clients} concurrent "
        f"clients, {args.rounds} rounds, floor and model alternating (median shown); "
        f"{os.cpu_count()} cores, {platform.machine()}, mlflow {mlflow.__version__}, "
        f"keras {importlib.metadata.version('keras')} "
        f"({os.environ.get('KERAS_BACKEND', 'tensorflow')} backend)\n"
    )
    head = (
        "workers", "batch", "server", "req/s", "rows/s", "p50 ms", "p99 ms", "CPU ms/req",
        "req/s vs floor", "req/s per round",
    )  # fmt: skip
    print("| " + " | ".join(head) + " |")
    print("|" + "|".join("---" for _ in head) + "|")
    for workers, batch, label, rps, rows_s, p50, p99, cpu, ratio, each in rows:
        print(
            f"| {workers} | {batch} | {label} | {rps:.0f} | {rows_s:.0f} | {p50:.1f} | {p99:.1f} "
            f"| {cpu:.2f} | {ratio:.2f}x | {each} |"
        )


if __name__ == "__main__":
    main()
