"""Markers for the whole suite, applied here in one table (issue 17).

- `slow`: trains a sweep, or starts real processes (kg-train, servers,
  pip, fresh interpreters) that take seconds each. `pytest -m "not slow"`
  is the developer's quick loop; `bash .ci/run` runs everything.
- `server`: starts `mlflow server`, `kg serve` / `mlflow models serve`,
  or PostgreSQL.

A key names a whole module (its path under tests/) or one test
(`path::test_name`, every parameter of it). Add a line here when a test
starts to train or to start a process; the test module stays as it is.

Under `pytest -n 2 --dist loadgroup` (what .ci/run uses) a module's tests
stay on one worker, so a module-scoped fixture (a trained sweep, a server)
is built once, as without xdist; the two modules that build the project in
the repository itself share one group, so they never build at once; the
modules in PER_TEST (no module-scoped fixture, a few long tests) give each
test its own group, so their long tests spread over both workers. The
groups are made here from the test ids (`xdist_group_of`, a scheduler of
our own): pytest-xdist 3.8 puts an `xdist_group` mark's name into the test
id through an attribute pytest 9 no longer reads, so with pytest 9 each
test went to either worker and a module-scoped fixture was built on both
(measured, issue 17). Each item still gets its `xdist_group` mark.
Groups that hold a slow test are handed out first, the most slow tests
first; the quick ones last, so that the two workers finish together.
"""

import collections
import os

import pytest

TESTS = "tests/"

SLOW = [
    # The `saved` fixture loads the models in a fresh process per backend.
    "keras_gelu/test_serialization.py::test_keras_file_loads_",
    "keras_gelu/test_serialization.py::test_loaded_outputs_are_not_trivially_equal",
    "keras_gelu/test_serialization.py::test_name_table_file_loads_alone_without_keras",
    "keras_gelu/test_serialization.py::test_saved_model_loads_after_import_keras_gelu_in_either_order",
    "service/analysis/test_report.py::test_a_fixed_sweep_reads_as_pinned_in_the_golden_files",
    "service/analysis/test_report.py::test_kg_report_prints_no_optimizer_loading_warning",
    "service/analysis/test_report.py::test_kg_report_shows_the_configuration_the_sweep_ran",
    "service/analysis/test_report.py::test_kg_plan_plans_the_stored_sweep_as_the_planner_does",
    "service/analysis/test_report.py::test_a_real_sweeps_report_has_mcnemar_and_curves_and_the_",
    "service/cli/test_cli.py::test_process_",
    "service/cli/test_cli.py::test_alias_bomb_under_a_known_key_exits_2_with_an_excerpt",
    "service/cli/test_cli.py::test_installed_entry_point_exits_2_on_a_bad_config",
    "service/cli/test_preflight.py::test_kg_train_exits_2_with_one_paragraph_and_writes_nothing",
    "service/cli/test_run_output.py",
    "service/cli/test_results.py::test_the_page_is_rendered_from_the_store_",  # a tiny sweep
    "service/cli/test_telemetry.py::test_kg_train_verbose_run_never_contacts_mlflow_telemetry",
    "service/serving/test_kg.py",
    "service/serving/test_saved_model_cli.py",
    "service/serving/test_serving.py",
    "service/sweep/test_end_to_end.py",
    "service/sweep/test_faults.py",
    "service/sweep/test_golden.py",
    "service/sweep/test_scaling_docs.py::test_indexed_job_pods_run_their_shard_through_the_real_cli",
    "service/sweep/test_sequential_sweep.py::test_a_sweep_whose_first_look_decides_stops_there",
    "service/sweep/test_sequential_sweep.py::test_an_interrupted_sequential_sweep_resumes_",
    # Issue 19: a tuned tiny sweep, interrupted and resumed.
    "service/sweep/test_tuning.py::test_a_tuned_sweep_resumes_without_retraining_its_tuning_",
    # Issue 19: the same tuned sweep in 3 shards, in turn and at once (2 processes).
    "service/sweep/test_tuning.py::test_tuned_shards_in_turn_and_at_once_",
    "service/sweep/test_scaling_docs.py::test_sbatch_script_is_bash_with_an_array_and_runs_its_shard",
    "service/sweep/test_shards.py::test_two_shards_make_the_single_machine_sweep_registered_once",
    # Two tiny sweeps in-process (one module fixture), then kg report --study.
    "service/sweep/test_studies.py",
    "service/sweep/test_shards.py::test_shards_and_kg_report_run_on_another_tracking_store",
    "service/tasks/test_language.py::test_sweep_tracks_entropy",
    "service/tasks/test_language.py::test_saved_model_takes_token_ids",
    "service/tasks/test_language.py::test_registered_model_continues_a_prompt",
    "service/tasks/test_language.py::test_served_model_answers_a_prompt_string",
    "service/tasks/test_language.py::test_stacked_seeds_train_as_each_seed_alone",
    "service/tasks/test_lm_layers.py::test_fused_self_attention_trains_as_keras",  # one SGD step
    # One JAX process: a classification sweep and the LM under bfloat16 + XLA.
    "service/tasks/test_jax_backend.py",
    "service/tasks/test_mixed_stacking.py::test_each_member_of_a_mixed_activation_stack_trains_",
    "service/tasks/test_tasks.py::test_a_task_defined_in_a_test_runs_a_whole_sweep",
    "service/tasks/test_tasks.py::test_a_sweep_runs_on_another_tracking_store_without_mlflow",
    "service/tasks/test_train.py::test_mixed_precision_xla_and_dropout_train_and_restore_the_policy",
    "service/tasks/test_train.py::test_a_short_run_takes_one_step_per_call_and_its_members_still_",
    # Issue 20: a mixed-activation stack's 8 members against each trained alone.
    "service/tasks/test_train.py::test_each_member_of_a_mixed_activation_stack_equals_",
    "service/stack/test_stack.py",  # compose's stack as processes, one test (issue 21)
    "service/test_ci.py",
    "service/test_docker.py::test_without_allowed_hosts_the_preflight",
    "service/test_packaging.py",
    "service/test_smoke_configs.py",
    "service/tracking/test_shared_server.py",
    "service/tracking/test_store_outage.py",
    "service/training/test_parallel.py::test_mirrored_over_two_cpu_devices",
    "service/training/test_parallel.py::test_jax_data_parallel_over_two_host_devices",
    "service/training/test_parallel.py::test_batches_the_engine_cannot_split_are_refused_before_training",
    "service/training/test_parallel.py::test_multi_worker_trains_in_two_processes",
    "service/test_xdist_groups.py",  # a pytest -n 2 of its own
    # Issue 33: a 2-node Ray cluster and an MLflow server in a namespace, six sweeps.
    "service/execution/test_ray_cluster.py",
]

SERVER = [
    "service/serving/test_kg.py::test_kg_serve_with_a_token_file_requires_the_bearer_token",
    "service/serving/test_kg.py::test_kg_serve_of_a_savedmodel_with_workers_stops_its_whole_process_group",
    "service/sweep/test_end_to_end.py::test_served_model_",
    "service/sweep/test_end_to_end.py::test_sweep_under_jax_against_postgres_backed_mlflow_server",
    "service/stack/test_stack.py",
    "service/tasks/test_language.py::test_served_model_answers_a_prompt_string",
    "service/test_docker.py::test_without_allowed_hosts_the_preflight",
    "service/tracking/test_shared_server.py",
    "service/tracking/test_store_outage.py",
]

# Fixtures that start a server: every test that uses one is `server`.
SERVER_FIXTURES = {"stack_server", "server"}  # test_docker's, serving/test_kg's

# Built in the repository's own folder (build/, *.egg-info): one at a time.
REPOSITORY_BUILDS = {"tests/service/test_ci.py", "tests/service/test_packaging.py"}

# No module-scoped fixture and a few long tests (each trains its own sweep
# or starts its own server): one xdist group per test.
PER_TEST = {
    "tests/service/test_smoke_configs.py",
    "tests/service/sweep/test_faults.py",
    # One test, the longest of the suite (the whole compose stack): handed
    # out first, not after the modules with more slow tests.
    "tests/service/stack/test_stack.py",
}


def _matches(nodeid, keys):
    """Whether `nodeid` is a module in `keys`, or a test whose name starts
    with a `module::name` key."""
    return any(nodeid.startswith(TESTS + key) for key in keys)


def xdist_group_of(nodeid):
    """The xdist group of a test, from its id alone (all the scheduler sees)."""
    module = nodeid.split("::", 1)[0]
    if module in REPOSITORY_BUILDS:
        return "repository-builds"
    return nodeid if module in PER_TEST else module


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items):
    for item in items:
        server = _matches(item.nodeid, SERVER) or bool(
            SERVER_FIXTURES.intersection(getattr(item, "fixturenames", ()))
        )
        if server:
            item.add_marker(pytest.mark.server)
        if server or _matches(item.nodeid, SLOW):  # a server takes seconds to start
            item.add_marker(pytest.mark.slow)
        item.add_marker(pytest.mark.xdist_group(xdist_group_of(item.nodeid)))
    if os.environ.get("PYTEST_XDIST_WORKER"):  # the order the scheduler hands groups out
        items[:] = _slow_groups_first(items)


def _slow_groups_first(items):
    """`items`, each group kept together and in order: first the slow tests
    that are groups of their own (PER_TEST), then the groups with the most
    slow tests, the groups without one last. A worker takes its next group
    while it still has two tests to run, so a long group handed out last
    could leave the other worker idle."""
    first, slow = {}, collections.Counter()
    for index, item in enumerate(items):
        group = xdist_group_of(item.nodeid)
        first.setdefault(group, index)
        slow[group] += item.get_closest_marker("slow") is not None

    def order(item):
        group = xdist_group_of(item.nodeid)
        return (not slow[group], group != item.nodeid, -slow[group], first[group])

    return sorted(items, key=order)


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist's, when installed
def pytest_xdist_make_scheduler(config, log):
    """`--dist loadgroup` by `xdist_group_of`, groups handed out in
    collection order (which `_slow_groups_first` set)."""
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class GroupsOfThisSuite(LoadScopeScheduling):
        def _split_scope(self, nodeid):
            return xdist_group_of(nodeid)

    config.option.loadscopereorder = False  # xdist's own order: most tests first
    return GroupsOfThisSuite(config, log)


# --- Counting the processes and sweeps a run starts (issue 17) --------------
# `KG_TEST_PROCESS_LOG=/tmp/p.log pytest ...` appends one line per process a
# test starts (subprocess.Popen, which subprocess.run uses too: kg-train,
# kg, mlflow server, pip, python -c ...; not their own children) and per
# in-process pipeline.run / sharded.run_shard; `sort /tmp/p.log | uniq -c` then
# says how many of each. Off unless the variable is set.


@pytest.fixture(scope="session", autouse=True)
def _count_processes_and_sweeps():
    import os
    import subprocess

    path = os.environ.get("KG_TEST_PROCESS_LOG")
    if not path:
        yield
        return

    def write(line):
        with open(path, "a") as log:
            log.write(line + "\n")

    def program(args):
        words = [args] if isinstance(args, (str, bytes, os.PathLike)) else list(args)
        words = [os.path.basename(os.fsdecode(w)) for w in words[:3]]
        if words[:1] and words[0].startswith("python") and words[1:2] == ["-m"]:
            return " ".join(words[:3])  # python -m <module>; not -c's code
        return (" ".join(words[:2]).splitlines() or ["?"])[0]

    popen_init = subprocess.Popen.__init__

    def counted_popen(self, args, *rest, **kwargs):
        write("process\t" + program(args))
        popen_init(self, args, *rest, **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(subprocess.Popen, "__init__", counted_popen)
        try:
            from kg_service.sweep import pipeline
            from kg_service.sweep import sharded
        except ImportError:  # the keras_gelu suites alone
            pipeline = sharded = None
        for module, name in ((pipeline, "run"), (sharded, "run_shard")) if pipeline else ():
            patch.setattr(module, name, _counted(getattr(module, name), name, write))
        yield


def _counted(function, name, write):
    def counted(*args, **kwargs):
        write(f"in-process\t{name}")
        return function(*args, **kwargs)

    return counted


# --- The workers' timeline (issue 17) ---------------------------------------
# `KG_TEST_TIMELINE=/tmp/t.tsv pytest -n 2 ...` appends one line per test:
# worker, xdist group, start and end (seconds since the epoch, setup and
# teardown included), the CPU seconds of the worker itself and of the
# child processes it reaped meanwhile (a server stopped at a module's end
# counts at that test), nodeid. benchmarks/suite_timeline.py reads it: each
# worker's busy time, its idle end, each group's seconds. Off unless set.


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    path = os.environ.get("KG_TEST_TIMELINE")
    if not path:
        yield
        return
    import resource
    import time

    def cpu(who):
        usage = resource.getrusage(who)
        return usage.ru_utime + usage.ru_stime

    start = time.time()
    own, children = cpu(resource.RUSAGE_SELF), cpu(resource.RUSAGE_CHILDREN)
    yield
    own = cpu(resource.RUSAGE_SELF) - own
    children = cpu(resource.RUSAGE_CHILDREN) - children
    worker = os.environ.get("PYTEST_XDIST_WORKER", "main")
    with open(path, "a") as log:
        log.write(
            f"{worker}\t{xdist_group_of(item.nodeid)}\t{start:.3f}\t{time.time():.3f}\t"
            f"{own:.2f}\t{children:.2f}\t{item.nodeid}\n"
        )
