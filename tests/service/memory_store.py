"""An in-memory `TrackingStore`: test-only, and the proof that the
pipeline's tracking seam is real (no MLflow call escapes it)."""

import contextlib
import copy
import itertools
import json

from kg_service.tracking.mlflow_store import TrackingStore
from kg_service.tracking.mlflow_store import param_text


class MemoryStore(TrackingStore):
    """Keeps runs, artifacts and registered versions in dicts."""

    def __init__(self):
        self.runs = {}  # run id -> dict(name, params, tags, metrics, status, parent)
        self.artifacts = {}  # (run id, file) -> content
        self.models = {}  # name -> {version: dict(run_id, tags, description, ...)}
        self.aliases = {}  # (name, alias) -> version
        self._ids = itertools.count(1)
        self.parent_run_id = None

    def _new_run(self, name, params, tags, parent=None):
        run_id = f"run-{next(self._ids)}"
        self.runs[run_id] = dict(
            name=name,
            params={k: param_text(v) for k, v in params.items()},  # text, as MLflow
            tags=dict(tags),
            metrics={},
            status="RUNNING",
            parent=parent,
        )
        return run_id

    @contextlib.contextmanager
    def sweep_run(self, run_name, params, tags, resume=None):
        if resume is None:
            self.parent_run_id = self._new_run(run_name, params, tags)
        else:
            self.parent_run_id = resume
            self.runs[resume]["tags"].update(tags)
        self.runs[self.parent_run_id]["status"] = "RUNNING"
        status = "FAILED"
        try:
            yield self.parent_run_id
            status = "FINISHED"
        except KeyboardInterrupt:
            status = "KILLED"
            raise
        finally:
            self.runs[self.parent_run_id]["status"] = status

    def join_sweep(self, run_name, params, tags, sweep_id):
        found = self.find_sweeps(sweep_id)
        created = not found
        if created:
            found = [self._new_run(run_name, params, {**tags, "kg.sweep_id": sweep_id})]
        self.parent_run_id = found[-1]
        return self.parent_run_id, created

    def find_sweeps(self, sweep_id=None):
        return [
            run_id
            for run_id, run in reversed(self.runs.items())
            if run["tags"].get("kg.role") == "sweep"
            and sweep_id in (None, run_id, run["tags"].get("kg.sweep_id"))
        ]

    def member_keys(self, sweep_run_id):
        return {key: run_id for key, (run_id, _) in self.finished_members(sweep_run_id).items()}

    def claim(self, run_id, key, value):
        return self.runs[run_id]["params"].setdefault(key, value) == value

    def load_dict(self, run_id, artifact_file):
        return copy.deepcopy(self.artifacts[(run_id, artifact_file)])

    def log_dict(self, run_id, data, artifact_file):
        self.artifacts[(run_id, artifact_file)] = json.loads(json.dumps(data))

    def log_member(self, result, params, tags):
        run_id = self._new_run(
            f"{result.activation}-seed{result.seed}",
            {**params, "activation": result.activation, "seed": result.seed},
            {
                **tags,
                "activation": result.activation,
                "seed": result.seed,
                "kg.sweep_id": self.runs[self.parent_run_id]["tags"].get("kg.sweep_id"),
            },
            parent=self.parent_run_id,
        )
        run = self.runs[run_id]
        run["metrics"] = {key: list(values) for key, values in result.history.items()}
        run["metrics"]["test_accuracy"] = [result.test_accuracy]
        run["metrics"]["test_loss"] = [result.test_loss]
        run["result"] = result
        run["status"] = "FINISHED" if result.ok else "FAILED"
        return run_id

    def sweep_info(self, run_id):
        run = self.runs[run_id]
        return run["name"], run["params"], run["status"]

    def finished_members(self, sweep_run_id):
        sweep_id = self.runs[sweep_run_id]["tags"].get("kg.sweep_id")
        return {
            (r["result"].activation, r["result"].seed): (run_id, r["result"])
            for run_id, r in self.runs.items()
            if "result" in r
            and (r["tags"]["kg.sweep_id"] == sweep_id if sweep_id else r["parent"] == sweep_run_id)
            and r["status"] in ("FINISHED", "FAILED")
        }

    def log_summary(self, metrics, tags, artifact_paths):
        run = self.runs[self.parent_run_id]
        run["metrics"].update({k: [v] for k, v in metrics.items()})
        run["tags"].update(tags)
        for path in artifact_paths:
            self.artifacts[(self.parent_run_id, f"report/{path.name}")] = path.read_bytes()

    def register(
        self, run_id, model, model_name, alias, tags, description,
        pip_requirements, metadata=None, serving="classifier",
    ):
        version = str(self.next_version(model_name))
        self.models.setdefault(model_name, {})[version] = dict(
            run_id=run_id,
            model=model,
            tags=dict(tags),
            description=description,
            metadata=metadata,
            serving=serving,
        )
        self.aliases[(model_name, alias)] = version
        return version

    def set_version_tag(self, model_name, version, key, value):
        self.models[model_name][version]["tags"][key] = value

    def next_version(self, model_name):
        return 1 + max((int(v) for v in self.models.get(model_name, {})), default=0)
