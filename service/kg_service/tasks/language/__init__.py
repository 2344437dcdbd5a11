"""A byte-level language model of the Python standard library's source.

Its corpus, model, layers, training loop and served model are this
folder's `corpus`, `model`, `lm_layers`, `train` and `pyfunc`; its
config keys, `settings`; its memory estimate and smoke sizes, `sizes`; what its registered
model is, `serving`; its report lines, `report`. The
task's callables import them (Keras) when called: registering the tasks
happens whenever the service starts, `kg-train --dry-run` and a config
error included, which must not pay Keras' 5 to 12 seconds.

Modules:
    corpus: the Python-code corpus, built offline from the stdlib.
    entropy: attention entropy per layer ("ReLU's Revival").
    lm_layers: the two layers Keras does not have.
    model: the decoder-only language model.
    probes: what "ReLU's Revival" measures, read off the layers.
    pyfunc: the served model ("models from code").
    report: its lines and tables in the sweep report.
    serving: what a registered language model is, and the layers it loads.
    settings: its own keys: the corpus under `data:`, the transformer under `model:`.
    sizes: its memory estimate and smoke sizes.
    stacked: M language models of one architecture as one model.
    train: training the language model.
"""

from kg_service.tasks.base import Metric
from kg_service.tasks.base import Task
from kg_service.tasks.language import report
from kg_service.tasks.language import serving
from kg_service.tasks.language import settings
from kg_service.tasks.language import sizes

TEST_LOG_PERPLEXITY = Metric(
    "test_loss", higher_is_better=False, label="test log-perplexity (nats per byte)"
)
VAL_LOSS = Metric("val_loss", higher_is_better=False, label="final validation loss")


def _load_corpus(data_cfg):
    from kg_service.tasks.language import corpus  # see the module docstring

    return corpus.load("python_code", data_cfg)


def _build_language_model(model_cfg, activation, dataset, dtype=None, name=None):
    from kg_service.tasks.language import model  # Keras: see the module docstring

    return model.build_language_model(
        model_cfg, activation, dataset, dtype=dtype, name=name
    )


def _train_language_model(task, dataset, config, activation, seeds, report):
    from kg_service.tasks.language import train as language  # Keras: see the module docstring

    return language.train_language_model(task, dataset, config, activation, seeds, report)


def _train_members(task, dataset, config, members, report):
    from kg_service.tasks.language import train as language  # Keras: see the module docstring

    return language.train_members(task, dataset, config, members, report)


def _stack_key(config, activation):
    from kg_service.tasks.language import train as language  # Keras: see the module docstring

    return language.stack_key(config, activation)


PYTHON_CODE = Task(
    name="python_code",
    description="byte-level causal language model of the Python standard "
    "library's source (offline; ReLU's Revival trains on Python code)",
    load=_load_corpus,
    build_model=_build_language_model,
    train=_train_language_model,
    compared=TEST_LOG_PERPLEXITY,
    selects=VAL_LOSS,
    figures=("learning_curves", "per_seed", "attention_entropy", "leaky_slopes"),
    sample_splits=False,
    serving=serving.SERVING,
    layers=serving.layers,
    data_parts=report.data_parts,
    describes_data=True,
    model_line=report.model_line,
    tables=report.tables,
    unused_keys=report.unused_keys,
    # All seeds of an activation train as one stacked model (train.py),
    # with a plain fit, not in a strategy scope.
    data_parallel=False,
    # Activations of one FFN architecture train in one stacked model too.
    train_members=_train_members,
    stack_key=_stack_key,
    data_settings=settings.CorpusData,
    model_settings=settings.TransformerModel,
    check_model=settings.heads_divide,
    metrics=settings.logged_metrics,
    parameters=sizes.parameters,
    data_bytes=sizes.data_bytes,
    smoke=sizes.smoke,
)
