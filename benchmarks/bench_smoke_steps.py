"""A `--smoke` activation's training at one step per compiled call vs one
call per epoch (issue 17; kg_service.training.loop.steps_per_execution):
each activation's seeds trained stacked at smoke sizes, Keras'
`steps_per_execution` 1 or the epoch's steps (the threshold set to
force either), the two
alternating in one process after a warm-up; CPU seconds
(`time.process_time`, every thread) per activation and their ratio.

Usage:

    KERAS_BACKEND=tensorflow .venv/bin/python benchmarks/bench_smoke_steps.py \\
        configs/glu-variants.yaml gelu,swiglu 2
"""
import os
import sys
import time

from kg_service.config import derived
from kg_service.config.loading import load_config
from kg_service.tasks import base as tasks
from kg_service.training import loop

# loop.steps_per_execution reads the threshold at each compile: 1 makes
# every run one call per epoch, a huge one every run one step per call.
THRESHOLD = {"steps": 1, "one": 10**9}
cfg = derived.smoke(load_config(sys.argv[1]))
acts = sys.argv[2].split(",")
task = tasks.get(cfg.data.dataset); ds = task.load(cfg.data)
task.train(task, ds, cfg, acts[0], cfg.seeds, lambda *x: None)  # warm-up
tot = {"steps": 0.0, "one": 0.0}; load = [os.getloadavg()[0]]
for r in range(int(sys.argv[3])):
    for a in acts:
        for label in (("steps", "one") if r % 2 == 0 else ("one", "steps")):
            loop.MULTI_STEP_MIN_STEPS = THRESHOLD[label]
            c = time.process_time(); task.train(task, ds, cfg, a, cfg.seeds, lambda *x: None); tot[label] += time.process_time() - c
load.append(os.getloadavg()[0])
n = int(sys.argv[3]) * len(acts)
print(sys.argv[1], {k: round(v / n, 2) for k, v in tot.items()}, "CPU s per activation; ratio", round(tot["steps"] / tot["one"], 3), "load", load)
