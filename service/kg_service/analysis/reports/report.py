"""The sweep report: report.md and summary.json, with the figures, in one folder.

The numbers come from `kg_service.analysis.numbers.comparisons` (pure), their
words from `kg_service.analysis.words.wording` and `kg_service.analysis.words.tables`,
the PNG figures from `kg_service.analysis.reports.figures`; this module lays them
out with the sweep's setup (from its config and its task).
"""

import dataclasses
import json
import pathlib

import yaml

from kg_service.analysis.numbers import claim_data
from kg_service.analysis.numbers import stats
from kg_service.analysis.words import claim_wording
from kg_service.analysis.words import tables
from kg_service.analysis.reports import page
from kg_service.analysis.reports import variance_report
from kg_service.analysis.words import verdict_wording
from kg_service.analysis.words import wording
from kg_service.analysis.reports.figures import draw_figures
from kg_service.analysis.reports.figures import FIGURES
from kg_service.analysis.reports.canvas import save
from kg_service.analysis.reports import forest
from kg_service.config import catalog
from kg_service.tasks import base as tasks

REPORT = "report.md"
SUMMARY = "summary.json"


def write_report(
    summary,
    results,
    out_dir,
    *,
    title,
    dataset=None,
    config=None,
    figures=tuple(FIGURES),
    failed=(),
    resolved=None,
    sections=(),
    claims=None,
):
    """Writes report.md, report.html, summary.json and the figures into `out_dir`.

    Figures: those named in `figures` (keys of `FIGURES`, the task's
    `figures`), each skipped when it has nothing to show:
    learning_curves.png, <metric>_per_seed.png (e.g.
    test_accuracy_per_seed.png), decision_boundaries.png (a `dataset` with
    2 input features and models on the best-validation seeds), and
    activation_curves.png; and, first, comparisons_forest.png (each
    comparison's Δ with its deciding interval and the margin).

    Args:
        summary: a `comparisons.Summary` of `results`.
        results: the `MemberResult` list the summary was computed from.
        out_dir: folder to write into; created if missing.
        title: the report's heading.
        dataset: optional `kg_service.tasks.classification.data.Dataset` (x_train/y_train/x_test/
            y_test arrays as fed to the models, `input_dim`; with
            `features`, the setup says what the models take and return).
        config: optional resolved `kg_service.config.schema.Config`, for the setup
            section and the learning curves' threshold; with `resolved`.
        figures: names of the figures to draw, in `FIGURES` order.
        failed: `MemberResult`s that diverged, listed in the report.
        resolved: the config as the sweep ran it, as plain data (its
            logged config.json, the tracking URI's password redacted), for
            the "Full configuration" section; required with `config`, and
            resolved once by the sweep's pre-flight (`kg report` passes the
            stored one, since its own `config` points at the store and
            output it rebuilds to).
        sections: `page.Section`s added at the end (a sequential sweep's
            looks, a tuned sweep's tuning), their figures drawn already.
        claims: the config's claims labelled (`claims.Label`s; a
            sequential sweep's from its looks); None: labelled here from
            `results` (`claim_data.label_sweep`).

    Returns:
        The paths written: report.md, summary.json, report.html, the figures.
    """
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    results = list(results)
    task = _task_of(config, dataset)
    threshold = (config.training.convergence_threshold
                 if config is not None and wording.thresholded(summary) else None)
    figures = _forest(summary, out) + draw_figures(
        figures, out, summary, results, dataset=dataset, threshold=threshold,
        member_data=member_data(dataset, config, task))

    summary_path = out / SUMMARY
    # Issue 19: McNemar per test example and the training-loss curves.
    data = {**verdict_wording.summary_json(summary),
            **variance_report.summary_entries(summary, results, config)}
    summary_path.write_text(json.dumps(data, indent=2, allow_nan=False) + "\n")
    written = page.write(report_page(summary, results, title=title, task=task, cfg=resolved,
                                     dataset=dataset, config=config, figures=figures,
                                     failed=failed, sections=sections, claims=claims),
                         out, REPORT)
    return [written[0], summary_path, written[1]] + [out / name for name, _ in figures]


def _forest(summary, out):
    """The comparisons' forest plot, first of the figures (issue 34 §2)."""
    fig = forest.forest_plot(forest.sweep_rows(summary), x_label=forest.axis_label(
        summary.metric.name, summary.metric.higher_is_better), title="Each activation against the baseline: Δ and the "
        "interval that decides its verdict")
    return [(forest.FOREST, forest.ALT)] if save(fig, out / forest.FOREST) else []


def member_data(dataset, config, task):
    """result -> the split that member trained and was tested on (issue 30
    §5): with `vary: split` its own, rebuilt by `task` (the config's) from
    the data seed's split; None where that cannot be done (no panel then,
    never another split's points). Without a config: `dataset` for every
    member."""
    if dataset is None or config is None or "split" not in config.vary:
        return lambda result: dataset
    member_split = task.member_split if task is not None else None
    if (member_split is None or not getattr(dataset, "unsplit", None)
            or getattr(dataset, "data_config", None) is None):
        return lambda result: None
    return lambda result: member_split(dataset, config, result.seed)


# --- The report model (issue 34 §1: report.md and report.html from one page). ------


def render_markdown(
    summary, results, *, title, dataset=None, config=None, figures=(), failed=(),
    resolved=None, claims=None,
):
    """The report's Markdown text (pure; `write_report` saves it)."""
    task = _task_of(config, dataset)
    return page.markdown(report_page(summary, results, title=title, task=task, cfg=resolved,
                                     dataset=dataset, config=config, figures=figures,
                                     failed=failed, claims=claims))


def _task_of(config, dataset):
    """The registered task of the config's dataset (else of `dataset`'s
    name), looked up once for the whole report; None where no registered
    task loads it."""
    name = config.data.dataset if config is not None else getattr(dataset, "name", None)
    return tasks.get(name) if name in tasks.names() else None


def report_page(
    summary, results, *, title, task, cfg, dataset=None, config=None, figures=(), failed=(),
    sections=(), claims=None,
):
    """The report as a `page.Page`: the setup, results, verdicts (the HTML
    page's lead), comparisons, figures, per-seed tables and how to read
    them; `sections` (the looks', the tuning's) at the end. `task`:
    `_task_of`'s; `cfg`: the config as the sweep logged it (`resolved`),
    which a report of a `config` needs.

    Raises:
        ValueError: for a `config` without its `cfg`.
    """
    if config is not None and cfg is None:
        raise ValueError("a report of a config needs it as the sweep logged it: pass `resolved`")
    blocks = [_setup(summary, results, dataset, config, cfg, task),
              _results(summary, results, failed, task),
              _verdicts(summary), *_comparison_details(summary),
              *_claims(config, results, claims),
              *variance_report.sections(summary, results, config)]
    notes = [f"{who}: {n}" if who else n for who, n in wording.all_notes(summary)]
    if notes:
        blocks += [page.Paragraph("Notes:"), page.Bullets(tuple(notes))]
    if figures:
        blocks.append(page.Section("Figures", tuple(page.Figure(name, alt)
                                                    for name, alt in figures)))
    blocks += [page.Section("Per seed", _per_seed_tables(summary, results)),
               page.Section("How to read this",
                            (page.Bullets(tuple(_how_to_read(summary, dataset, config))),)),
               *sections]
    return page.Page(title, tuple(blocks))


def _results(summary, results, failed, task):
    blocks = [page.Paragraph(f"Metric: {wording.metric_note(summary)}."),
              page.table(*tables.table_rows(summary))]
    if failed:
        blocks += [
            page.Paragraph("Failed members (diverged): counted in the failed column and "
                           "compared with the baseline's failures, left out of the "
                           "metric's statistics (not averaged in):"),
            page.table(["activation", "seed", "failure", "epoch"],
                       [[m.activation, m.seed, m.failure, m.failed_epoch] for m in failed]),
        ]
    blocks += _task_tables(summary, results, task)
    blocks.append(page.Paragraph(tables.results_caption(summary)))
    return page.Section("Results", tuple(blocks))


def _verdicts(summary):
    blocks = [page.Bullets(tuple(verdict_wording.verdicts(summary)))]
    plans = verdict_wording.plan_lines(summary, undecided_only=False)
    if plans:
        blocks += [page.Paragraph(
            f"Seed plan (power {summary.power:g}; each count at alpha divided by the "
            "comparisons, Holm's strictest step):"),
            page.Bullets(tuple(f"{line}." for line in plans))]
    failures = verdict_wording.failure_lines(summary)
    if failures:
        blocks += [page.Paragraph("Failures (a diverged member is a result):"),
                   page.Bullets(tuple(f"{line}." for line in failures))]
    return page.Section("Verdicts", tuple(blocks), lead=True)


def _task_tables(summary, results, task):
    """The task's own table (`Task.tables`: a language model's perplexity
    and attention-entropy quarters), or nothing."""
    made = task.tables(summary, results) if task is not None and task.tables else None
    if not made:
        return []
    caption, header, rows = made
    return [page.Paragraph(caption), page.table(header, rows)]


def _setup(summary, results, dataset, config, cfg, task):
    lines = []
    names = ", ".join(f"{a.activation} (baseline)" if a.activation == summary.baseline
                      else a.activation for a in summary.activations)
    seeds = sorted({r.seed for r in results})
    lines.append(f"- Activations: {names}; {len(seeds)} seeds: {_seed_list(seeds)}.")
    data_line = _data_line(config, dataset, task)
    if data_line:
        lines.append(data_line)
    lines += _model_io(dataset)
    if config is not None:
        model_line = task.model_line if task is not None else None
        lines.append(model_line(config.model) if model_line else _model_line(config.model))
        steps = task is not None and _reads(task, "training.steps_per_epoch", cfg)
        lines.append(_training_line(config.training, wording.thresholded(summary), steps))
    blocks = [page.Bullets(tuple(line.removeprefix("- ") for line in lines))]
    if config is not None:
        blocks.append(page.Details("Full configuration", (_config_block(cfg, task),)))
    return page.Section("Setup", tuple(blocks))


def _data_line(config, dataset, task):
    data = config.data if config is not None else None
    name = data.dataset if data is not None else getattr(dataset, "name", None)
    if not name:
        return ""
    own = task.data_parts(data, dataset) if task is not None and task.data_parts else []
    # A task's own description of what it loaded replaces its name (a corpus).
    parts = own if own and task.describes_data else [str(name)] + own
    if data is not None:
        if "split" in config.vary:
            # `config.derived.source_seeds`: each member's split from its own seed
            # (a corpus: which blocks it holds out; sizes the same for all).
            parts.append(f"split varied by seed (each member's own, derived from data "
                         f"seed {data.seed} and its seed)")
        else:
            parts.append(f"split seed {data.seed} (the same for every member)")
    return ("- Data: " + "; ".join(parts) + ". The test split is used only for the final "
            "numbers, never for training or selection.")


def _model_line(m):
    text = f"- Model: {m.block} block, hidden {tuple(m.hidden_units)}"
    if m.block == "feedforward":
        text += f", d_model {m.d_model}"
    if m.dropout:
        text += f", dropout {m.dropout}"
    if m.match_params:
        text += ", gated FFNs parameter-matched"
    return text + "."


def _training_line(t, threshold=True, steps=False):
    text = f"- Training: {t.optimizer} lr {t.learning_rate}, {t.epochs} epochs, batch {t.batch_size}"
    if steps and t.steps_per_epoch:  # a task that reads it (classifiers make one pass per epoch)
        text += f", {t.steps_per_epoch} steps per epoch"
    if threshold:
        text += f"; convergence threshold: validation accuracy ≥ {t.convergence_threshold}"
    return text + "."


def _model_io(dataset):
    """What the trained (and registered, and exported) models take and return."""
    if not hasattr(dataset, "describe_inputs") or not getattr(dataset, "features", True):
        return []
    return [f"- Model input: {dataset.describe_inputs()}",
            f"- Model output: {dataset.describe_outputs()}"]


def _reads(task, path, cfg):
    """Whether `task` reads the key `path` ("data.noise") of `cfg`: a key
    some task declares, if it is its own; a common key, unless the task
    says it does not read it (`Task.unused_keys`)."""
    section, key = path.split(".")
    declared = getattr(task, f"{section}_settings", None) if section in ("data", "model") else None
    theirs = {f.name for f in catalog.settings(section)} if section in ("data", "model") else set()
    if key in theirs:
        return declared is not None and key in {f.name for f in dataclasses.fields(declared)}
    return not (task.unused_keys and path in task.unused_keys(cfg))


def used_config(cfg, task):
    """`cfg` (a config as plain data) without the keys `task` (its
    `data.dataset`'s) does not read; unchanged without a task (None: a
    dataset no registered task loads)."""
    if task is None:
        return cfg
    out = {k: dict(v) if isinstance(v, dict) else v for k, v in cfg.items()}
    # The report's "Full configuration" shows the keys its task reads, not,
    # for a classifier, a corpus size and attention heads nobody set.
    for section in ("data", "model", "training"):
        for key in list(out.get(section) or {}):
            if not _reads(task, f"{section}.{key}", cfg):
                del out[section][key]
    return out


class _ConfigDumper(yaml.SafeDumper):
    """YAML as the user writes configs: lists of scalars stay on one line."""


_ConfigDumper.add_representer(
    list, lambda dumper, data: dumper.represent_sequence(
        "tag:yaml.org,2002:seq", data, flow_style=True))


def _config_block(cfg, task):
    cfg = used_config(cfg, task)
    text = yaml.dump(json.loads(json.dumps(cfg, default=str)), Dumper=_ConfigDumper,
                     sort_keys=False, default_flow_style=False, width=100)
    return page.Code(text.rstrip(), "yaml")


def _seed_list(seeds):
    if seeds and seeds == list(range(seeds[0], seeds[0] + len(seeds))) and len(seeds) > 2:
        return f"{seeds[0]}–{seeds[-1]}"
    return ", ".join(str(s) for s in seeds)


def _comparison_details(summary):
    if not summary.comparisons:
        return []
    note = tables.secondary_note(summary)
    intro = f"Paired comparisons in detail ({note}):" if note else "Paired comparisons in detail:"
    blocks = [page.Paragraph(intro), page.table(*tables.comparison_rows(summary)),
              page.Paragraph(tables.few_runs_caption(summary))]
    if summary.contrasts:
        blocks += [page.Paragraph(
            f"Declared contrasts (analysis.contrasts; mean of each group, paired by seed; "
            f"Holm over the {len(summary.contrasts)} contrasts):"),
            page.table(*tables.pair_rows(summary, summary.contrasts)),
            *page.bullets(verdict_wording.contrast_lines(summary))]
    if len(summary.pairs) > 1:
        blocks += [page.Paragraph(
            f"All pairs (Holm over the {len(summary.pairs)} pairs, so a winner chosen after "
            "looking is still tested fairly):"),
            page.table(*tables.pair_rows(summary, summary.pairs))]
    return blocks


def _claims(config, results, labels=None):
    """The claims the config declared, labelled from this sweep's members
    (an interaction needs the study: `kg report --study`), as a section;
    `labels`: labelled already (a sequential sweep's, from its looks)."""
    if labels is None:
        labels = claim_data.label_sweep(config, results) if config is not None else ()
    if not labels:
        return []
    return [page.Section("Claims", (
        page.Paragraph(claim_wording.caption(labels)),
        page.table(*claim_wording.claim_rows(labels)),
        *page.bullets([f"{line}." for line in claim_wording.claim_lines(labels)])), lead=True)]


def _per_seed_tables(summary, results):
    return (page.Paragraph(tables.per_seed_caption(summary)),
            page.table(*tables.per_seed_rows(summary, results)),
            page.Details("Every member (final-epoch validation metrics)",
                         (page.table(*tables.member_rows(summary, results)),)))


def _how_to_read(summary, dataset, config=None):
    n = min((a.n for a in summary.activations), default=0)
    shown = wording.shown(summary.metric.name)
    lines = [
        f"- One seed is one training run: {_seed_sets(config)}. Activations are "
        "compared seed by seed (paired), which removes the seed-to-seed variation "
        "they share.",
        f"- The {summary.confidence:.0%} interval of Δ is where the true mean "
        "difference plausibly lies. Small seed counts give wide intervals: the "
        "t multiplier is "
        + ", ".join(f"{stats.t_multiplier(k, summary.confidence):.2f} for {k} seeds"
                    for k in (3, 5, 10))
        + (f" (this sweep: {n})" if n >= 2 else "")
        + ", and the sd itself is poorly known.",
        "- An inconclusive verdict is not evidence that the activations are equal; it "
        "means these seeds can neither tell them apart nor show the difference is "
        "inside the margin. Equivalence is a claim of its own (TOST: the 1 − 2α "
        "interval inside ±margin). The seed plan says how many seeds would decide.",
        "- d_z (mean difference / sd of the differences) around 0.2 is small, 0.5 "
        "medium, 0.8 large; with few seeds it is itself very noisy, hence its interval "
        "(noncentral t). The Wilcoxon signed-rank p-value is a check that does not "
        f"assume normal differences; {wording.wilcoxon_floor_note(summary.alpha)}.",
    ]
    if summary.holm:
        lines.append("- Several activations were compared with the baseline, so "
                     "the verdicts use Holm-adjusted p-values (family-wise error "
                     f"≤ {summary.alpha:g} for differences, and again for equivalence); "
                     "the deciding intervals are taken at the level Holm tests each "
                     "comparison at, while the table's 95% CI of Δ is unadjusted.")
    if summary.metric.name == "test_accuracy" and dataset is not None and len(dataset.y_test):
        step = 100.0 / len(dataset.y_test)
        lines.append(f"- With {len(dataset.y_test)} test points one test example is "
                     f"{step:.2f} pp of accuracy; differences below that are ties.")
    best = "highest" if summary.metric.higher_is_better else "lowest"
    lines.append(f"- The winner is the {best} mean {shown.label}; when its lead over "
                 "a runner-up that is not the baseline is tested, that p-value is "
                 "unadjusted and optimistic, since the pair was chosen after looking.")
    split = config is None or "split" in config.vary
    lines.append("- The intervals cover what the seeds vary"
                 + (", the data split included, but not the variation from drawing a "
                    "new data set." if split else
                    "; the data split is fixed, so they cover neither another split "
                    "nor another data set."))
    return [line.removeprefix("- ") for line in lines]


_SOURCE_WORDS = {"init": "the initial weights", "order": "the batch order",
                 "split": "the train / validation / test split"}


def _seed_sets(config):
    """What one member's seed decides, by the sweep's `vary`."""
    vary = config.vary if config is not None else tuple(_SOURCE_WORDS)
    varied = [_SOURCE_WORDS[v] for v in _SOURCE_WORDS if v in vary]
    fixed = [_SOURCE_WORDS[v] for v in _SOURCE_WORDS if v not in vary]
    text = "its seed sets " + ", ".join(varied[:-1]) + (" and " if len(varied) > 1 else "") + varied[-1]
    text += " (each from its own derived seed)" if len(varied) > 1 else ""
    if fixed:
        text += "; " + " and ".join(fixed) + (" is" if len(fixed) == 1 else " are") + \
            " the same for every run"
    return text

