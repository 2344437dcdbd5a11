"""What a sweep ran with: the `version.<library>` params of its parent run.

Read from the installed metadata where the library is not loaded yet
(importing JAX and torch for a version string is seconds); `kg serve`'s
SavedModel wrapper pins TensorFlow's version from here too.
"""

import importlib.metadata
import importlib.util
import platform
import sys

import numpy as np

from kg_service.tracking import client as mlflow_client


def library_versions():
    """`version.<library>` params: what a sweep ran with."""
    import keras  # Keras at the point of use, as in member_runs.read

    import keras_gelu  # Keras, with the line above

    versions = {
        "python": platform.python_version(),
        "keras": keras.__version__,
        "keras_gelu": keras_gelu.__version__,
        "numpy": np.__version__,
        "mlflow": mlflow_client.import_mlflow().__version__,
    }
    for name, distributions in OTHER_LIBRARIES.items():
        version = installed_version(name, distributions)
        if version:
            versions[name] = version
    return {f"version.{k}": v for k, v in versions.items()}


# The libraries a sweep may also run with, and the distributions that
# install them. Their versions are read from the installed metadata, not
# by importing them: importing JAX and torch only for a version string
# cost every TensorFlow kg-train and `kg report` ~3 CPU s, and TensorFlow
# ~7 CPU s each under the other backends (issue 17).
OTHER_LIBRARIES = {
    "tensorflow": ("tensorflow", "tensorflow-cpu", "tensorflow-intel", "tensorflow-macos",
                   "tf-nightly"),
    "jax": ("jax",),
    "torch": ("torch",),
    "sklearn": ("scikit-learn",),
}  # fmt: skip


def installed_version(name, distributions=None):
    """The version of module `name`: its `__version__` if it is loaded,
    else its distribution's (`distributions`, default OTHER_LIBRARIES'
    or `name`); None if it is not installed."""
    if distributions is None:
        distributions = OTHER_LIBRARIES.get(name, (name,))
    module = sys.modules.get(name)
    if module is not None:
        return getattr(module, "__version__", None)
    for distribution in distributions:
        try:
            return importlib.metadata.version(distribution)
        except importlib.metadata.PackageNotFoundError:
            continue
    if importlib.util.find_spec(name) is None:
        return None
    # Installed under another distribution's name: the slower lookup.
    for distribution in importlib.metadata.packages_distributions().get(name, ()):
        return importlib.metadata.version(distribution)
    return None
