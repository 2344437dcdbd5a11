"""Activations x seeds in one stacked model (issues 17 and 20).

Members of different activations whose language models share one
architecture (ReLU, GELU, Swish FFNs; the gated units at one width) train
as one stacked model, member m with its own activation: each member must
still be the member trained alone, as strictly as
`test_language.py::test_stacked_seeds_train_as_each_seed_alone...` asks
of seeds. And `train_sweep` hands such activations to
`task.train_members` together, everything else to `task.train`, with
the per-activation bookkeeping unchanged.
"""

import dataclasses
import types

import keras
import numpy as np
import pytest

from kg_service.config.schema import Config
from kg_service.config.schema import DataConfig
from kg_service.config.schema import ModelConfig
from kg_service.config.schema import TrainingConfig
from kg_service.tasks import base as tasks
from kg_service.training import loop
from tests.service.tasks.lm_members import assert_trained_as_alone

# One block: every check here holds at any depth, and each trace costs
# CPU seconds per block (issue 17).
SMALL_MODEL = ModelConfig(hidden_units=(24,), d_model=16, heads=2)
DATA = DataConfig(
    dataset="python_code", corpus_bytes=40_000, context=16, eval_windows=8,
    test_fraction=0.1, validation_fraction=0.1,
)


@pytest.fixture(scope="module")
def corpus():
    return tasks.get("python_code").load(DATA)


# --- The model: member m computes its own activation's plain model. ----------


def test_a_mixed_gated_stack_computes_each_member_as_its_plain_model(corpus):
    from keras_gelu.stacking import stack_weights
    from kg_service.tasks.language import model as language_model
    from kg_service.tasks.language.stacked import stack_language_model

    gated = dataclasses.replace(SMALL_MODEL, match_params=True)
    names = ("glu", "bilinear", "swiglu", "swiglu")  # a run of two: one call for both
    plain = []
    for seed, name in enumerate(names):
        keras.utils.set_random_seed(seed)
        plain.append(language_model.build_language_model(gated, name, corpus))
    stacked = stack_language_model(plain, len(names))
    stack_weights(stacked, plain)
    x = np.stack([corpus.windows("validation", limit=4)[0]] * len(names), axis=1)
    x[:, 1] = x[:, 1, ::-1]  # members see different windows
    # Eager calls: the same layers' math, without tracing five models.
    logits = keras.ops.convert_to_numpy(stacked(x, training=False))
    for m, model in enumerate(plain):
        np.testing.assert_allclose(logits[:, m],
                                   keras.ops.convert_to_numpy(model(x[:, m], training=False)),
                                   rtol=1e-5, atol=1e-5, err_msg=names[m])
    # A plain FFN and a gated one are two architectures: refused, not mixed up.
    keras.utils.set_random_seed(0)
    relu = language_model.build_language_model(gated, "relu", corpus)
    with pytest.raises(ValueError, match="differ in more than their activation"):
        stack_language_model([relu, plain[0]], 2)


def test_the_language_task_groups_activations_by_ffn_architecture():
    task = tasks.get("python_code")
    config = Config(activations=("relu", "glu", "learnable_leaky_relu", "gelu", "swiglu",
                                 "swish", "geglu"), baseline="relu", seeds=(0,), data=DATA)
    assert loop.activation_groups(task, config) == [
        ("relu", "gelu", "swish"), ("glu", "swiglu", "geglu"), ("learnable_leaky_relu",)]


# --- Training: each member of a mixed stack is the member trained alone. -------


def test_each_member_of_a_mixed_activation_stack_trains_as_it_would_alone(corpus, monkeypatch):
    from kg_service.tasks.language import train as language

    # Fused activation kernels, as a long run trains them (a run this
    # short trains unfused: `language.fusion_for`).
    monkeypatch.setattr(language, "FUSION_MIN_STEPS", 0)
    config = Config(
        activations=("relu", "gelu", "swish"), baseline="relu", seeds=(0, 1),
        data=DATA, model=SMALL_MODEL,
        training=TrainingConfig(epochs=2, steps_per_epoch=4, batch_size=8, learning_rate=1e-2),
    )
    task = tasks.get("python_code")
    members = (("relu", 0), ("gelu", 1), ("swish", 1))
    epochs = []
    stacked = task.train_members(task, corpus, config, members,
                                 lambda e, v: epochs.append((e, len(v))))
    (alone,) = language.train_one_by_one(task, corpus, config, "gelu", (1,), lambda e, v: None)
    assert epochs == [(1, 3), (2, 3)]
    assert [(r.activation, r.seed) for r in stacked] == list(members)
    result = stacked[1]
    h = result.history
    assert_trained_as_alone(result, alone)
    assert result.final["test_perplexity"] == pytest.approx(alone.final["test_perplexity"],
                                                            rel=1e-4)
    assert result.model.name == "gelu_seed1"
    # Swish seed 1 starts from gelu seed 1's weights and sees its windows:
    # only its activation differs, and so does its training.
    assert stacked[2].history["loss"] != h["loss"]
    assert h["val_loss"][-1] < h["val_loss"][0]
    assert all(r.ok for r in stacked)


# --- The loop: which members go to which entry point. --------------------------


def _toy_task(calls, stack_key):
    def train(task, dataset, config, activation, seeds, report):
        calls.append(("train", activation, tuple(seeds)))
        report(1, np.ones(len(seeds)))
        return [types.SimpleNamespace(activation=activation, seed=s) for s in seeds]

    def train_members(task, dataset, config, members, report):
        calls.append(("members", tuple(members)))
        report(1, np.ones(len(members)))
        return [types.SimpleNamespace(activation=a, seed=s) for a, s in members]

    return tasks.Task(
        name="toy", description="", load=None, build_model=None, train=train,
        compared=None, selects=None, figures=(), train_members=train_members,
        stack_key=stack_key,
    )


def test_train_sweep_trains_a_group_in_one_call_and_keeps_the_per_activation_bookkeeping():
    calls, logged, events = [], [], []
    kinds = {"relu": "plain", "gelu": "plain", "glu": "gated", "swiglu": "gated"}
    task = _toy_task(calls, lambda config, activation: kinds.get(activation))
    config = Config(activations=("relu", "glu", "learnable_leaky_relu", "gelu", "swiglu"),
                    baseline="relu", seeds=(0, 1),
                    data=DataConfig(dataset="moons"))
    held = types.SimpleNamespace(activation="relu", seed=0)
    done = {("relu", 0): held, ("swiglu", 0): "x", ("swiglu", 1): "y"}
    results = loop.train_sweep(task, None, config, progress=events.append, done=done,
                               on_trained=logged.append)
    assert calls == [
        ("members", (("relu", 1), ("gelu", 0), ("gelu", 1))),
        # The group's only missing activation: its own path, as before.
        ("train", "glu", (0, 1)),
        ("train", "learnable_leaky_relu", (0, 1)),
    ]
    assert [len(batch) for batch in logged] == [3, 2, 2]
    # Config order, whatever the training order; held members as they were.
    assert results[0] is held
    assert (results[1].activation, results[1].seed) == ("relu", 1)
    assert [(r.activation, r.seed) for r in results[2:6]] == [
        ("glu", 0), ("glu", 1), ("learnable_leaky_relu", 0), ("learnable_leaky_relu", 1)]
    assert [(r.activation, r.seed) for r in results[6:8]] == [("gelu", 0), ("gelu", 1)]
    assert results[8:] == ["x", "y"]
    # Each event names the activations training now: a resumed group's
    # missing ones ("glu": swiglu's seeds were done).
    assert [(e["activation"], e["members_done"], e["group_size"]) for e in events] == [
        ("relu+gelu", 1, 3), ("glu", 6, 2), ("learnable_leaky_relu", 8, 2)]


def test_a_tuned_sweep_trains_each_activation_alone():
    # A tuning block gives each activation its own learning rate: one
    # optimizer for a stack would not be each member's.
    calls = []
    task = _toy_task(calls, lambda config, activation: "plain")
    config = Config(activations=("relu", "gelu"), baseline="relu", seeds=(0,),
                    data=DataConfig(dataset="moons"))
    tuned = types.SimpleNamespace(**{**vars(config), "tuning": object()})
    assert loop.activation_groups(task, tuned) == [("relu",), ("gelu",)]
    loop.train_sweep(task, None, tuned)
    assert calls == [("train", "relu", (0,)), ("train", "gelu", (0,))]
