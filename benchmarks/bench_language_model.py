"""Training throughput of kg-train's language model beside keras-hub's GPT-2.

What a Keras user would otherwise pick is keras-hub's `GPT2Backbone`
(built from its constructor: random weights, no download) with its tied
output projection, as `GPT2CausalLM` has it. Both are built at the same
depth, width, heads, FFN width, context and vocabulary, trained with
`fit` on the same windows of the python_code corpus (a fresh draw each
round, the same for every model), same batch, AdamW, in one process;
runs are interleaved (A B C A B C ...) and each model's median tokens/s is
compared, so drift of this shared machine hits every model alike. After
the last round every model has taken the same steps on the same windows,
and its validation loss is printed beside its speed (issue 20 §2: faster
at an equal loss). One more row is kg-train's model with a fused
query-key-value projection (`lm_layers.FusedSelfAttention`, the same
weights; not what model.py builds), to measure whether fusing pays.

`--variants` adds rows for what else might pay (issue 20 §2 and §3): the
kg-train model with GPT-2's initializer family, N(0, 0.02) (so the loss
column compares like with like), MultiHeadAttention's einsum attention
instead of `ops.dot_product_attention`, the exact GELU formula op by op
(no nested XLA kernel), and on TensorFlow each model again compiled by
XLA (`jit_compile=True`), interleaved with the rest; each is paired with
its counterpart in the step ratios printed below the table:

    KERAS_BACKEND=tensorflow .venv/bin/python benchmarks/bench_language_model.py --variants

    KERAS_BACKEND=tensorflow .venv/bin/python benchmarks/bench_language_model.py
    KERAS_BACKEND=jax .venv/bin/python benchmarks/bench_language_model.py
    KERAS_BACKEND=tensorflow .venv/bin/python benchmarks/bench_language_model.py --xla

Prints one table: tokens/s per model and its ratio to GPT2Backbone, and
the GELU/ReLU training-step time ratio of the kg-train model.

`--sweep` times instead what a sweep does with one activation's seeds
(issue 20): `train_language_model` (all seeds as one stacked model)
against `train_one_by_one` (each seed a model of its own, what kg-train
did before), the same config, seeds, steps and windows, interleaved
rounds in one process after one warm-up member of each; it prints each
round's seconds, the ratio, and how far the two paths' members are apart
(validation loss after the last epoch), which must be float rounding.
With `--xla` both paths are timed a second time with `device.xla` on
(`jit_compile=True`; on JAX, always compiled, the same as without);
`--stacked-only` leaves the one-by-one rows out (the stacked model's
compilation alone, interleaved, in a fraction of the time):

    KERAS_BACKEND=tensorflow .venv/bin/python benchmarks/bench_language_model.py --sweep --xla
    KERAS_BACKEND=tensorflow .venv/bin/python benchmarks/bench_language_model.py --sweep --xla --stacked-only
    KERAS_BACKEND=jax .venv/bin/python benchmarks/bench_language_model.py --sweep

`--step` profiles one training step of the stacked model (issue 20 §1):
ms per step of one plain model, of stacked models of M/2 and M members,
and of the M-member model with the per-member matmul written the ways it
was before (`einsum("bm...i,mio->bm...o")`, TensorFlow only) or could be
(a broadcast `x @ kernel[None]`), all interleaved in one process. M
members stacked against M/2 twice is what stacking two activations' seeds
into one model would save at best:

    KERAS_BACKEND=tensorflow .venv/bin/python benchmarks/bench_language_model.py --step

`--bf16` adds rows built under the `mixed_bfloat16` dtype policy (what
`device.mixed_precision: mixed_bfloat16` sets): GPT2Backbone, kg-train's
LM with each GELU mode and ReLU, and its fused-QKV copy, each paired with
its float32 row. On TensorFlow, oneDNN runs bfloat16 matmuls on the
CPU's AMX / AVX512-BF16 units; XLA:CPU (JAX) has no such path. With
`--sweep` it adds the stacked sweep under the same policy:

    KERAS_BACKEND=tensorflow .venv/bin/python benchmarks/bench_language_model.py --bf16
    KERAS_BACKEND=tensorflow .venv/bin/python benchmarks/bench_language_model.py --sweep --bf16 --stacked-only

`--matmul` times only one matmul of the FFN's shape, float32 beside
bfloat16, on the backend: whether the CPU's bfloat16 units reach it.

`--kernels` adds to the first table the exact-GELU model traced inside
`keras_gelu.xla_fusion(False)` (the formula op by op, not keras_gelu's
nested XLA kernel): how much of GELU's step time the kernel saves.
"""

import argparse
import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import keras  # noqa: E402
import numpy as np  # noqa: E402

import keras_gelu  # noqa: E402
from keras import ops  # noqa: E402
from lm_models import CASTS_AROUND  # noqa: E402
from lm_models import EinsumAttention  # noqa: E402
from lm_models import casts_around  # noqa: E402
from lm_models import compiled  # noqa: E402
from lm_models import fused_qkv  # noqa: E402
from lm_models import gpt2  # noqa: E402
from lm_models import gpt2_initialized  # noqa: E402
from lm_models import kg_model  # noqa: E402
from lm_models import tokens_per_second  # noqa: E402
from lm_models import with_attention  # noqa: E402



def sweep(args):
    """Stacked vs one-by-one seeds of one activation; see the docstring."""
    import dataclasses

    from kg_service.config.loading import load_config
    from kg_service.tasks import base as tasks
    from kg_service.tasks.language import train as language

    config = load_config(args.config)
    config = dataclasses.replace(
        config,
        seeds=tuple(range(args.members)),
        data=dataclasses.replace(config.data, corpus_bytes=args.corpus_bytes),
        training=dataclasses.replace(
            config.training, epochs=args.epochs, steps_per_epoch=args.steps
        ),
    )
    task = tasks.get(config.data.dataset)
    corpus = task.load(config.data)
    # name -> (training function, device.xla, device.mixed_precision); the
    # first row is the baseline.
    ways = {"one by one": (language.train_one_by_one, False, None),
            "stacked": (language.train_language_model, False, None)}
    if args.xla:  # issue 20 §1, round 3: device.xla (jit_compile=True) for both paths
        ways["one by one, XLA"] = (language.train_one_by_one, True, None)
        ways["stacked, XLA"] = (language.train_language_model, True, None)
    if args.bf16:  # issue 20 §2, round 9: device.mixed_precision: mixed_bfloat16
        ways["stacked, mixed_bfloat16"] = (language.train_language_model, False, "mixed_bfloat16")
    if args.stacked_only:  # the stacked model's compilation alone, the cheap rows
        ways = {way: ways[way] for way in ways if way.startswith("stacked")}
    first = next(iter(ways))

    def run(way, seeds):
        train, xla, policy = ways[way]
        device = dataclasses.replace(config.device, xla=xla, mixed_precision=policy)
        cfg = dataclasses.replace(config, device=device)
        start = time.perf_counter()
        results = train(task, corpus, cfg, args.activation, seeds, lambda e, v: None)
        return time.perf_counter() - start, results

    for way in ways:  # imports, first traces of the process, JAX's per-shape compiles
        run(way, (100, 101))
    seconds = {way: [] for way in ways}
    finals = {}
    for _ in range(args.repeats):
        for way in ways:
            elapsed, results = run(way, config.seeds)
            seconds[way].append(elapsed)
            finals[way] = np.array([r.history["val_loss"][-1] for r in results])
    median = {way: statistics.median(s) for way, s in seconds.items()}
    alone = median[first]
    m = config.model
    print(f"backend {keras.backend.backend()}; {args.config} model ({len(m.hidden_units)} "
          f"blocks, d_model {m.d_model}, FFN {list(m.hidden_units)}, {m.heads} heads, context "
          f"{config.data.context}), {args.activation}, {args.members} seeds, {args.epochs} "
          f"epochs x {args.steps} steps x batch {config.training.batch_size}, corpus "
          f"{args.corpus_bytes:,} bytes; load average {os.getloadavg()[0]:.1f}")
    print(f"| training of the seeds | seconds per round | median | vs {first} |")
    print("|---|---|---|---|")
    for way in ways:
        rounds = ", ".join(f"{s:.1f}" for s in seconds[way])
        print(f"| {way} | {rounds} | {median[way]:.1f} | {alone / median[way]:.2f}x faster |")
    print()
    for way in ways:
        if way == first:
            continue
        gap = np.abs(finals[way] - finals[first]).max()
        print(f"last validation loss, {way} vs {first}, largest member difference: "
              f"{gap:.2e} nats (values {np.round(finals[way], 4).tolist()})")


def step_profile(args):
    """One stacked training step against plain ones; see the docstring."""
    import keras_gelu.stacking as stacking
    from keras_gelu.stacking import stack_weights
    from kg_service.tasks.language import stacked as stacked_module
    from kg_service.tasks.language import train as language

    members, width, context = args.members, 64, 64
    dims = (2, 4, width, 192, context, 256)  # configs/glu-variants.yaml's model
    current = stacking.member_matmul

    def ellipsis(x, kernel):  # what StackedDense computed before issue 20
        return ops.einsum("bm...i,mio->bm...o", x, kernel)

    def broadcast(x, kernel):
        if len(x.shape) != 4:
            return current(x, kernel)
        return ops.matmul(x, kernel[None])

    def use(matmul):  # read when a model is traced: at its first fit
        stacking.member_matmul = stacked_module.member_matmul = matmul

    def build(m):  # m = 0: one plain model
        plain = []
        for seed in range(max(m, 1)):
            keras.utils.set_random_seed(seed)
            plain.append(kg_model(args.activation, *dims))
        if m == 0:
            return plain[0]
        model = stacked_module.stack_language_model(plain[0], m)
        stack_weights(model, plain)
        return model

    rng = np.random.default_rng(0)
    variants = {
        "one plain model": (0, current),
        f"stacked, {members // 2} members": (members // 2, current),
        f"stacked, {members} members": (members, current),
        f"stacked, {members} members, broadcast x @ kernel[None]": (members, broadcast),
    }
    if keras.backend.backend() == "tensorflow":
        variants[f"stacked, {members} members, einsum bm...i (before)"] = (members, ellipsis)
    runs = {}
    for name, (m, matmul) in variants.items():
        model = build(m)
        loss = (language._members_loss(m) if m else
                keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        model.compile(optimizer=keras.optimizers.AdamW(1e-3), loss=loss,
                      steps_per_execution=args.steps,
                      jit_compile=True if args.xla else "auto")
        shape = (args.steps * args.batch,) + ((m,) if m else ()) + (context + 1,)
        data = rng.integers(0, 256, size=shape, dtype=np.int32)
        use(matmul)
        tokens_per_second(model, data[..., :-1], data[..., 1:], args.batch)  # trace
        runs[name] = (model, data[..., :-1], data[..., 1:], max(m, 1))
    use(current)
    seconds = {name: [] for name in runs}
    for _ in range(args.repeats):
        for name, (model, x, y, _) in runs.items():
            start = time.perf_counter()
            model.fit(x, y, batch_size=args.batch, epochs=1, shuffle=False, verbose=0)
            seconds[name].append((time.perf_counter() - start) / args.steps)
    step = {name: statistics.median(s) * 1000 for name, s in seconds.items()}
    plain = step["one plain model"]
    print(f"backend {keras.backend.backend()}; configs/glu-variants.yaml model (2 blocks, "
          f"d_model {width}, FFN 192, 4 heads, context {context}), {args.activation}, batch "
          f"{args.batch} per member, AdamW, fit, jit_compile "
          f"{'True' if args.xla else 'auto'}, {args.steps} steps per timed run, median of "
          f"{args.repeats} interleaved runs; load average {os.getloadavg()[0]:.1f}")
    print("| model | ms per step | per member | vs one plain step per member |")
    print("|---|---|---|---|")
    for name, (_, _, _, m) in runs.items():
        print(f"| {name} | {step[name]:,.1f} | {step[name] / m:,.1f} | "
              f"{step[name] / m / plain:.2f}x |")
    half, full = step[f"stacked, {members // 2} members"], step[f"stacked, {members} members"]
    print(f"\n{members} members in one stacked step / two steps of {members // 2}: "
          f"{full / (2 * half):.2f}x")


def matmul_speed(args):
    """One `(batch * context, width) @ (width, ffn)` matmul in float32 and
    in bfloat16, compiled as the backend runs a step (a `tf.function` on
    TensorFlow, `jax.jit` on JAX), interleaved: whether this CPU's bfloat16
    units (AMX, AVX512-BF16) reach the backend (issue 20 §2, round 9)."""
    rng = np.random.default_rng(0)
    shapes = ((args.batch * args.context, args.width), (args.width, args.ffn))
    if keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        compiled = tf.function(ops.matmul, autograph=False)
    else:
        import jax

        compiled = jax.jit(ops.matmul)
    calls = {}
    for dtype in ("float32", "bfloat16"):
        a, b = (ops.cast(rng.normal(size=shape).astype("float32"), dtype) for shape in shapes)
        calls[dtype] = lambda a=a, b=b: compiled(a, b)
        for _ in range(5):
            ops.convert_to_numpy(calls[dtype]())
    seconds = {dtype: [] for dtype in calls}
    for _ in range(args.repeats):
        for dtype, call in calls.items():
            start = time.perf_counter()
            for _ in range(50):
                out = call()
            ops.convert_to_numpy(out)
            seconds[dtype].append((time.perf_counter() - start) / 50)
    flops = 2 * shapes[0][0] * shapes[0][1] * shapes[1][1]
    print(f"backend {keras.backend.backend()}; ({shapes[0][0]}, {shapes[0][1]}) @ {shapes[1]}, "
          f"median of {args.repeats} interleaved rounds of 50 calls; load average "
          f"{os.getloadavg()[0]:.1f}")
    print("| dtype | µs per matmul | GFLOP/s |")
    print("|---|---|---|")
    for dtype, s in seconds.items():
        t = statistics.median(s)
        print(f"| {dtype} | {t * 1e6:,.0f} | {flops / t / 1e9:,.0f} |")
    print(f"\nbfloat16 / float32 time: "
          f"{statistics.median(seconds['bfloat16']) / statistics.median(seconds['float32']):.2f}x")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sweep", action="store_true",
                        help="time a stacked sweep of one activation's seeds against one by one")
    parser.add_argument("--step", action="store_true",
                        help="profile one stacked training step against plain ones")
    parser.add_argument("--stacked-only", action="store_true",
                        help="--sweep: time only the stacked rows (with --xla: auto vs XLA)")
    parser.add_argument("--config", default="configs/glu-variants.yaml", help="--sweep: its model")
    parser.add_argument("--activation", default="gelu", help="--sweep: the activation")
    parser.add_argument("--members", type=int, default=8, help="--sweep: seeds")
    parser.add_argument("--epochs", type=int, default=2, help="--sweep: epochs")
    parser.add_argument("--corpus-bytes", type=int, default=300_000, help="python_code corpus size")
    parser.add_argument("--eval-windows", type=int, default=64,
                        help="validation windows for the loss after the timed steps")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--width", type=int, default=128)
    parser.add_argument("--ffn", type=int, default=512)
    parser.add_argument("--context", type=int, default=128)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--steps", type=int, default=10, help="steps per timed fit (--sweep: per epoch)")
    parser.add_argument("--repeats", type=int, default=None,
                        help="interleaved rounds (default 5; --sweep: 2)")
    parser.add_argument("--variants", action="store_true",
                        help="add rows: GPT-2's N(0, 0.02) init, einsum attention, the "
                             "formula op by op, and (TensorFlow) XLA beside auto")
    parser.add_argument("--only", default="",
                        help="comma-separated parts of row names: time only those rows "
                             "(and GPT2Backbone), e.g. --only gelu_tanh")
    parser.add_argument("--kernels", action="store_true",
                        help="add the exact-GELU model traced with keras_gelu.xla_fusion(False)")
    parser.add_argument("--bf16", action="store_true",
                        help="add rows built under the mixed_bfloat16 dtype policy (what "
                             "device.mixed_precision sets): kg-train's LM and GPT2Backbone")
    parser.add_argument("--matmul", action="store_true",
                        help="time one matmul of the model's FFN shape in float32 and bfloat16")
    parser.add_argument("--xla", action="store_true",
                        help="jit_compile=True (what device.xla sets; 'auto' is off on CPU); "
                             "--sweep: add both paths with device.xla on")
    args = parser.parse_args()
    if args.matmul:
        args.repeats = args.repeats or 20
        return matmul_speed(args)
    if args.sweep:
        args.repeats = args.repeats or 2
        return sweep(args)
    if args.step:
        args.repeats = args.repeats or 3
        return step_profile(args)
    args.repeats = args.repeats or 5
    return versus_gpt2(args)


def corpus_windows(args):
    """The python_code corpus at `--context`: a draw of training windows
    per round (the same for every model) and the validation windows."""
    import dataclasses

    from kg_service.config.loading import load_config
    from kg_service.tasks import base as tasks
    from kg_service.tasks.language.train import _random_windows

    config = load_config(args.config)
    data = dataclasses.replace(config.data, corpus_bytes=args.corpus_bytes, context=args.context)
    corpus = tasks.get(data.dataset).load(data)
    rng = np.random.default_rng(0)
    count = args.steps * args.batch
    rounds = [_random_windows(corpus.train, args.context, count, rng)
              for _ in range(args.repeats + 1)]
    return rounds, corpus.windows("validation", limit=args.eval_windows)


def comparison_models(args, base, jit):
    """The table's rows, `name -> (model, jit_compile, keras_gelu.xla_fusion or
    CASTS_AROUND)`
    in the order they are interleaved, and the paired step ratios to print,
    `(label, slow row, fast row)`."""
    dims = (args.layers, args.heads, args.width, args.ffn, args.context, 256)
    # name -> (model, jit_compile, keras_gelu.xla_fusion or CASTS_AROUND);
    # interleaved in this order.
    models = {base: (gpt2(*dims), jit, True),
              "kg-train LM, gelu_tanh": (kg_model("gelu_tanh", *dims), jit, True)}
    fused = "kg-train LM, gelu_tanh, fused QKV"
    models[fused] = (fused_qkv(models["kg-train LM, gelu_tanh"][0]), jit, True)
    models["kg-train LM, gelu (exact)"] = (kg_model("gelu", *dims), jit, True)
    models["kg-train LM, relu"] = (kg_model("relu", *dims), jit, True)
    unfused = "kg-train LM, gelu (exact), formula op by op"
    if args.kernels or args.variants:  # issue 20 §3: the GELU kernel's share of the step
        models[unfused] = (kg_model("gelu", *dims), jit, False)
    # issue 20 §2 (b), (c): what else pays, and the initializers made equal.
    pairs = [("GELU (exact) / ReLU", "kg-train LM, gelu (exact)", "kg-train LM, relu"),
             ("GELU (tanh) / ReLU", "kg-train LM, gelu_tanh", "kg-train LM, relu"),
             ("fused QKV / separate Q, K, V (gelu_tanh)", fused, "kg-train LM, gelu_tanh")]
    if args.bf16:  # bfloat16 matmuls (AMX / AVX512-BF16 through oneDNN on TensorFlow)
        from kg_service.training.device import dtype_policy

        # Each copy starts from its float32 row's weights (variables stay
        # float32 under the policy): the loss column then tells precision
        # apart from initialization.
        copies = {base: lambda: gpt2(*dims),
                  "kg-train LM, gelu_tanh": lambda: kg_model("gelu_tanh", *dims),
                  "kg-train LM, gelu (exact)": lambda: kg_model("gelu", *dims),
                  "kg-train LM, relu": lambda: kg_model("relu", *dims)}
        with dtype_policy("mixed_bfloat16"):
            for name, build in copies.items():
                copy = build()
                copy.set_weights(models[name][0].get_weights())
                models[name + ", mixed_bfloat16"] = (copy, jit, True)
            before = "kg-train LM, gelu (exact), mixed_bfloat16, casts around the kernel (before)"
            copy = kg_model("gelu", *dims)
            copy.set_weights(models["kg-train LM, gelu (exact)"][0].get_weights())
            models[before] = (copy, jit, CASTS_AROUND)
            models[fused + ", mixed_bfloat16"] = (
                fused_qkv(models["kg-train LM, gelu_tanh, mixed_bfloat16"][0]), jit, True)
        pairs += [("float32 / mixed_bfloat16 (GPT2Backbone)", base, base + ", mixed_bfloat16"),
                  ("float32 / mixed_bfloat16 (kg-train LM, gelu_tanh)", "kg-train LM, gelu_tanh",
                   "kg-train LM, gelu_tanh, mixed_bfloat16"),
                  ("fused QKV / separate Q, K, V (gelu_tanh, mixed_bfloat16)",
                   fused + ", mixed_bfloat16", "kg-train LM, gelu_tanh, mixed_bfloat16"),
                  ("casts around / inside the kernel (gelu exact, mixed_bfloat16)", before,
                   "kg-train LM, gelu (exact), mixed_bfloat16"),
                  ("GELU (exact, casts around the kernel) / ReLU, both mixed_bfloat16", before,
                   "kg-train LM, relu, mixed_bfloat16"),
                  ("GELU (exact) / ReLU, both mixed_bfloat16",
                   "kg-train LM, gelu (exact), mixed_bfloat16", "kg-train LM, relu, mixed_bfloat16"),
                  ("GELU (tanh) / ReLU, both mixed_bfloat16",
                   "kg-train LM, gelu_tanh, mixed_bfloat16", "kg-train LM, relu, mixed_bfloat16")]
    if args.kernels or args.variants:
        pairs.append(("GELU (exact, formula op by op, no nested XLA kernel) / ReLU",
                      unfused, "kg-train LM, relu"))
    if args.variants:
        init = "kg-train LM, gelu_tanh, N(0, 0.02) init"
        models[init] = (gpt2_initialized(kg_model("gelu_tanh", *dims)), jit, True)
        models[init + ", fused QKV"] = (fused_qkv(models[init][0]), jit, True)
        einsum = "kg-train LM, gelu (exact), einsum attention"
        models[einsum] = (with_attention(models["kg-train LM, gelu (exact)"][0],
                                         EinsumAttention), jit, True)
        pairs += [("einsum attention / ops.dot_product_attention (gelu exact)",
                   einsum, "kg-train LM, gelu (exact)"),
                  ("fused QKV / separate (gelu_tanh, N(0, 0.02) init)",
                   init + ", fused QKV", init),
                  ("GELU (exact) / GELU (tanh)", "kg-train LM, gelu (exact)",
                   "kg-train LM, gelu_tanh")]
        if keras.backend.backend() == "tensorflow" and not args.xla:  # JAX: always XLA
            copies = {base: lambda: gpt2(*dims),
                      "kg-train LM, gelu_tanh": lambda: kg_model("gelu_tanh", *dims),
                      fused: lambda: fused_qkv(kg_model("gelu_tanh", *dims)),
                      "kg-train LM, gelu (exact)": lambda: kg_model("gelu", *dims),
                      "kg-train LM, relu": lambda: kg_model("relu", *dims)}
            for name, build in copies.items():  # the same weights, compiled by XLA
                copy = build()
                copy.set_weights(models[name][0].get_weights())
                models[name + ", XLA"] = (copy, True, True)
            pairs += [(f"XLA / auto ({name})", name + ", XLA", name) for name in copies]
            pairs.append(("GELU (exact) / ReLU, both XLA", "kg-train LM, gelu (exact), XLA",
                          "kg-train LM, relu, XLA"))
    return models, pairs


def versus_gpt2(args):
    """kg-train's LM against GPT2Backbone: tokens/s and the validation loss
    after the same steps on the same windows; see the module docstring."""
    load_at_start = os.getloadavg()[0]
    rounds, (val_x, val_y) = corpus_windows(args)
    jit = True if args.xla else "auto"
    base = "keras-hub GPT2Backbone (gelu tanh)"
    models, pairs = comparison_models(args, base, jit)
    if args.only:  # a few rows, more rounds in the same time (GPT2Backbone stays)
        models = {name: row for name, row in models.items()
                  if name == base or any(part in name for part in args.only.split(","))}
        pairs = [pair for pair in pairs if pair[1] in models and pair[2] in models]
    for name, (model, jit_compile, fusion) in models.items():
        compiled(model, args.steps, jit_compile)
        # The fused kernel is chosen when the step is traced: at this fit.
        with keras_gelu.xla_fusion(fusion is not False), casts_around(fusion == CASTS_AROUND):
            tokens_per_second(model, *rounds[0], args.batch)  # compile and warm up
    rates = {name: [] for name in models}
    for x, y in rounds[1:]:
        for name, (model, _, _) in models.items():
            rates[name].append(tokens_per_second(model, x, y, args.batch))
    median = {name: statistics.median(r) for name, r in rates.items()}
    loss = {name: m.evaluate(val_x, val_y, batch_size=args.batch, verbose=0)
            for name, (m, _, _) in models.items()}
    params = {name: m.count_params() for name, (m, _, _) in models.items()}
    print(f"backend {keras.backend.backend()}; {args.layers} layers x {args.heads} heads, "
          f"width {args.width}, FFN {args.ffn}, context {args.context}, vocabulary 256, "
          f"batch {args.batch}, AdamW, fit, jit_compile {jit}, "
          f"{args.steps} steps per timed run, median of {args.repeats} interleaved runs; "
          f"python_code corpus {args.corpus_bytes:,} bytes, validation loss on "
          f"{len(val_x)} windows after {(args.repeats + 1) * args.steps} steps each; "
          f"load average {load_at_start:.1f} at the start, {os.getloadavg()[0]:.1f} at the end")
    print("| model | parameters | tokens/s | vs GPT2Backbone | validation loss (nats) |")
    print("|---|---|---|---|---|")
    for name in models:
        print(f"| {name} | {params[name]:,} | {median[name]:,.0f} | "
              f"{median[name] / median[base]:.2f}x | {loss[name]:.4f} |")
    print()
    for label, slow, fast in pairs:  # time ratio slow / fast, median of the rounds' pairs
        ratio = statistics.median(f / s for s, f in zip(rates[slow], rates[fast]))
        print(f"{label} training-step time, median of paired runs: {ratio:.3f}x")


if __name__ == "__main__":
    main()
