"""The model registry: registered models, their versions and aliases.

`ModelRegistry` is a sweep's (through `mlflow_store.Tracker`, retried);
`registered_versions` is what `kg models` lists.
"""

import dataclasses
import datetime

from mlflow.exceptions import MlflowException

from kg_service.errors import ServiceError
from kg_service.tracking import client as mlflow_client
from kg_service.tracking import destinations
from kg_service.tracking.store import tag_strings


class ModelRegistry:
    """One MLflow registry, each operation run through `retried`.

    Args:
        client: an `mlflow.MlflowClient` whose registry URI is set.
        retried: `retried(doing, operation)`, a `retry.Retrier`.
    """

    def __init__(self, client, retried):
        self.client = client
        self.retried = retried

    def register(self, run_id, model_name, alias, log_model, tags, description):
        """Logs a model in `run_id` (`log_model()`, returning MLflow's
        `ModelInfo`), registers it as a new version of `model_name` and
        moves `alias` to it.

        Retried as one operation: a try that failed after its version was
        created (its answer lost) finds that version and does not make a
        second one.

        Returns:
            The new model version (an int, as a string per MLflow).
        """
        known = self.retried(
            f"reading the versions of {model_name!r}",
            lambda: self.versions_of(model_name, run_id),
        )
        first_try = True

        def register():
            nonlocal first_try
            made = () if first_try else self.versions_of(model_name, run_id) - known
            first_try = False
            if made:
                version = str(max(made))
            else:
                version = self.create_version(model_name, run_id, log_model(), tags, description)
            self.client.set_registered_model_alias(model_name, alias, version)
            return version

        return self.retried(f"registering {model_name!r}", register)

    def create_version(self, model_name, run_id, info, tags, description):
        """A new version of `model_name` (created if new) for the logged
        model `info`; returns its number."""
        try:
            self.client.get_registered_model(model_name)
        except MlflowException:
            self.client.create_registered_model(model_name)
        version = self.client.create_model_version(
            model_name,
            info.model_uri,
            run_id=run_id,
            tags=tag_strings(tags),
            description=description,
            model_id=info.model_id,
        )
        return version.version

    def versions_of(self, model_name, run_id):
        """The version numbers of `model_name` registered from `run_id`."""
        return {
            int(v.version)
            for v in self.client.search_model_versions(
                f"name='{model_name}' and run_id='{run_id}'"
            )
        }

    def version_numbers(self, model_name):
        versions = self.retried(
            f"reading the versions of {model_name!r}",
            lambda: self.client.search_model_versions(f"name='{model_name}'"),
        )
        return [int(v.version) for v in versions]

    def set_version_tag(self, model_name, version, key, value):
        self.retried(
            f"tagging {model_name!r} version {version}",
            lambda: self.client.set_model_version_tag(model_name, version, key, str(value)),
        )


@dataclasses.dataclass(frozen=True)
class RegisteredVersion:
    """One registered model version, as `kg models` lists it."""

    name: str
    version: int
    aliases: tuple
    activation: str = None
    seed: int = None
    dataset: str = None
    val_accuracy: float = None
    test_accuracy: float = None
    saved_model: str = None
    run_id: str = None
    created: str = None  # ISO 8601, UTC
    description: str = None


def registered_versions(tracking_uri, names=()):
    """Every version of the registered models (or of `names`), newest first,
    with what kg-train's register stage tagged them with.

    Raises:
        ServiceError: if the store cannot be read, or a name is unknown.
    """
    mlflow = mlflow_client.import_mlflow()
    destinations.check_store(tracking_uri, must_exist=True)
    try:
        # check_store saw the server answer: no retries, MLflow's own timeout
        # (a basic-auth server's first answers take seconds: password hashing).
        with mlflow_client.environ_defaults(MLFLOW_HTTP_REQUEST_MAX_RETRIES="0"):
            client = mlflow.MlflowClient(tracking_uri, registry_uri=tracking_uri)
            known = sorted(m.name for m in client.search_registered_models(max_results=1000))
            for name in names:
                if name not in known:
                    raise ServiceError(
                        f"no registered model {name!r} in {tracking_uri}; it holds "
                        f"{', '.join(known) or 'none'}.{mlflow_client.did_you_mean(name, known)}"
                    )
            found = []
            for name in names or known:
                # search_model_versions leaves aliases out; the model has them.
                aliases = client.get_registered_model(name).aliases or {}
                for v in client.search_model_versions(f"name='{name}'"):
                    held = tuple(sorted(a for a, n in aliases.items() if str(n) == str(v.version)))
                    found.append(_registered_version(v, held))
    except ServiceError:
        raise
    except Exception as error:
        raise ServiceError(mlflow_client.store_problem(tracking_uri, error)) from None
    return sorted(found, key=lambda v: (v.name, -v.version))


def _registered_version(v, aliases):
    tags = v.tags or {}

    def number(key, kind=float):
        try:
            return kind(tags[key])
        except (KeyError, ValueError):
            return None

    return RegisteredVersion(
        name=v.name,
        version=int(v.version),
        aliases=aliases,
        activation=tags.get("activation"),
        seed=number("seed", int),
        dataset=tags.get("dataset"),
        val_accuracy=number("val_accuracy"),
        test_accuracy=number("test_accuracy"),
        saved_model=tags.get("saved_model"),
        run_id=v.run_id,
        created=datetime.datetime.fromtimestamp(
            v.creation_timestamp / 1000, datetime.timezone.utc
        ).isoformat(timespec="seconds"),
        description=v.description or None,
    )
