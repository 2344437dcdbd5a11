"""One sweep end to end: the pipeline stages, shards, resume, tuning, looks.

Modules:
    claims: `kg plan --config`: a config's claims planned from a stored pilot.
    looks: a sequential sweep: seeds in batches, a look after each.
    pipeline: the whole sweep, `run`, as the sequence of its stages.
    preflight: everything that can fail on the user's side, checked first.
    rebuild: `kg report`: a sweep's report rebuilt from the tracking store.
    resume: continuing a sweep: what the store holds, who may join it.
    roles: which process of a sweep this is (chief or worker).
    sharded: one job's share of a sharded sweep (`run_shard`).
    shards: which slice of the (activation, seed) grid a job trains.
    stages: the stages after pre-flight, one function each.
    studies: `kg report --study`: a study's sweeps analysed as one family.
    tuning: the tuning stage: each activation's own value of one setting.
"""
