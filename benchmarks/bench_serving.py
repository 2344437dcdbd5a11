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
  (Since kg serve's fast path, service/kg_service/serving/fast_path.py,
  a kg classifier's JSON matrix no longer goes through MLflow's app; the
  floor, not a kg pyfunc, still does. The ratio then compares the two
  paths; `--server kg kg@DIR`, DIR an older tree, serves the same model
  before and after side by side.)

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
    python benchmarks/bench_serving.py --server kg mlflow    # both, interleaved
    python benchmarks/bench_serving.py --guard               # the guard's cost, by stage
    python benchmarks/bench_serving.py --pyfunc-of DIR       # also the model with an older pyfunc.py
    python benchmarks/bench_serving.py --stages              # the pyfunc's batch-1 stages, in-process
    python benchmarks/bench_serving.py --fast-path           # kg serve's fast path vs MLflow's app, in-process

*vs floor per round* divides each round's model figure by the same
round's floor (the two measured one after the other): the load of a
shared machine moves both, so its median and spread are steadier than
the ratio of the medians. `--guard` runs no server: MLflow's scoring app
for the floor model, with and without kg's guard in front, called in this
process as uvicorn calls it, and each step of the guard timed alone.
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


def env(tracking_uri, source=None):
    base = {k: v for k, v in os.environ.items() if k != "MLFLOW_TRACKING_URI"}
    if source:  # kg_service from another tree (an older commit), first on the path
        base["PYTHONPATH"] = os.path.join(source, "service")
    # `mlflow models serve --env-manager local` runs uvicorn from PATH.
    base["PATH"] = VENV_BIN + os.pathsep + base.get("PATH", "")
    base["MLFLOW_TRACKING_URI"] = tracking_uri
    return base


def train_champion(tmp, tracking_uri, epochs):
    """A short kg-train sweep (each activation's model registered)."""
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


PYFUNC = os.path.join("service", "kg_service", "tasks", "classification", "pyfunc.py")


def model_with_pyfunc(tmp, tracking_uri, model_uri, source):
    """A local copy of `model_uri`'s folder that runs `source`'s pyfunc.py
    (an older tree's): the same weights and keras_gelu, the pyfunc of then.

    MLflow loads a models-from-code pyfunc from the copy in the model's
    folder, so `kg@DIR` (another kg_service) serves the pyfunc logged
    with the model, whichever server runs it.
    """
    import shutil

    import mlflow

    mlflow.set_tracking_uri(tracking_uri)
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")  # not in the report
    local = mlflow.artifacts.download_artifacts(
        model_uri, dst_path=tempfile.mkdtemp(prefix="pyfunc-of-", dir=tmp)
    )
    shutil.copy(os.path.join(source, PYFUNC), os.path.join(local, "pyfunc.py"))
    return local


class Server(typing.NamedTuple):
    port: int
    pid: int


@contextlib.contextmanager
def serve(model_uri, tracking_uri, workers, log_path, server="kg"):
    """`server`: "kg", "mlflow", or "kg@DIR" (kg serve with kg_service from DIR)."""
    port = free_port()
    server, _, source = server.partition("@")
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
            command, stdout=log, stderr=subprocess.STDOUT, env=env(tracking_uri, source)
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


def asgi_scope(body):
    """An ASGI scope for POST /invocations of a JSON body, as uvicorn makes it."""
    return {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
        "scheme": "http", "path": "/invocations", "raw_path": b"/invocations",
        "query_string": b"", "root_path": "", "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
        "headers": [(b"host", b"127.0.0.1:8000"), (b"content-type", b"application/json"),
                    (b"content-length", str(len(body)).encode())],
    }  # fmt: skip


async def asgi_request(app, body):
    """One request through an ASGI app, in this event loop; its status."""
    import asyncio

    answered = asyncio.Event()
    status = []
    read = []

    async def receive():
        if not read:
            read.append(True)
            return {"type": "http.request", "body": body, "more_body": False}
        await answered.wait()
        return {"type": "http.disconnect"}

    async def send(message):
        if message["type"] == "http.response.start":
            status.append(message["status"])

    await app(asgi_scope(body), receive, send)
    answered.set()
    if status != [200]:
        sys.exit(f"the in-process request was answered {status}")


def guard_costs(floor, features, args):
    """`(batch, stage, µs per request, share of a floor request)` rows: the
    guard (`kg_service.serving.scoring_app.Guard`) in front of MLflow's
    scoring app for the identity floor model, called as uvicorn calls it,
    against MLflow's app alone; and the stages of the guard one by one,
    with what it paid before for the same step (`asyncio.wait_for` per
    body message, a thread hop per body). `paired` times the steps in
    turn; medians over its blocks.
    """
    import asyncio

    from mlflow.pyfunc import scoring_server

    from kg_service.serving import request_checks
    from kg_service.serving import scoring_app

    mlflow_app = scoring_server.init(floor)
    guarded = scoring_app.Guard(mlflow_app, 100 * 2**20, features)
    rng = np.random.default_rng(0)
    n = max(args.requests // 4, 100)

    async def ready():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def block(step, repeat):
        started = time.perf_counter()
        for _ in range(repeat):
            await step()
        return (time.perf_counter() - started) / repeat * 1e6

    async def paired(steps, blocks=20, repeat=max(n // 20, 5)):
        """µs per call of each step, the steps timed in turn in short blocks
        (so that a load that comes and goes slows each alike): for each
        step, the list of its blocks' times."""
        for step in steps.values():
            await block(step, repeat)  # warm
        times = {name: [] for name in steps}
        for k in range(blocks):
            for name in steps if k % 2 == 0 else list(steps)[::-1]:
                times[name].append(await block(steps[name], repeat))
        return times

    async def in_flight(app, body):
        """`args.clients` requests in flight at once, as uvicorn's event
        loop holds them; µs per request."""

        async def step():
            await asyncio.gather(*(asgi_request(app, body) for _ in range(args.clients)))

        return step

    async def stages(body):
        request = json.loads(body)

        async def decode():
            request_checks.decode(body)

        async def check():
            request_checks.check(request, features)

        whole = await paired({"alone": lambda: asgi_request(mlflow_app, body),
                              "guard": lambda: asgi_request(guarded, body)})  # fmt: skip
        together = await paired(
            {"alone": await in_flight(mlflow_app, body), "guard": await in_flight(guarded, body)},
            repeat=max(n // 20 // args.clients, 2),
        )
        parts = await paired({
            "guard: decode the JSON (request_checks.decode)": decode,
            "guard: check the rows (request_checks.check)": check,
            "guard: read the body within the client timeout (asyncio.timeout)":
                lambda: scoring_app._within(ready, 10.0),
            "before: the same read through asyncio.wait_for": lambda: asyncio.wait_for(ready(), 10.0),
            "before: a thread hop for every body (asyncio.to_thread)":
                lambda: asyncio.to_thread(lambda: None),
        })  # fmt: skip
        floor_us = statistics.median(whole["alone"])
        per_request = [t / args.clients for t in together["alone"]]
        rows = [
            ("MLflow's app alone (the floor model), one request at a time", floor_us),
            ("the guard: guarded minus alone, one request at a time",
             statistics.median(g - a for a, g in zip(whole["alone"], whole["guard"]))),
            (f"MLflow's app alone, {args.clients} requests in flight", statistics.median(per_request)),
            (f"the guard: guarded minus alone, {args.clients} requests in flight",
             statistics.median((g - a) / args.clients for a, g in zip(together["alone"], together["guard"]))),
        ]  # fmt: skip
        rows += [(name, statistics.median(times)) for name, times in parts.items()]
        return [(stage, us, us / floor_us) for stage, us in rows]

    rows = []
    for batch in args.batch:
        body = json.dumps({"inputs": rng.normal(size=(batch, features)).round(4).tolist()}).encode()
        rows += [(batch, *row) for row in asyncio.run(stages(body))]
    return rows


def fast_path_costs(tracking_uri, floor_uri, model_uri, args, blocks=20):
    """CPU µs per request (this process, all its threads) of the model
    behind kg's guard with its fast path and without it (MLflow's scoring
    app, as before the fast path), the floor through MLflow's app beside
    them, and the fast path's own steps; one request at a time and
    `args.clients` in flight, as uvicorn's event loop holds them; the
    rows timed in turn in `blocks` blocks, median.

    Returns [(batch, row, µs)]."""
    import asyncio

    import mlflow
    from mlflow.pyfunc import scoring_server

    from kg_service.serving import fast_path
    from kg_service.serving import scoring_app

    mlflow.set_tracking_uri(tracking_uri)
    floor = mlflow.pyfunc.load_model(floor_uri)
    model = mlflow.pyfunc.load_model(model_uri)
    features = int(model.metadata.get_input_schema().inputs[0].shape[-1])
    path = fast_path.FastPath.of(model)
    apps = {
        "model, guard + fast path (kg serve now)": scoring_app.Guard(
            scoring_server.init(model), 100 * 2**20, features, fast=path, timeout=60
        ),
        "model, guard + MLflow's app (kg serve before)": scoring_app.Guard(
            scoring_server.init(model), 100 * 2**20, features
        ),
        "floor, guard + MLflow's app": scoring_app.Guard(
            scoring_server.init(floor), 100 * 2**20, features
        ),
    }
    rng = np.random.default_rng(0)
    rows = []
    for batch in args.batch:
        x = rng.normal(size=(batch, features)).round(4).astype("float32")
        body = json.dumps({"inputs": x.tolist()}).encode()
        request = json.loads(body)
        repeat = 100 if batch == 1 else 20

        async def one(app):
            await asgi_request(app, body)

        async def together(app):
            await asyncio.gather(*(asgi_request(app, body) for _ in range(args.clients)))

        steps = {}
        for name, app in apps.items():
            steps[f"{name}, one at a time"] = (lambda app=app: one(app), 1)
            steps[f"{name}, {args.clients} in flight"] = (lambda app=app: together(app), args.clients)
        matrix = path.matrix(request)
        output = path.python_model.predict(None, matrix)
        parts = {
            "fast path: the rows as a float32 matrix (FastPath.matrix)": lambda: path.matrix(request),
            "fast path: kg's predict, called directly": lambda: path.python_model.predict(None, matrix),
            "MLflow's app: PyFuncModel.predict (schema check, kg's predict)": lambda: model.predict(matrix),
            "fast path: the answer's JSON (json.dumps of .tolist())": lambda: json.dumps(
                {"predictions": output.tolist()}
            ),
        }

        async def timed():
            times = {name: [] for name in [*steps, *parts]}
            for k in range(blocks + 1):  # block 0 warms
                names = list(times) if k % 2 else list(times)[::-1]
                for name in names:
                    started = time.process_time()
                    for _ in range(repeat):
                        if name in steps:
                            await steps[name][0]()
                        else:
                            parts[name]()
                    per = steps[name][1] if name in steps else 1
                    if k:
                        times[name].append((time.process_time() - started) / repeat / per * 1e6)
            return times

        for name, each in asyncio.run(timed()).items():
            rows.append((batch, name, statistics.median(each)))
    return rows


def pyfunc_stages(tmp, tracking_uri, floor_uri, model_uri, blocks=20, repeat=300):
    """CPU per batch-1 call of each stage of the model's pyfunc, in this
    process, one call at a time; stages in turn in `blocks` blocks, median.

    Returns [(stage, microseconds)]."""
    import importlib.util

    import mlflow
    import tensorflow as tf

    mlflow.set_tracking_uri(tracking_uri)
    floor = mlflow.pyfunc.load_model(floor_uri)
    model = mlflow.pyfunc.load_model(model_uri)
    python_model = model._model_impl.python_model
    # The same pyfunc.py as a module of its own, for its functions.
    spec = importlib.util.spec_from_file_location("served_pyfunc", os.path.join(ROOT, PYFUNC))
    code = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(code)
    keras_model = python_model.model
    graph = tf.function(
        lambda v: keras_model(v, training=False),
        input_signature=[tf.TensorSpec([None, keras_model.input_shape[-1]], tf.float32)],
        jit_compile=True,
    ).get_concrete_function()
    x = np.zeros((1, keras_model.input_shape[-1]), "float32")
    direct = code.direct_call(graph, x)
    flat = code._flat_call(graph)
    tensor = tf.constant(x)
    # kg's predict as it was with the flat call (before the op call), for
    # the side-by-side ratio.
    flat_forward = code.Combined(code.padded(lambda v: flat(tf.constant(v)).numpy()))
    stages = {
        "floor: MLflow's pyfunc predict (schema check, the identity model)": lambda: floor.predict(x),
        "model: MLflow's pyfunc predict (schema check, kg's pyfunc)": lambda: model.predict(x),
        "model: kg's predict (checked_input, Combined, padded, the call)": lambda: python_model.predict(None, x),
        "model: kg's predict with the flat call instead (the pyfunc before the op call)": lambda: (
            flat_forward(code.checked_input(x, x.shape[1]))
        ),
        "checked_input": lambda: code.checked_input(x, x.shape[1]),
        "tf.constant(x)": lambda: tf.constant(x),
        "the XLA graph, public call: ConcreteFunction(tensor)": lambda: graph(tensor),
        "the XLA graph, flat call: ConcreteFunction._call_flat": lambda: flat(tensor),
        f"the XLA graph, direct_call (what the pyfunc uses: {direct.__qualname__.split('.')[0]})": (
            lambda: direct(tensor)
        ),
        "the Keras model called eagerly (no graph)": lambda: keras_model(tensor, training=False),
    }
    for step in stages.values():
        step()
    times = {stage: [] for stage in stages}
    for block in range(blocks):
        for stage in list(stages)[:: 1 if block % 2 == 0 else -1]:
            n = 10 if "eagerly" in stage else repeat
            started = time.process_time()
            for _ in range(n):
                stages[stage]()
            times[stage].append((time.process_time() - started) / n * 1e6)
    return [(stage, statistics.median(each)) for stage, each in times.items()]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--clients", type=int, default=8)
    parser.add_argument("--batch", type=int, nargs="+", default=[1, 256])
    parser.add_argument(
        "--workers", type=int, nargs="+", default=[1], help="server processes; several: each measured"
    )
    parser.add_argument("--server", nargs="+", default=["kg"],
                        help="kg (kg serve, the default), mlflow (mlflow models serve), kg@DIR (kg serve "
                        "with DIR/service/kg_service, e.g. an older commit's `git archive COMMIT service "
                        "| tar -x -C DIR`); several: interleaved")
    parser.add_argument("--pyfunc-of", nargs="+", default=[], metavar="DIR",
                        help="also serve the same model with DIR's pyfunc.py (an older tree, e.g. "
                        "`git archive COMMIT service | tar -x -C DIR`), by the first --server")
    parser.add_argument("--rounds", type=int, default=5, help="alternating floor/model rounds")
    parser.add_argument("--warmup", type=int, default=100)
    parser.add_argument("--epochs", type=int, default=5, help="of the kg-train sweep")
    parser.add_argument("--guard", action="store_true",
                        help="only the guard's cost per stage, in this process (no servers, no training)")
    parser.add_argument("--fast-path", action="store_true",
                        help="only kg serve's fast path against MLflow's scoring app for the same "
                        "model, CPU per request in this process (a short training, no servers)")
    parser.add_argument("--stages", action="store_true",
                        help="only the model pyfunc's stages at batch 1, in this process (a short "
                        "training, no servers)")
    args = parser.parse_args()

    import importlib.metadata
    import warnings

    import mlflow

    # The floor is logged without an input example, deliberately.
    warnings.filterwarnings("ignore", message=".*input example was not provided")
    features = 2  # make_moons
    load_before = os.getloadavg()
    if args.guard:
        with tempfile.TemporaryDirectory(prefix="bench-guard-") as tmp:
            uri = f"sqlite:///{os.path.join(tmp, 'mlflow.db')}"
            floor = mlflow.pyfunc.load_model(log_floor(tmp, uri, features))
            rows = guard_costs(floor, features, args)
        print(
            f"\nkg serve's guard in this process (no HTTP), steps timed in turn in 20 blocks, median; "
            f"{os.cpu_count()} cores, load average {load_before[0]:.1f} -> "
            f"{os.getloadavg()[0]:.1f}, mlflow {mlflow.__version__}\n"
        )
        print("| batch | stage | µs per request | of a floor request through MLflow's app |")
        print("|---|---|---|---|")
        for batch, stage, us, share in rows:
            print(f"| {batch} | {stage} | {us:.1f} | {share:.1%} |")
        return

    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory(prefix="bench-serving-") as tmp:
        uri = f"sqlite:///{os.path.join(tmp, 'mlflow.db')}"
        print("training a short kg-train sweep (configs/moons.yaml, seed 0)...", flush=True)
        train_champion(tmp, uri, args.epochs)
        # keras_gelu's exact GELU, whichever activation won the sweep.
        model_uri = "models:/moons-gelu@champion"
        floor_uri = log_floor(tmp, uri, features)
        if args.fast_path:
            rows = fast_path_costs(uri, floor_uri, model_uri, args)
            print(
                f"\nA request through kg's guard as uvicorn calls it, in this process (no HTTP): "
                f"CPU µs per request, median of 20 blocks, rows in turn; {os.cpu_count()} cores, "
                f"load average {load_before[0]:.1f} -> {os.getloadavg()[0]:.1f}, mlflow "
                f"{mlflow.__version__}, tensorflow backend\n"
            )
            print("| batch | path | CPU µs per request |")
            print("|---|---|---|")
            for batch, name, us in rows:
                print(f"| {batch} | {name} | {us:.1f} |")
            return
        if args.stages:
            rows = pyfunc_stages(tmp, uri, floor_uri, model_uri)
            print(
                f"\nA batch-1 call, stage by stage, in this process (no HTTP), one call at a "
                f"time: CPU µs per call, median of 20 blocks, stages in turn; {os.cpu_count()} "
                f"cores, load average {load_before[0]:.1f} -> {os.getloadavg()[0]:.1f}, mlflow "
                f"{mlflow.__version__}, tensorflow backend\n"
            )
            print("| stage | CPU µs per call |")
            print("|---|---|")
            for stage, us in rows:
                print(f"| {stage} | {us:.1f} |")
            return
        in_process = saved_model_function(saved_model_path(tmp, "moons-gelu"))
        rows = []
        for workers in args.workers:
            with contextlib.ExitStack() as stack:
                servers = {
                    (kind, name): stack.enter_context(
                        serve(uri_, uri, workers, os.path.join(tmp, f"{k}-{name}.log"), kind)
                    )
                    for k, kind in enumerate(args.server)
                    for name, uri_ in (("floor", floor_uri), ("model", model_uri))
                }
                for source in args.pyfunc_of:
                    copy = model_with_pyfunc(tmp, uri, model_uri, source)
                    servers[(args.server[0], f"model@{source}")] = stack.enter_context(
                        serve(copy, uri, workers, os.path.join(tmp, f"pyfunc-{len(servers)}.log"), args.server[0])
                    )
                for batch in args.batch:
                    arrays = [rng.normal(size=(batch, features)).round(4).astype("float32") for _ in range(16)]
                    bodies = [json.dumps({"inputs": x.tolist()}) for x in arrays]
                    runs = {key: [] for key in servers}
                    runs[(None, "in-process")] = []
                    for round_ in range(args.rounds):
                        order = list(servers) if round_ % 2 == 0 else list(servers)[::-1]
                        for key in order:
                            print(f"  workers {workers}, batch {batch}, round {round_ + 1}: {' '.join(key)}", flush=True)
                            runs[key].append(measure(servers[key], bodies, args))
                        if workers == args.workers[0]:
                            print(f"  batch {batch}, round {round_ + 1}: SavedModel in-process", flush=True)
                            runs[(None, "in-process")].append(measure_in_process(in_process, arrays, args))
                    for key, each in runs.items():
                        errors = [r for r in each if r["errors"]]
                        if errors:
                            sys.exit(f"{key}: {errors[0]['errors']} errors, e.g. {errors[0]['first_error']}")
                    rows += table_rows(runs, workers, batch, model_uri, args.server[0])

    print(
        f"\n{' vs '.join(server_name(kind) for kind in args.server)}; {args.requests} requests per "
        f"round from {args.clients} concurrent clients, {args.rounds} rounds, every server in "
        f"turn, the order reversed each round (median shown); {os.cpu_count()} cores, "
        f"{platform.machine()}, load average {load_before[0]:.1f} -> {os.getloadavg()[0]:.1f}, "
        f"mlflow {mlflow.__version__}, keras {importlib.metadata.version('keras')} "
        f"({os.environ.get('KERAS_BACKEND', 'tensorflow')} backend)\n"
    )
    head = (
        "workers", "batch", "server", "model", "req/s", "rows/s", "p50 ms", "p99 ms", "CPU ms/req",
        "req/s vs floor", "vs floor per round: median [min-max]", "req/s per round",
    )  # fmt: skip
    print("| " + " | ".join(head) + " |")
    print("|" + "|".join("---" for _ in head) + "|")
    for row in rows:
        print("| " + " | ".join(row) + " |")


def server_name(kind):
    name = {"kg": "kg serve", "mlflow": "mlflow models serve --env-manager local"}
    kind, _, source = kind.partition("@")
    return name[kind] + (f" ({source})" if source else "")


def table_rows(runs, workers, batch, model_uri, first_kind):
    """The printed rows of one batch size: each server's floor and model,
    then the in-process SavedModel against the first server's floor."""

    def median(key, field):
        return statistics.median(r[field] for r in runs[key])

    rows = []
    for key in runs:
        kind, name = key
        floor = (kind or first_kind, "floor")
        ratios = sorted(r["rps"] / f["rps"] for r, f in zip(runs[key], runs[floor]))
        if not ratios:
            continue
        rps = median(key, "rps")
        label = {"floor": "floor (returns its input)", "model": model_uri}.get(
            name, "SavedModel in-process (no HTTP)"
        )
        if name.startswith("model@"):
            label = f"{model_uri}, pyfunc.py of {name.partition('@')[2]}"
        rows.append(
            (str(workers) if kind else "–", str(batch), server_name(kind) if kind else "–", label,
             f"{rps:.0f}", f"{rps * batch:.0f}", f"{median(key, 'p50'):.1f}",
             f"{median(key, 'p99'):.1f}", f"{median(key, 'cpu_ms'):.2f}",
             f"{rps / median(floor, 'rps'):.2f}x",
             f"{statistics.median(ratios):.2f}x [{ratios[0]:.2f}-{ratios[-1]:.2f}]",
             ", ".join(f"{r['rps']:.0f}" for r in runs[key]))
        )  # fmt: skip
    return rows


if __name__ == "__main__":
    main()
