"""A classifier's lines in the sweep report (`Task.data_parts`,
`Task.unused_keys`; `kg_service.analysis.reports.report` writes them in)."""

import numpy as np


def generated_parts(data_cfg, dataset):
    """A generated set: its size and noise, then its splits."""
    parts = [f"{data_cfg.n_samples} samples, noise {data_cfg.noise}"] if data_cfg else []
    return parts + split_parts(data_cfg, dataset)


def split_parts(data_cfg, dataset):
    """The splits' sizes, the features and the classes of a loaded set."""
    if dataset is None:
        return []
    n_classes = getattr(dataset, "n_classes", None) or len(np.unique(dataset.y_train))
    return [f"train/val/test {len(dataset.y_train)}/"
            f"{len(getattr(dataset, 'y_val', []))}/{len(dataset.y_test)}, "
            f"{dataset.input_dim} features, {n_classes} classes"]


def unused_keys(cfg):
    """The common keys a classifier does not read: steps per epoch (one
    pass per epoch), and d_model but for a feedforward block."""
    unused = ("training.steps_per_epoch",)
    if cfg["model"].get("block") != "feedforward":
        unused += ("model.d_model",)
    return unused
