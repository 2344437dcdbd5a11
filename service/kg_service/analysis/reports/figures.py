"""The sweep report's PNG figures, one function each, and the table of their names.

A task names the figures its report shows (`Task.figures`); `FIGURES` maps
each name to the function that draws it, and `draw_figures` saves those
asked for. Figures use matplotlib's object API on the Agg canvas (no
pyplot, so no global backend or figure state). The numbers come from
`kg_service.analysis.numbers.comparisons`, the labels from
`kg_service.analysis.words.wording`, and what a model or an activation computes
from `kg_service.analysis.reports.evaluate` (the only figures that need Keras).
"""

import dataclasses
import math

import matplotlib
import numpy as np
from matplotlib.ticker import MaxNLocator

from kg_service.analysis.reports import evaluate
from kg_service.analysis.reports.canvas import DPI  # noqa: F401 (the figures' DPI, public here too)
from kg_service.analysis.reports.canvas import blank_figure
from kg_service.analysis.reports.canvas import save
from kg_service.analysis.reports.learning import curve_panels
from kg_service.analysis.reports.learning import learning_curves
from kg_service.analysis.words import wording

LEARNING_CURVES = "learning_curves.png"
DECISION_BOUNDARIES = "decision_boundaries.png"
ACTIVATION_CURVES = "activation_curves.png"
ATTENTION_ENTROPY = "attention_entropy.png"
LEAKY_SLOPES = "leaky_slopes.png"

_GRID = 150  # decision-boundary grid points per axis


@dataclasses.dataclass(frozen=True)
class FigureContext:
    summary: object
    results: list
    dataset: object
    colors: dict
    threshold: object  # convergence threshold, or None
    # result -> the split that member trained and was tested on (issue 30
    # §5); None where it cannot be told. Default: `dataset` for every member.
    member_data: object = None


def _learning_curves_figure(ctx):
    panels = curve_panels(ctx.summary, ctx.results)
    return (LEARNING_CURVES, f"{panels[0][1].capitalize()} and {panels[1][1]} per epoch",
            learning_curves(ctx.summary, ctx.results, ctx.colors, ctx.threshold, panels))


def _per_seed_figure(ctx):
    label = wording.shown(ctx.summary.metric.name).label
    return (per_seed_file(ctx.summary), f"{label.capitalize()} per seed",
            per_seed(ctx.summary, ctx.results, ctx.colors))


def _decision_boundaries_figure(ctx):
    return (DECISION_BOUNDARIES, "Decision boundaries of the best-validation seeds",
            decision_boundaries(ctx.summary, ctx.results, ctx.dataset, ctx.member_data))


def _activation_curves_figure(ctx):
    return (ACTIVATION_CURVES, "The activation functions and their derivatives",
            activation_curves(ctx.summary, ctx.colors))


def _attention_entropy_figure(ctx):
    return (ATTENTION_ENTROPY, "Attention entropy per layer and head, best-validation seeds",
            attention_entropy(ctx.summary, ctx.results))


def _leaky_slopes_figure(ctx):
    return (LEAKY_SLOPES, "Learnable leaky ReLU slope per block over training",
            leaky_slopes(ctx.summary, ctx.results, ctx.colors))


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


def draw_figures(names, out, summary, results, *, dataset=None, threshold=None,
                 member_data=None):
    """Draws the figures named in `names` and saves them into the folder `out`.

    Args:
        names: keys of `FIGURES` (a task's `figures`); drawn in `FIGURES`
            order, each skipped when it has nothing to show; and a task's
            own figures, functions as `FIGURES`' (context -> (file name,
            alt text, Figure or None)), drawn after them.
        out: a `pathlib.Path` to an existing folder.
        summary: a `comparisons.Summary` of `results`.
        results: the `MemberResult` list the summary was computed from.
        dataset: optional data set of the sweep (decision boundaries).
        threshold: the convergence threshold drawn on the learning
            curves, or None.
        member_data: result -> that member's own split (or None where it
            cannot be told); default: `dataset` for every member.

    Returns:
        `(file name, alt text)` of each figure saved, in report order.

    Raises:
        ValueError: a name that `FIGURES` does not know.
    """
    context = FigureContext(summary=summary, results=list(results), dataset=dataset,
                            colors=activation_colors(summary), threshold=threshold,
                            member_data=member_data)
    own = [draw for draw in names if callable(draw)]  # a task's own figures, drawn last
    names = {name for name in names if not callable(name)}
    unknown = sorted(names - set(FIGURES))
    if unknown:
        raise ValueError(f"unknown report figures {unknown}; known: {list(FIGURES)}")
    drawn = [FIGURES[name](context) for name in FIGURES if name in names]
    drawn += [draw(context) for draw in own]
    return [(name, alt) for name, alt, fig in drawn if save(fig, out / name)]


def per_seed_file(summary):
    """The per-seed figure's file name: test_accuracy_per_seed.png."""
    return f"{summary.metric.name}_per_seed.png"


def activation_colors(summary):
    """One tab10 colour per activation, in the summary's order."""
    cmap = matplotlib.colormaps["tab10"]
    return {a.activation: cmap(i % 10) for i, a in enumerate(summary.activations)}


def per_seed(summary, results, colors):
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
        fig = blank_figure(panel_w, 8.4)
        axes = fig.subplots(2, 1)
    else:
        fig = blank_figure(2 * panel_w if has_diffs else panel_w, 4.6)
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


def decision_boundaries(summary, results, dataset, member_data=None):
    """Each activation's best-validation member's decision regions, with the
    test points of that member's own split (issue 30 §5: with `vary: split`
    each member has its own); a member whose split cannot be told gets no
    panel rather than another split's points."""
    if dataset is None or int(dataset.input_dim) != 2:
        return None
    own = member_data or (lambda r: dataset)
    by_key = {(r.activation, r.seed): r for r in results}
    panels = [(a, by_key.get((a.activation, a.best_seed))) for a in summary.activations]
    panels = [(a, r, own(r)) for a, r in panels if r is not None and r.model is not None]
    panels = [(a, r, d) for a, r, d in panels if d is not None]
    if not panels:
        return None
    x_all = np.concatenate([np.asarray(x, dtype=np.float32) for *_, d in panels
                            for x in (d.x_train, d.x_test)])
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
    fig = blank_figure(3.8 * cols + 1.0, (3.1 * ratio + 0.9) * rows + 0.3, layout="constrained")
    names = tuple(getattr(dataset, "feature_names", ()) or ())
    xlabel, ylabel = (f"feature {n}" for n in (names if len(names) == 2 else ("1", "2")))
    axes = np.atleast_1d(fig.subplots(rows, cols, squeeze=False)).ravel()
    mappable = None
    for ax, (a, r, data) in zip(axes, panels):
        x_test = np.asarray(data.x_test, dtype=np.float32)
        y_test = _labels(data.y_test)
        probs = evaluate.predict_proba(r.model, grid)
        test_pred = evaluate.predict_proba(r.model, x_test)
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
                   edgecolor="black", linewidth=0.5, label=f"misclassified ({(~right).sum()} of {len(right)})")
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


def attention_entropy(summary, results):
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
    fig = blank_figure(width * cols + 1.2, height * rows + 0.7, layout="constrained")
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


def leaky_slopes(summary, results, colors):
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
    fig = blank_figure(8.5, 4.4, layout="constrained")
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


def activation_curves(summary, colors):
    """Each activation (a gated unit: its gate) and its derivative on [-4, 4]."""
    x = np.linspace(-4.0, 4.0, 801)
    curves = evaluate.activation_values([a.activation for a in summary.activations], x)
    if not curves:
        return None
    fig = blank_figure(11, 4.2)
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
