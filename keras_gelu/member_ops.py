"""Operations over a member axis: M members side by side on axis 1.

`member_matmul` multiplies member m's input by member m's kernel in one
op; `apply_per_member` applies member m's own function to member m's
slice (members of different activations in one stack). `stacking.py`'s
stacked layers are built on them; so is the service's stacked language
model.
"""

import keras
from keras import ops


def member_matmul(x, kernel):
    """`x[:, m] @ kernel[m]` for every member m, in one op.

    Args:
        x: `(batch, M, ..., in)`.
        kernel: `(M, in, out)`.

    Returns:
        `(batch, M, ..., out)`.

    Why not `einsum("bm...i,mio->bm...o")`: TensorFlow 2.21 runs an
    einsum with an ellipsis far off its matmul. On TensorFlow the members go
    to the front, `(M, batch * ..., in)`, for one batched matmul with
    plain 2-D gradients, and back: an 8-member stacked language model's
    training step took 0.60x the time of the same model with a broadcast
    `x @ kernel[None]` (whose kernel gradient is a `(batch, M, in, out)`
    product summed over the batch) and 0.30x that with the ellipsis
    einsum (issue 20, `benchmarks/bench_language_model.py --step`,
    docs/benchmarks.md). Elsewhere the einsum spelled out (XLA makes one
    dot of it on JAX).
    """
    rank = len(x.shape)
    if rank >= 4 and keras.backend.backend() == "tensorflow":
        shape = ops.shape(x)
        members, width = kernel.shape[0], kernel.shape[-1]
        front = ops.transpose(x, (1, 0) + tuple(range(2, rank)))
        y = ops.matmul(ops.reshape(front, (members, -1, x.shape[-1])), kernel)
        y = ops.reshape(y, (members, shape[0]) + tuple(shape[2:-1]) + (width,))
        return ops.transpose(y, (1, 0) + tuple(range(2, rank)))
    middle = "cdefghjkl"[: rank - 3]
    return ops.einsum(f"bm{middle}i,mio->bm{middle}o", x, kernel)


def member_runs(functions):
    """`[(start, stop, function)]`: runs of consecutive members whose
    function is the same object.

    >>> member_runs(["relu", "relu", "gelu"])
    [(0, 2, 'relu'), (2, 3, 'gelu')]
    """
    runs = []
    for m, function in enumerate(functions):
        if runs and runs[-1][2] is function:
            runs[-1] = (runs[-1][0], m + 1, function)
        else:
            runs.append((m, m + 1, function))
    return runs


def apply_per_member(x, functions):
    """`functions[m](x[:, m])` for every member m, `x` `(batch, M, ...)`.

    Members that share a function form one run and one call: one function
    for all members is one call on the whole input, as a plain layer's;
    otherwise the runs' slices are computed apart and concatenated on the
    member axis. For stateless functions that do not mix members
    (elementwise activations, a gate split on a later axis), member m's
    values are those of `functions[m]` on member m alone.
    """
    runs = member_runs(functions)
    if len(runs) == 1:
        return runs[0][2](x)
    parts = ops.split(x, [start for start, _, _ in runs[1:]], axis=1)
    return ops.concatenate([f(part) for part, (_, _, f) in zip(parts, runs)], axis=1)
