"""The configured optimizer, from the catalog's name table."""

import keras

from kg_service.config import catalog
from kg_service.errors import ServiceError

# Variables weight decay never acts on: the learnable leaky ReLU's slope
# (keras_gelu's LearnableLeakyReLU and its stacked form name it "slope").
# Decoupled decay pulls a parameter towards 0; on the slope that is a bias
# towards plain ReLU, which is the very thing "ReLU's Revival" asks the
# slope to find by itself (issue 19, item 4). Matched by `re.search` on
# the variable's name, as Keras's `exclude_from_weight_decay(var_names=)`.
NO_DECAY_NAMES = ("slope",)


def make_optimizer(training_cfg):
    """Returns a new optimizer for `training_cfg` (name, learning rate,
    weight decay if set; variables named in `NO_DECAY_NAMES` excluded
    from the decay).

    Raises:
        ServiceError: for an unknown optimizer name.
    """
    class_name = catalog.OPTIMIZERS.get(training_cfg.optimizer)
    if class_name is None:
        raise ServiceError(
            f"training.optimizer: unknown optimizer {training_cfg.optimizer!r}; "
            f"expected one of {', '.join(sorted(catalog.OPTIMIZERS))}."
        )
    factory = getattr(keras.optimizers, class_name)
    options = {}
    if training_cfg.weight_decay is not None:
        options["weight_decay"] = training_cfg.weight_decay
    optimizer = factory(learning_rate=training_cfg.learning_rate, **options)
    if optimizer.weight_decay:  # set, or the optimizer's default (AdamW's 0.004)
        optimizer.exclude_from_weight_decay(var_names=list(NO_DECAY_NAMES))
    return optimizer
