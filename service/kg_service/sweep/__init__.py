"""One sweep end to end: the pipeline stages, shards, the spool, data-parallel training."""
