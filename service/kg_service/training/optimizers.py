"""The configured optimizer, from the catalog's name table."""

import keras

from kg_service.config import catalog
from kg_service.errors import ServiceError


def make_optimizer(training_cfg):
    """Returns a new optimizer for `training_cfg` (name, learning rate,
    weight decay if set).

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
    return factory(learning_rate=training_cfg.learning_rate, **options)
