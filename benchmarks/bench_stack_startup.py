"""Start-up of the stack's tracking server (docker/compose.yaml's `mlflow`
line) with MLflow's job runner on and off, side by side (issue 21).

Usage, from the repository root with .venv set up and PostgreSQL
installed (as for tests/service/stack):

    .venv/bin/python benchmarks/bench_stack_startup.py [ROUNDS]

tests/service/stack's harness starts PostgreSQL, the S3 stand-in and the
bucket job once, then starts compose's `mlflow` line (PostgreSQL store,
S3 artifacts, basic-auth, 2 workers) until its own health check passes,
and stops it, alternating MLFLOW_SERVER_ENABLE_JOB_EXECUTION=true and
false for ROUNDS rounds (default 2). The very first start also creates the
tables; it is printed and left out of the ratio. The ratio is of the
medians of the other starts; the load average is printed beside each.
"""

import os
import statistics
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tests.service.stack import harness  # noqa: E402


def main(rounds):
    seconds = {"true": [], "false": []}
    with tempfile.TemporaryDirectory(prefix="kg-bench-stack-") as folder:
        with harness.Stack(folder, harness.generate_dot_env()) as stack:
            stack.up("postgres", "minio-bucket")
            environment = stack.services["mlflow"]["environment"]
            for i, value in enumerate(["true"] + ["true", "false"] * rounds):
                environment["MLFLOW_SERVER_ENABLE_JOB_EXECUTION"] = value
                began = time.monotonic()
                stack.start("mlflow")
                took = time.monotonic() - began
                stack.stop("mlflow")
                load = " ".join(f"{x:.1f}" for x in os.getloadavg())
                note = "  (first start: creates the tables; not counted)" if i == 0 else ""
                print(f"job runner {value:5}: healthy after {took:5.1f} s   load {load}{note}", flush=True)
                if i:
                    seconds[value].append(took)
    on, off = statistics.median(seconds["true"]), statistics.median(seconds["false"])
    print(f"median start-up, job runner on / off: {on:.1f} s / {off:.1f} s = {on / off:.2f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2)
