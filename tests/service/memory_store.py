"""An in-memory `TrackingStore`: test-only, and the proof that the
pipeline's tracking seam is real (no MLflow call escapes it). It keeps
things in dicts; the bookkeeping (statuses, member names and tags, which
sweep parent wins, version numbers) is the base class's."""

import copy
import itertools
import json

from kg_service.tracking import store


class MemoryStore(store.TrackingStore):
    """Keeps runs, artifacts and registered versions in dicts."""

    def __init__(self):
        self.runs = {}  # run id -> dict(name, params, tags, metrics, status, parent)
        self.artifacts = {}  # (run id, file) -> content
        self.models = {}  # name -> {version: dict(run_id, tags, description, ...)}
        self.aliases = {}  # (name, alias) -> version
        self.ids = itertools.count(1)

    def create_run(self, run_name, params, tags, parent=None):
        run_id = f"run-{next(self.ids)}"
        self.runs[run_id] = dict(
            name=run_name,
            params={k: store.param_text(v) for k, v in params.items()},  # text, as MLflow
            tags=dict(tags),
            metrics={},
            status=store.RUNNING,
            parent=parent,
        )
        return run_id

    def delete_run(self, run_id):
        del self.runs[run_id]

    def open_sweep(self, run_name, params, tags, resume=None):
        if resume is None:
            return self.create_run(run_name, params, tags)
        self.runs[resume]["tags"].update(tags)
        self.runs[resume]["status"] = store.RUNNING
        return resume

    def close_sweep(self, status):
        self.runs[self.parent_run_id]["status"] = status

    def sweep_parents(self, sweep_id=None):
        return [
            store.SweepParent(run_id, run["tags"].get(store.SWEEP_ID_TAG))
            for run_id, run in self.runs.items()
            if run["tags"].get("kg.role") == store.SWEEP_ROLE
            and sweep_id in (None, run["tags"].get(store.SWEEP_ID_TAG))
        ]

    def sweep_info(self, run_id):
        run = self.runs[run_id]
        return run["name"], run["params"], run["status"]

    def claim(self, run_id, key, value):
        return self.runs[run_id]["params"].setdefault(key, value) == value

    def run_marks(self, run_id):
        run = self.runs[run_id]
        return dict(run["params"]), {k: str(v) for k, v in run["tags"].items()}

    def set_tag(self, run_id, key, value):
        self.runs[run_id]["tags"][key] = str(value)

    def load_dict(self, run_id, artifact_file):
        return copy.deepcopy(self.artifacts[(run_id, artifact_file)])

    def log_dict(self, run_id, data, artifact_file):
        self.artifacts[(run_id, artifact_file)] = json.loads(json.dumps(data))

    def log_member(self, result, params, tags):
        sweep_id = self.runs[self.parent_run_id]["tags"].get(store.SWEEP_ID_TAG)
        run_id = self.create_run(
            store.member_run_name(result),
            store.member_params(result, params),
            store.member_tags(result, tags, sweep_id),
            parent=self.parent_run_id,
        )
        run = self.runs[run_id]
        run["metrics"] = {key: list(values) for key, values in result.history.items()}
        run["metrics"].update({k: [v] for k, v in store.member_finals(result).items()})
        run["result"] = result
        run["status"] = store.member_status(result)
        return run_id

    def finished_members(self, sweep_run_id):
        sweep_id = self.runs[sweep_run_id]["tags"].get(store.SWEEP_ID_TAG)
        return {
            (r["result"].activation, r["result"].seed): (run_id, r["result"])
            for run_id, r in self.runs.items()
            if "result" in r
            and (r["tags"][store.SWEEP_ID_TAG] == sweep_id if sweep_id else r["parent"] == sweep_run_id)
            and r["status"] in store.MEMBER_DONE
        }

    def log_summary(self, metrics, tags, artifact_paths):
        run = self.runs[self.parent_run_id]
        run["metrics"].update({k: [v] for k, v in metrics.items()})
        run["tags"].update(tags)
        for path in artifact_paths:
            self.artifacts[(self.parent_run_id, f"report/{path.name}")] = path.read_bytes()

    def register(
        self, run_id, model, model_name, alias, tags, description,
        pip_requirements, metadata=None, serving=None,
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

    def version_numbers(self, model_name):
        return [int(v) for v in self.models.get(model_name, {})]
