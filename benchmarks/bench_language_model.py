"""Training throughput of kg-train's language model beside keras-hub's GPT-2.

What a Keras user would otherwise pick is keras-hub's `GPT2Backbone`
(built from its constructor: random weights, no download) with its tied
output projection, as `GPT2CausalLM` has it. Both are built at the same
depth, width, heads, FFN width, context and vocabulary, trained with
`fit` on the same random byte windows, same batch, AdamW, in one process;
runs are interleaved (A B C A B C ...) and each model's median tokens/s is
compared, so drift of this shared machine hits every model alike.

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
(validation loss after the last epoch), which must be float rounding:

    KERAS_BACKEND=tensorflow .venv/bin/python benchmarks/bench_language_model.py --sweep
    KERAS_BACKEND=jax .venv/bin/python benchmarks/bench_language_model.py --sweep

`--step` profiles one training step of the stacked model (issue 20 §1):
ms per step of one plain model, of stacked models of M/2 and M members,
and of the M-member model with the per-member matmul written the ways it
was before (`einsum("bm...i,mio->bm...o")`, TensorFlow only) or could be
(a broadcast `x @ kernel[None]`), all interleaved in one process. M
members stacked against M/2 twice is what stacking two activations' seeds
into one model would save at best:

    KERAS_BACKEND=tensorflow .venv/bin/python benchmarks/bench_language_model.py --step

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


def gpt2(layers, heads, width, ffn, context, vocabulary):
    import keras_hub

    backbone = keras_hub.models.GPT2Backbone(
        vocabulary_size=vocabulary, num_layers=layers, num_heads=heads,
        hidden_dim=width, intermediate_dim=ffn, max_sequence_length=context,
        dropout=0.0,
    )
    tokens = keras.Input((None,), dtype="int32", name="token_ids")
    hidden = backbone({"token_ids": tokens, "padding_mask": keras.ops.ones_like(tokens)})
    logits = backbone.token_embedding(hidden, reverse=True)
    return keras.Model(tokens, logits)


def kg_model(activation, layers, heads, width, ffn, context, vocabulary):
    from kg_service.config.schema import ModelConfig
    from kg_service.tasks.language.corpus import Corpus
    from kg_service.tasks.language.model import build_language_model

    empty = np.zeros(0, np.uint8)
    corpus = Corpus("bench", empty, empty, empty, (0, 0, 0), "", "", context, vocabulary)
    cfg = ModelConfig(hidden_units=(ffn,) * layers, d_model=width, heads=heads)
    return build_language_model(cfg, activation, corpus)


def compiled(model, steps, jit_compile):
    model.compile(
        optimizer=keras.optimizers.AdamW(1e-3),
        loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True),
        steps_per_execution=steps,
        jit_compile=jit_compile,
    )
    return model


def tokens_per_second(model, x, y, batch):
    start = time.perf_counter()
    model.fit(x, y, batch_size=batch, epochs=1, shuffle=False, verbose=0)
    return x.size / (time.perf_counter() - start)


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
    ways = {"stacked": language.train_language_model, "one by one": language.train_one_by_one}

    def run(way, seeds):
        start = time.perf_counter()
        results = ways[way](task, corpus, config, args.activation, seeds, lambda e, v: None)
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
    stacked, alone = (statistics.median(seconds[w]) for w in ways)
    m = config.model
    print(f"backend {keras.backend.backend()}; {args.config} model ({len(m.hidden_units)} "
          f"blocks, d_model {m.d_model}, FFN {list(m.hidden_units)}, {m.heads} heads, context "
          f"{config.data.context}), {args.activation}, {args.members} seeds, {args.epochs} "
          f"epochs x {args.steps} steps x batch {config.training.batch_size}, corpus "
          f"{args.corpus_bytes:,} bytes; load average {os.getloadavg()[0]:.1f}")
    print("| training of the seeds | seconds per round | median | vs one by one |")
    print("|---|---|---|---|")
    for way, median in (("one by one", alone), ("stacked", stacked)):
        rounds = ", ".join(f"{s:.1f}" for s in seconds[way])
        print(f"| {way} | {rounds} | {median:.1f} | {alone / median:.2f}x faster |")
    gap = np.abs(finals["stacked"] - finals["one by one"]).max()
    print(f"\nlast validation loss, stacked vs one by one, largest member difference: "
          f"{gap:.2e} nats (values {np.round(finals['stacked'], 4).tolist()})")


def step_profile(args):
    """One stacked training step against plain ones; see the docstring."""
    from keras import ops

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


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sweep", action="store_true",
                        help="time a stacked sweep of one activation's seeds against one by one")
    parser.add_argument("--step", action="store_true",
                        help="profile one stacked training step against plain ones")
    parser.add_argument("--config", default="configs/glu-variants.yaml", help="--sweep: its model")
    parser.add_argument("--activation", default="gelu", help="--sweep: the activation")
    parser.add_argument("--members", type=int, default=8, help="--sweep: seeds")
    parser.add_argument("--epochs", type=int, default=2, help="--sweep: epochs")
    parser.add_argument("--corpus-bytes", type=int, default=300_000, help="--sweep: corpus")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--width", type=int, default=128)
    parser.add_argument("--ffn", type=int, default=512)
    parser.add_argument("--context", type=int, default=128)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--steps", type=int, default=10, help="steps per timed fit (--sweep: per epoch)")
    parser.add_argument("--repeats", type=int, default=None,
                        help="interleaved rounds (default 5; --sweep: 2)")
    parser.add_argument("--kernels", action="store_true",
                        help="add the exact-GELU model traced with keras_gelu.xla_fusion(False)")
    parser.add_argument("--xla", action="store_true",
                        help="jit_compile=True (what device.xla sets; 'auto' is off on CPU)")
    args = parser.parse_args()
    if args.sweep:
        args.repeats = args.repeats or 2
        return sweep(args)
    if args.step:
        args.repeats = args.repeats or 3
        return step_profile(args)
    args.repeats = args.repeats or 5
    dims = (args.layers, args.heads, args.width, args.ffn, args.context, 256)
    rng = np.random.default_rng(0)
    data = rng.integers(0, 256, size=(args.steps * args.batch, args.context + 1), dtype=np.int32)
    x, y = data[:, :-1], data[:, 1:]
    models = {
        "keras-hub GPT2Backbone (gelu tanh)": gpt2(*dims),
        "kg-train LM, gelu_tanh": kg_model("gelu_tanh", *dims),
        "kg-train LM, gelu (exact)": kg_model("gelu", *dims),
        "kg-train LM, relu": kg_model("relu", *dims),
    }
    unfused = "kg-train LM, gelu (exact), formula op by op"
    if args.kernels:  # issue 20 §3: the GELU kernel's share of the step
        models[unfused] = kg_model("gelu", *dims)
    for name, model in models.items():
        compiled(model, args.steps, True if args.xla else "auto")
        # The fused kernel is chosen when the step is traced: at this fit.
        with keras_gelu.xla_fusion(name != unfused):
            tokens_per_second(model, x, y, args.batch)  # compile and warm up
    rates = {name: [] for name in models}
    for _ in range(args.repeats):
        for name, model in models.items():
            rates[name].append(tokens_per_second(model, x, y, args.batch))
    median = {name: statistics.median(r) for name, r in rates.items()}
    base = median["keras-hub GPT2Backbone (gelu tanh)"]
    params = {name: m.count_params() for name, m in models.items()}
    print(f"backend {keras.backend.backend()}; {args.layers} layers x {args.heads} heads, "
          f"width {args.width}, FFN {args.ffn}, context {args.context}, vocabulary 256, "
          f"batch {args.batch}, AdamW, fit, jit_compile {'True' if args.xla else 'auto'}, "
          f"{args.steps} steps per timed run, median of "
          f"{args.repeats} interleaved runs")
    print("| model | parameters | tokens/s | vs GPT2Backbone |")
    print("|---|---|---|---|")
    for name in models:
        print(f"| {name} | {params[name]:,} | {median[name]:,.0f} | {median[name] / base:.2f}x |")
    step_ratio = [r / g for g, r in zip(rates["kg-train LM, gelu (exact)"],
                                        rates["kg-train LM, relu"])]
    print(f"\nGELU (exact) / ReLU training-step time, median of paired runs: "
          f"{statistics.median(step_ratio):.3f}x")
    tanh_ratio = [r / g for g, r in zip(rates["kg-train LM, gelu_tanh"], rates["kg-train LM, relu"])]
    print(f"GELU (tanh) / ReLU training-step time, median of paired runs: "
          f"{statistics.median(tanh_ratio):.3f}x")
    if args.kernels:
        ratio = [r / g for g, r in zip(rates[unfused], rates["kg-train LM, relu"])]
        print(f"GELU (exact, formula op by op, no nested XLA kernel) / ReLU training-step "
              f"time, median of paired runs: {statistics.median(ratio):.3f}x")


if __name__ == "__main__":
    main()
