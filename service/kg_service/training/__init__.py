"""What every task's training shares: device, dtype policy, optimizer, the
data-parallel engines and the loop over a sweep's activations.

Below `kg_service.tasks` (a task's training uses it) and above
`kg_service.config` (it reads the typed config); it never names a task.

Modules:
    device: the device, its dtype policy, and TensorFlow's noise.
    loop: the loop over a sweep's activations (`train_sweep`).
    optimizers: the configured optimizer, from the catalog's name table.
    parallel: data-parallel training on the backend's own engine.
"""
