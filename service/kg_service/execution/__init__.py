"""Where a sweep's members train: a Ray cluster, for `execution.engine: ray` (issue 33).

The kg-train process stays the driver: it tunes, looks, compares, exports
and registers once. Each stacked group of members becomes a Ray task that
trains them on some node and logs their runs to the tracking store; the
driver gets back each member's small result (no model: the champion's is
read from its run when it is registered).

Modules:
    cluster: connecting to Ray (or starting a local one), and what a cluster refuses.
    groups: the driver's side: a sweep's groups as Ray tasks, results as they land.
    remote: the task's side: train one group's members, log each run once.
"""
