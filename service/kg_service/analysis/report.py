"""The sweep report: report.md, summary.json and PNG figures in one folder.

The numbers come from `kg_service.analysis.stats` (pure) and their words from
`kg_service.analysis.wording`; this module lays them out with the setup and the
figures. Figures use matplotlib's object API on the Agg canvas (no pyplot,
so no global backend or figure state), one small function each. Keras is
imported only for the two figures that evaluate something: decision
boundaries and activation curves.
"""

import dataclasses
import json
import math
import pathlib
import warnings

import matplotlib
import numpy as np
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

from kg_service.tasks import base as tasks
from kg_service.analysis import wording
from kg_service.errors import ServiceError

REPORT = "report.md"
SUMMARY = "summary.json"
LEARNING_CURVES = "learning_curves.png"
DECISION_BOUNDARIES = "decision_boundaries.png"
ACTIVATION_CURVES = "activation_curves.png"
ATTENTION_ENTROPY = "attention_entropy.png"
LEAKY_SLOPES = "leaky_slopes.png"

_DPI = 110
_GRID = 150  # decision-boundary grid points per axis
_BATCH = 8192  # grid points per model call


@dataclasses.dataclass(frozen=True)
class _FigureContext:
    summary: object
    results: list
    dataset: object
    colors: dict
    threshold: object  # convergence threshold, or None


def _learning_curves_figure(ctx):
    panels = _curve_panels(ctx.summary, ctx.results)
    return (
        LEARNING_CURVES,
        f"{panels[0][1].capitalize()} and {panels[1][1]} per epoch",
        _learning_curves(ctx.summary, ctx.results, ctx.colors, ctx.threshold, panels),
    )


def _per_seed_figure(ctx):
    label = wording.shown(ctx.summary.metric.name).label
    return (
        per_seed_file(ctx.summary),
        f"{label.capitalize()} per seed",
        _per_seed(ctx.summary, ctx.results, ctx.colors),
    )


def _decision_boundaries_figure(ctx):
    return (
        DECISION_BOUNDARIES,
        "Decision boundaries of the best-validation seeds",
        _decision_boundaries(ctx.summary, ctx.results, ctx.dataset),
    )


def _activation_curves_figure(ctx):
    return (
        ACTIVATION_CURVES,
        "The activation functions and their derivatives",
        _activation_curves(ctx.summary, ctx.colors),
    )


def _attention_entropy_figure(ctx):
    return (
        ATTENTION_ENTROPY,
        "Attention entropy per layer and head, best-validation seeds",
        _attention_entropy(ctx.summary, ctx.results),
    )


def _leaky_slopes_figure(ctx):
    return (
        LEAKY_SLOPES,
        "Learnable leaky ReLU slope per block over training",
        _leaky_slopes(ctx.summary, ctx.results, ctx.colors),
    )


# One line per figure a task may ask for (`Task.figures`), in report order:
# name -> draw(context) -> (file name, alt text, Figure or None to skip).
FIGURES = {
    "learning_curves": _learning_curves_figure,
    "per_seed": _per_seed_figure,
    "decision_boundaries": _decision_boundaries_figure,
    "activation_curves": _activation_curves_figure,
    "attention_entropy": _attention_entropy_figure,
    "leaky_slopes": _leaky_slopes_figure,
}


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
):
    """Writes report.md, summary.json and the figures into `out_dir`.

    Figures: those named in `figures` (keys of `FIGURES`, the task's
    `figures`), each skipped when it has nothing to show:
    learning_curves.png, <metric>_per_seed.png (e.g.
    test_accuracy_per_seed.png), decision_boundaries.png (a `dataset` with
    2 input features and models on the best-validation seeds), and
    activation_curves.png.

    Args:
        summary: a `stats.Summary` of `results`.
        results: the `MemberResult` list the summary was computed from.
        out_dir: folder to write into; created if missing.
        title: the report's heading.
        dataset: optional `kg_service.tasks.classification.data.Dataset` (x_train/y_train/x_test/
            y_test arrays as fed to the models, `input_dim`; with
            `features`, the setup says what the models take and return).
        config: optional resolved `kg_service.config.schema.Config`, for the setup
            section and the learning curves' threshold.
        figures: names of the figures to draw, in `FIGURES` order.
        failed: `MemberResult`s that diverged, listed in the report.
        resolved: the config as the sweep ran it, as plain data (its
            logged config.json), for the "Full configuration" section;
            default: `config`'s. `kg report` passes the stored one, since
            its own `config` points at the store and output it rebuilds to.

    Returns:
        The paths written, report.md first.
    """
    out = pathlib.Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    results = list(results)
    context = _FigureContext(
        summary=summary,
        results=results,
        dataset=dataset,
        colors=_colors(summary),
        threshold=(config.training.convergence_threshold
                   if config is not None and wording.thresholded(summary) else None),
    )
    unknown = sorted(set(figures) - set(FIGURES))
    if unknown:
        raise ValueError(f"unknown report figures {unknown}; known: {list(FIGURES)}")
    figures = [
        FIGURES[name](context) for name in FIGURES if name in set(figures)
    ]
    figures = [(name, alt) for name, alt, fig in figures if _saved(fig, out / name)]

    summary_path = out / SUMMARY
    summary_path.write_text(
        json.dumps(wording.summary_json(summary), indent=2, allow_nan=False) + "\n"
    )
    report_path = out / REPORT
    report_path.write_text(
        render_markdown(summary, results, title=title, dataset=dataset, config=config,
                        figures=figures, failed=failed, resolved=resolved)
    )
    return [report_path, summary_path] + [out / name for name, _ in figures]


def per_seed_file(summary):
    """The per-seed figure's file name: test_accuracy_per_seed.png."""
    return f"{summary.metric.name}_per_seed.png"


# --- Markdown. -----------------------------------------------------------------


def render_markdown(
    summary, results, *, title, dataset=None, config=None, figures=(), failed=(),
    resolved=None,
):
    """The report's Markdown text (pure; `write_report` saves it)."""
    lines = [f"# {title}", ""]
    lines += _setup(summary, results, dataset, config, resolved)
    lines += ["## Results", "", f"Metric: {wording.metric_note(summary)}.", ""]
    lines += _md_table(*wording.table_rows(summary))
    if failed:
        lines += [
            "",
            "Failed members, left out of every statistic above (not averaged in):",
            "",
        ]
        lines += _md_table(
            ["activation", "seed", "failure", "epoch"],
            [[m.activation, m.seed, m.failure, m.failed_epoch] for m in failed],
        )
    lines += _language_model_tables(summary, results)
    lines += ["", wording.results_caption(summary), "", "## Verdicts", ""]
    lines += [f"- {v}" for v in wording.verdicts(summary)]
    lines += _comparison_details(summary)
    notes = [f"{who}: {n}" if who else n for who, n in wording.all_notes(summary)]
    if notes:
        lines += ["", "Notes:", ""] + [f"- {n}" for n in notes]
    if figures:
        lines += ["", "## Figures", ""]
        for name, alt in figures:
            lines += [f"![{alt}]({name})", ""]
    lines += ["## Per seed", ""]
    lines += _per_seed_tables(summary, results)
    lines += ["", "## How to read this", ""]
    lines += _how_to_read(summary, dataset)
    return "\n".join(lines).rstrip() + "\n"


def _language_model_tables(summary, results):
    """A language model sweep's perplexity and attention-entropy quarters.

    Means over seeds of the final values: test perplexity and bits per
    byte, and the share of heads in each quarter of [0, max entropy]
    ("ReLU's Revival", Table 3's layout), with the mean final slope of
    any learnable leaky ReLU. Empty for other tasks.
    """
    rows = []
    for a in summary.activations:
        members = [r for r in results if r.activation == a.activation]
        if not members or "test_perplexity" not in members[0].final:
            return []
        mean = lambda values: float(np.mean(values))  # noqa: E731
        quarters = [mean([r.history[f"entropy_quarter{k}"][-1] for r in members])
                    for k in range(1, 5)]
        slopes = [v[-1] for r in members for k, v in r.history.items()
                  if k.startswith("leaky_slope.") and v]
        rows.append([
            a.activation,
            f"{mean([r.final['test_perplexity'] for r in members]):.4f}",
            f"{mean([r.final['test_bits_per_byte'] for r in members]):.4f}",
            *(f"{100 * q:.0f}%" for q in quarters),
            f"{mean(slopes):.4f}" if slopes else "",
        ])
    return ["", "Language model, means over seeds of the final values (entropy "
            "quarters: share of heads in [0, max/4), [max/4, max/2), [max/2, 3max/4), "
            "[3max/4, max], max = the highest head entropy of the member):", ""] + _md_table(
        ["activation", "test perplexity", "bits/byte", "q1", "q2", "q3", "q4",
         "leaky slope"], rows)


def _setup(summary, results, dataset, config, resolved=None):
    lines = ["## Setup", ""]
    names = ", ".join(f"{a.activation} (baseline)" if a.activation == summary.baseline
                      else a.activation for a in summary.activations)
    seeds = sorted({r.seed for r in results})
    lines.append(f"- Activations: {names}; {len(seeds)} seeds: {_seed_list(seeds)}.")
    data_line = _data_line(config, dataset)
    if data_line:
        lines.append(data_line)
    lines += _model_io(dataset)
    if config is not None:
        language = (dataset is not None and not hasattr(dataset, "y_train")) or (
            config.data.dataset in tasks.names()
            and _language(tasks.get(config.data.dataset), None))
        lines.append(_model_line(config.model, language))
        lines.append(_training_line(config.training, wording.thresholded(summary), language))
        lines += ["", "<details><summary>Full configuration</summary>", ""]
        lines += _config_block(config, resolved) + ["", "</details>"]
    return lines + [""]


def _data_line(config, dataset):
    data = config.data if config is not None else None
    name = data.dataset if data is not None else getattr(dataset, "name", None)
    if not name:
        return ""
    parts = [str(name)]
    if data is not None and name in ("moons", "circles"):
        parts.append(f"{data.n_samples} samples, noise {data.noise}")
    if dataset is not None and not hasattr(dataset, "y_train"):
        parts = [dataset.describe()]  # a corpus (kg_service.tasks.language.corpus)
    elif dataset is not None:
        n_classes = getattr(dataset, "n_classes", None) or len(np.unique(dataset.y_train))
        parts.append(f"train/val/test {len(dataset.y_train)}/"
                     f"{len(getattr(dataset, 'y_val', []))}/{len(dataset.y_test)}, "
                     f"{dataset.input_dim} features, {n_classes} classes")
    if data is not None:
        parts.append(f"split seed {data.seed} (the same for every member)")
    return ("- Data: " + "; ".join(parts) + ". The test split is used only for the final "
            "numbers, never for training or selection.")


def _model_line(m, language=False):
    if language:
        return (f"- Model: decoder-only transformer, {len(m.hidden_units)} blocks, d_model "
                f"{m.d_model}, {m.heads} heads, FFN widths {tuple(m.hidden_units)}"
                + (", gated FFNs parameter-matched" if m.match_params else "")
                + f", LayerNorm {'on' if m.layer_norm else 'off'}, "
                f"{'tied' if m.tie_embeddings else 'untied'} embeddings.")
    text = f"- Model: {m.block} block, hidden {tuple(m.hidden_units)}"
    if m.block == "feedforward":
        text += f", d_model {m.d_model}"
    if m.dropout:
        text += f", dropout {m.dropout}"
    if m.match_params:
        text += ", gated FFNs parameter-matched"
    return text + "."


def _training_line(t, threshold=True, language=False):
    text = f"- Training: {t.optimizer} lr {t.learning_rate}, {t.epochs} epochs, batch {t.batch_size}"
    if language and t.steps_per_epoch:  # classifiers make one pass per epoch
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


def _language(task, cfg):
    return task.serving == "language_model"


def _classifier(task, cfg):
    return not _language(task, cfg)


def _sampled(task, cfg):  # moons, circles: a generated data set of n_samples
    return task.sample_splits and not task.fixed_samples


# Config keys that only some tasks read (config.py's comments say which):
# key path -> (task, config dict) -> whether this sweep's task uses it. The
# report's "Full configuration" shows the keys its task uses, not, for a
# moons sweep, a corpus size and attention heads nobody set.
_USED_WHEN = {
    "data.n_samples": _sampled,
    "data.noise": _sampled,
    "data.standardize": _classifier,
    "data.corpus_bytes": _language,
    "data.context": _language,
    "data.eval_windows": _language,
    "model.block": _classifier,
    "model.d_model": lambda task, cfg: (
        _language(task, cfg) or cfg["model"].get("block") == "feedforward"),
    "model.heads": _language,
    "model.layer_norm": _language,
    "model.tie_embeddings": _language,
    "training.steps_per_epoch": _language,
    "training.convergence_threshold": _classifier,
}


def used_config(cfg):
    """`cfg` (a config as plain data) without the keys its task does not read.

    Unchanged when its `data.dataset` names no registered task.
    """
    try:
        task = tasks.get(cfg["data"]["dataset"])
    except (KeyError, TypeError, ServiceError):
        return cfg
    out = {k: dict(v) if isinstance(v, dict) else v for k, v in cfg.items()}
    for path, used in _USED_WHEN.items():
        section, key = path.split(".")
        if key in out.get(section, {}) and not used(task, cfg):
            del out[section][key]
    return out


def _config_block(config, resolved=None):
    from kg_service.config import loading as config_lib

    cfg = used_config(resolved if resolved is not None else config_lib.config_to_dict(config))
    try:  # YAML, as the user writes configs; lists of scalars stay on one line
        import yaml

        class Dumper(yaml.SafeDumper):
            pass

        def flow_list(dumper, data):
            return dumper.represent_sequence("tag:yaml.org,2002:seq", data, flow_style=True)

        Dumper.add_representer(list, flow_list)
        text = yaml.dump(json.loads(json.dumps(cfg, default=str)), Dumper=Dumper,
                         sort_keys=False, default_flow_style=False, width=100)
        return ["```yaml", text.rstrip(), "```"]
    except ImportError:
        return ["```json", json.dumps(cfg, indent=2, default=str), "```"]


def _seed_list(seeds):
    if seeds and seeds == list(range(seeds[0], seeds[0] + len(seeds))) and len(seeds) > 2:
        return f"{seeds[0]}–{seeds[-1]}"
    return ", ".join(str(s) for s in seeds)


def _md_escape(cell):
    return str(cell).replace("|", "\\|")


def _md_table(header, rows):
    out = ["| " + " | ".join(_md_escape(h) for h in header) + " |",
           "|" + "|".join("---" if i == 0 else "---:" for i in range(len(header))) + "|"]
    out += ["| " + " | ".join(_md_escape(c) for c in r) + " |" for r in rows]
    return out


def _comparison_details(summary):
    if not summary.comparisons:
        return []
    note = wording.secondary_note(summary)
    intro = f"Paired comparisons in detail ({note}):" if note else "Paired comparisons in detail:"
    return ["", intro, ""] + _md_table(*wording.comparison_rows(summary))


def _per_seed_tables(summary, results):
    lines = [wording.per_seed_caption(summary), ""]
    lines += _md_table(*wording.per_seed_rows(summary, results))
    lines += ["", "<details><summary>Every member (final-epoch validation metrics)</summary>",
              ""] + _md_table(*wording.member_rows(summary, results)) + ["", "</details>"]
    return lines


def _how_to_read(summary, dataset):
    n = min((a.n for a in summary.activations), default=0)
    shown = wording.shown(summary.metric.name)
    lines = [
        "- One seed is one training run: the seed sets the initial weights and the "
        "batch order; the data split is the same for every run. Activations are "
        "compared seed by seed (paired), which removes the seed-to-seed variation "
        "they share.",
        f"- The {summary.confidence:.0%} interval of Δ is where the true mean "
        "difference plausibly lies. Small seed counts give wide intervals: the "
        "t multiplier is "
        + ", ".join(f"{_t_mult(k, summary.confidence):.2f} for {k} seeds" for k in (3, 5, 10))
        + (f" (this sweep: {n})" if n >= 2 else "")
        + ", and the sd itself is poorly known.",
        "- \"No significant difference\" is not evidence that the activations are "
        "equal; it means these seeds cannot tell them apart. Read the interval: "
        "every difference inside it is still plausible.",
        "- d_z (mean difference / sd of the differences) around 0.2 is small, 0.5 "
        "medium, 0.8 large; with few seeds it is itself very noisy. The Wilcoxon "
        "signed-rank p-value is a check that does not assume normal differences.",
    ]
    if summary.holm:
        lines.append("- Several activations were compared with the baseline, so "
                     "significance uses Holm-adjusted p-values (family-wise error "
                     f"≤ {summary.alpha:g}); the intervals are not adjusted.")
    if summary.metric.name == "test_accuracy" and dataset is not None and len(dataset.y_test):
        step = 100.0 / len(dataset.y_test)
        lines.append(f"- With {len(dataset.y_test)} test points one test example is "
                     f"{step:.2f} pp of accuracy; differences below that are ties.")
    best = "highest" if summary.metric.higher_is_better else "lowest"
    lines.append(f"- The winner is the {best} mean {shown.label}; when its lead over "
                 "a runner-up that is not the baseline is tested, that p-value is "
                 "unadjusted and optimistic, since the pair was chosen after looking.")
    lines.append("- Seeds vary initialisation only, so the intervals do not cover "
                 "the variation from drawing a different data set.")
    return lines


def _t_mult(n, confidence):
    from scipy import stats as st

    return float(st.t.ppf(0.5 + confidence / 2, n - 1))


# --- Figures. -------------------------------------------------------------------


def _colors(summary):
    import matplotlib

    cmap = matplotlib.colormaps["tab10"]
    return {a.activation: cmap(i % 10) for i, a in enumerate(summary.activations)}


def _figure(width, height, layout=None):
    fig = Figure(figsize=(width, height), dpi=_DPI, layout=layout)
    FigureCanvasAgg(fig)
    return fig


def _saved(fig, path):
    """Saves `fig` (None: nothing to show) and says whether it did."""
    if fig is None:
        return False
    _save(fig, path)
    return True


def _save(fig, path):
    fig.savefig(path, dpi=_DPI)


def _stack(results, key):
    """[seeds, epochs] array of one history key, NaN-padded to the longest run."""
    series = [np.asarray(r.history.get(key, []), dtype=float) for r in results]
    length = max((len(s) for s in series), default=0)
    out = np.full((len(series), length), np.nan)
    for i, s in enumerate(series):
        out[i, : len(s)] = s
    return out


def _curve_panels(summary, results):
    """The learning curves' two panels, `(history key, label)`, on the task's
    own metric: a classifier's validation accuracy (against the convergence
    threshold) and loss; otherwise (a language model, compared by
    log-perplexity: its next-byte accuracy says little) validation loss and
    perplexity.
    """
    if wording.thresholded(summary):
        return (("val_accuracy", "validation accuracy"), ("val_loss", "validation loss"))
    keys = {k for r in results for k in r.history}
    if "val_perplexity" in keys:
        return (("val_loss", "validation loss"), ("val_perplexity", "validation perplexity"))
    return (("val_loss", "validation loss"), ("loss", "training loss"))


def _learning_curves(summary, results, colors, threshold=None, panels=None):
    panels = panels or _curve_panels(summary, results)
    fig = _figure(11, 4.2)
    axes = fig.subplots(1, 2)
    for ax, (key, label) in zip(axes, panels):
        for a in summary.activations:
            members = [r for r in results if r.activation == a.activation]
            values = _stack(members, key)
            if values.size == 0:
                continue
            epochs = np.arange(1, values.shape[1] + 1)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN epochs
                mean = np.nanmean(values, axis=0)
                lo, hi = np.nanmin(values, axis=0), np.nanmax(values, axis=0)
            c = colors[a.activation]
            ax.fill_between(epochs, lo, hi, color=c, alpha=0.18, linewidth=0)
            ax.plot(epochs, mean, color=c, linewidth=1.8,
                    label=f"{a.activation} (mean of {a.n} seeds)")
        if key == "val_accuracy" and threshold is not None:
            ax.axhline(threshold, color="0.4", linestyle="--", linewidth=0.9,
                       label=f"threshold {threshold:g}")
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # no epoch 1.2
        ax.set_xlabel("epoch")
        ax.set_ylabel(label)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8, loc="lower right" if panels[0][0] == "val_accuracy" else "best")
    fig.suptitle("Learning curves: mean over seeds, band = min–max", fontsize=11)
    fig.tight_layout()
    return fig


def _per_seed(summary, results, colors):
    """The compared metric per seed and, beside it, the paired differences."""
    shown = wording.shown(summary.metric.name)
    scale, unit = shown.kind.scale, " (%)" if shown.kind.percent else ""
    names = [a.activation for a in summary.activations]
    table = {(r.activation, r.seed): getattr(r, summary.metric.name) for r in results}
    seeds = sorted({r.seed for r in results})
    has_diffs = bool(summary.comparisons)
    # Side by side for a few activations, stacked for many.
    stacked = has_diffs and len(names) > 3
    panel_w = max(5.5, 1.2 * len(names) + 2)
    if stacked:
        fig = _figure(panel_w, 8.4)
        axes = fig.subplots(2, 1)
    else:
        fig = _figure(2 * panel_w if has_diffs else panel_w, 4.6)
        axes = fig.subplots(1, 2 if has_diffs else 1, squeeze=False)[0]
    rotate = dict(rotation=15, ha="right") if sum(map(len, names)) > 7 * panel_w else {}
    ax = axes[0]
    # Spread seeds a little along x so overlapping (discrete) accuracies and
    # their connecting lines stay visible.
    offsets = np.linspace(-0.12, 0.12, len(seeds)) if len(seeds) > 1 else np.zeros(1)
    for off, s in zip(offsets, seeds):
        xs = [i + off for i, n in enumerate(names) if (n, s) in table]
        ys = [scale * table[(n, s)] for n in names if (n, s) in table]
        ax.plot(xs, ys, color="0.6", linewidth=0.8, alpha=0.7, zorder=1)
    for i, a in enumerate(summary.activations):
        pts = [(i + off, scale * table[(a.activation, s)])
               for off, s in zip(offsets, seeds) if (a.activation, s) in table]
        ax.scatter([p[0] for p in pts], [p[1] for p in pts], s=22, color=colors[a.activation],
                   edgecolor="white", linewidth=0.5, zorder=2)
        e = a.estimate
        _mean_bar(ax, i + 0.3, scale * e.mean, scale * e.ci_low, scale * e.ci_high)
    ax.set_xticks(range(len(names)), names, **rotate)
    ax.set_xlim(-0.5, len(names) - 0.3)
    ax.set_ylabel(f"{shown.label}{unit}")
    ax.set_title(f"Per seed (lines join a seed); black: mean, {summary.confidence:.0%} CI",
                 fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    if has_diffs:
        ax = axes[1]
        ax.axhline(0.0, color="0.3", linewidth=0.9)
        for i, c in enumerate(summary.comparisons):
            diffs = [scale * (table[(c.activation, s)] - table[(c.baseline, s)])
                     for s in c.paired.seeds]
            xs = i + np.linspace(-0.12, 0.12, len(diffs)) if len(diffs) > 1 else [i]
            ax.scatter(xs, diffs, s=22, color=colors[c.activation], edgecolor="white",
                       linewidth=0.5, zorder=2)
            t = c.paired
            _mean_bar(ax, i + 0.3, scale * t.mean_diff, scale * t.ci_low, scale * t.ci_high)
        label = "Holm p" if summary.holm else "p"
        ax.set_xticks(range(len(summary.comparisons)),
                      [f"{c.activation}\n{label}{wording.p_equals(c.p_holm)}"
                       for c in summary.comparisons], **rotate)
        ax.set_xlim(-0.5, len(summary.comparisons) - 0.3)
        diff_unit = " (pp)" if shown.kind.percent else ""
        ax.set_ylabel(f"Δ {shown.label} vs {summary.baseline}{diff_unit}")
        ax.set_title("Paired differences per seed; black: mean, CI", fontsize=10)
        ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    return fig


def _mean_bar(ax, x, mean, lo, hi):
    if math.isfinite(lo) and math.isfinite(hi):
        ax.errorbar([x], [mean], yerr=[[mean - lo], [hi - mean]], fmt="D", color="black",
                    markersize=5, capsize=4, linewidth=1.2, zorder=3)
    elif math.isfinite(mean):
        ax.plot([x], [mean], "D", color="black", markersize=5, zorder=3)


def predict_proba(model, x, batch_size=_BATCH):
    """Class probabilities [N, C] of a Keras model, in batches, as numpy."""
    import keras

    parts = []
    for start in range(0, len(x), batch_size):
        chunk = keras.ops.convert_to_tensor(x[start:start + batch_size], dtype="float32")
        parts.append(np.asarray(keras.ops.convert_to_numpy(model(chunk, training=False))))
    probs = np.concatenate(parts, axis=0).astype(float)
    return probs.reshape(len(x), -1)


def _decision_boundaries(summary, results, dataset):
    if dataset is None or int(dataset.input_dim) != 2:
        return None
    by_key = {(r.activation, r.seed): r for r in results}
    panels = [(a, by_key.get((a.activation, a.best_seed))) for a in summary.activations]
    panels = [(a, r) for a, r in panels if r is not None and r.model is not None]
    if not panels:
        return None
    x_test = np.asarray(dataset.x_test, dtype=np.float32)
    y_test = _labels(dataset.y_test)
    x_all = np.concatenate([np.asarray(dataset.x_train, dtype=np.float32), x_test])
    lo, hi = x_all.min(axis=0), x_all.max(axis=0)
    pad = 0.08 * (hi - lo) + 1e-6
    g0 = np.linspace(lo[0] - pad[0], hi[0] + pad[0], _GRID)
    g1 = np.linspace(lo[1] - pad[1], hi[1] + pad[1], _GRID)
    xx, yy = np.meshgrid(g0, g1)
    grid = np.stack([xx.ravel(), yy.ravel()], axis=1).astype(np.float32)

    cols = min(len(panels), 3)
    rows = math.ceil(len(panels) / cols)
    # Panels as tall as the data's aspect makes them (equal axes), laid out
    # by constrained layout: fixed 4-inch squares with tight_layout left a
    # wide empty band under the title.
    ratio = float(np.clip((g1[-1] - g1[0]) / (g0[-1] - g0[0]), 0.4, 2.5))
    fig = _figure(3.8 * cols + 1.0, (3.1 * ratio + 0.9) * rows + 0.3, layout="constrained")
    names = tuple(getattr(dataset, "feature_names", ()) or ())
    xlabel, ylabel = (f"feature {n}" for n in (names if len(names) == 2 else ("1", "2")))
    axes = np.atleast_1d(fig.subplots(rows, cols, squeeze=False)).ravel()
    mappable = None
    for ax, (a, r) in zip(axes, panels):
        probs = predict_proba(r.model, grid)
        test_pred = predict_proba(r.model, x_test)
        if probs.shape[1] <= 2:
            p1 = probs[:, -1].reshape(xx.shape)
            mappable = ax.contourf(xx, yy, p1, levels=np.linspace(0, 1, 11),
                                   cmap="RdBu_r", alpha=0.5, vmin=0, vmax=1)
            ax.contour(xx, yy, p1, levels=[0.5], colors="black", linewidths=1.2)
            pred = (test_pred[:, -1] >= 0.5).astype(int)
        else:
            cls = probs.argmax(axis=1).reshape(xx.shape)
            ax.contourf(xx, yy, cls, levels=np.arange(probs.shape[1] + 1) - 0.5,
                        cmap="tab10", alpha=0.35)
            pred = test_pred.argmax(axis=1)
        right = pred == y_test
        ax.scatter(x_test[right, 0], x_test[right, 1], c=y_test[right], cmap="coolwarm",
                   vmin=0, vmax=max(1, y_test.max()), s=12, edgecolor="white",
                   linewidth=0.4)
        ax.scatter(x_test[~right, 0], x_test[~right, 1], c="yellow", marker="X", s=30,
                   edgecolor="black", linewidth=0.5, label=f"misclassified ({(~right).sum()})")
        ax.set_title(f"{a.activation}, seed {r.seed}: val {100 * r.val_accuracy:.1f}%, "
                     f"test {100 * r.test_accuracy:.1f}%", fontsize=10)
        ax.set_xlim(g0[0], g0[-1])
        ax.set_ylim(g1[0], g1[-1])
        ax.set_aspect("equal", adjustable="box")
        ax.set_xlabel(xlabel, fontsize=9)
        ax.set_ylabel(ylabel, fontsize=9)
        ax.tick_params(labelsize=8)
        ax.legend(fontsize=7, loc="lower left", framealpha=0.8)
    for ax in axes[len(panels):]:
        ax.set_visible(False)
    fig.suptitle("Decision boundaries of each activation's best-validation seed, "
                 "test points overlaid", fontsize=11)
    if mappable is not None:
        fig.colorbar(mappable, ax=list(axes[:len(panels)]), shrink=0.8,
                     label="P(class 1)", pad=0.02)
    return fig


def _entropy_grid(result):
    """[blocks, heads] of a member's last-epoch attention entropy (nats)."""
    cells = {}
    for key, values in result.history.items():
        if key.startswith("entropy.block") and values:
            block, head = key[len("entropy.block"):].split(".head")
            cells[(int(block), int(head))] = values[-1]
    if not cells:
        return None
    grid = np.full((1 + max(b for b, _ in cells), 1 + max(h for _, h in cells)), np.nan)
    for (b, h), value in cells.items():
        grid[b, h] = value
    return grid


def _attention_entropy(summary, results):
    """One heatmap (block x head) per activation, at its best seed."""
    panels = []
    for a in summary.activations:
        best = [r for r in results if r.activation == a.activation and r.seed == a.best_seed]
        grid = _entropy_grid(best[0]) if best else None
        if grid is not None:
            panels.append((a.activation, a.best_seed, grid))
    if not panels:
        return None
    top = max(np.nanmax(g) for _, _, g in panels)
    # A grid of at most 4 panels a row (one row of 8 was a 27-inch strip),
    # each sized by its heads and blocks; labels on the outer panels only.
    blocks, heads = np.max([g.shape for _, _, g in panels], axis=0)
    cols = min(len(panels), 4)
    rows = math.ceil(len(panels) / cols)
    width = max(2.2, 0.45 * heads + 1.0)
    height = max(2.1, 0.45 * blocks + 0.9)
    fig = _figure(width * cols + 1.2, height * rows + 0.7, layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False)
    for i, (ax, (name, seed, grid)) in enumerate(zip(axes.ravel(), panels)):
        image = ax.imshow(grid, vmin=0, vmax=top, cmap="viridis", aspect="auto")
        ax.set_title(f"{name}, seed {seed}", fontsize=9)
        ax.set_xticks(range(grid.shape[1]))
        ax.set_yticks(range(grid.shape[0]))
        ax.tick_params(labelsize=8)
        if i // cols == rows - 1 or i + cols >= len(panels):
            ax.set_xlabel("head", fontsize=9)
        if i % cols == 0:
            ax.set_ylabel("block", fontsize=9)
    for ax in axes.ravel()[len(panels):]:
        ax.set_visible(False)
    fig.colorbar(image, ax=axes.ravel().tolist(), shrink=0.9, label="entropy (nats)")
    fig.suptitle("Attention entropy after training, best-validation seeds\n(mean over "
                 "queries of a fixed validation batch)", fontsize=10)
    return fig


def _leaky_slopes(summary, results, colors):
    """Each learnable leaky ReLU block's slope over epochs, every seed."""
    series = sorted(
        (int(key[len("leaky_slope.block"):]), r.seed, r.activation, values)
        for r in results for key, values in r.history.items()
        if key.startswith("leaky_slope.block") and values
    )
    if not series:
        return None
    # Colour: the block; line style and marker: the seed. Lines that
    # coincide stay told apart by their markers and the legend.
    block_colors = matplotlib.colormaps["tab10"]
    seeds = sorted({seed for _, seed, _, _ in series})
    styles = ["-", "--", ":", "-."]
    markers = ["o", "s", "^", "D", "v", "P"]
    several = len({a for _, _, a, _ in series}) > 1
    fig = _figure(8.5, 4.4, layout="constrained")
    ax = fig.subplots()
    for block, seed, activation, values in series:
        k = seeds.index(seed)
        label = f"block {block}, seed {seed}" + (f" ({activation})" if several else "")
        ax.plot(np.arange(1, len(values) + 1), values, color=block_colors(block % 10),
                linestyle=styles[k % len(styles)], marker=markers[k % len(markers)],
                markersize=4, linewidth=1.2, alpha=0.85, label=label)
    ax.axhline(0.01, color="0.5", linestyle="--", linewidth=0.8, label="initial slope 0.01")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("epoch")
    ax.set_ylabel("negative slope")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5),
              ncols=1 + len(series) // 14)
    ax.set_title("Learnable leaky ReLU: negative slope per block and seed", fontsize=11)
    return fig


def _labels(y):
    y = np.asarray(y)
    return y.argmax(axis=1) if y.ndim == 2 else y.astype(int)


def activation_curve(name):
    """(label, f, is_gate) for plotting `name` as a scalar function.

    Elementwise names plot themselves; gated names plot their gate
    ("geglu gate: gelu"); learnable_leaky_relu plots leaky ReLU at its
    initial slope 0.01. Returns None for names it cannot plot.
    """
    import keras_gelu
    from keras_gelu import activations as acts

    try:
        entry_kind = acts.kind(name)
    except ValueError:
        entry_kind = None
    if entry_kind == "gated":
        gate = acts.gate_function(name)
        return f"{name} gate: {getattr(gate, '__name__', 'gate')}", gate, True
    if entry_kind == "layer":
        return (f"{name}: leaky relu, initial slope 0.01",
                lambda x: keras_gelu.leaky_relu(x, negative_slope=0.01), False)
    try:
        f = keras_gelu.get(name)
    except ValueError:
        return None
    return (name, f, False) if callable(f) else None


def _activation_curves(summary, colors):
    import keras

    x = np.linspace(-4.0, 4.0, 801)
    xt = keras.ops.convert_to_tensor(x.astype(np.float32))
    curves = []
    for a in summary.activations:
        spec = activation_curve(a.activation)
        if spec is None:
            continue
        label, f, is_gate = spec
        y = np.asarray(keras.ops.convert_to_numpy(f(xt)), dtype=float)
        curves.append((a.activation, label, y, np.gradient(y, x), is_gate))
    if not curves:
        return None
    fig = _figure(11, 4.2)
    axes = fig.subplots(1, 2)
    for name, label, y, dy, is_gate in curves:
        style = dict(color=colors[name], linewidth=1.8, linestyle="--" if is_gate else "-",
                     label=label)
        axes[0].plot(x, y, **style)
        axes[1].plot(x, dy, **style)
    for ax, ylabel in ((axes[0], "f(x)"), (axes[1], "df/dx (finite differences)")):
        ax.axhline(0, color="0.5", linewidth=0.6)
        ax.axvline(0, color="0.5", linewidth=0.6)
        ax.set_xlabel("x")
        ax.set_ylabel(ylabel)
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=8, loc="upper left")
    fig.suptitle("The activations compared (gated units: their gate function)", fontsize=11)
    fig.tight_layout()
    return fig
