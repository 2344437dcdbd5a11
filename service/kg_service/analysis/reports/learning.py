"""The learning curves: each activation's validation metrics per epoch, the
mean over seeds with a min-max band; overlaid on one axis for a few
activations, as small multiples (one panel per activation, shared axes)
when more than `OVERLAID_AT_MOST` would overlap (issue 34 §2)."""

import warnings

import numpy as np
from matplotlib.ticker import MaxNLocator

from kg_service.analysis.reports.canvas import blank_figure
from kg_service.analysis.words import wording

def stack(results, key):
    """[seeds, epochs] array of one history key, NaN-padded to the longest run."""
    series = [np.asarray(r.history.get(key, []), dtype=float) for r in results]
    length = max((len(s) for s in series), default=0)
    out = np.full((len(series), length), np.nan)
    for i, s in enumerate(series):
        out[i, : len(s)] = s
    return out


def curve_panels(summary, results):
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


OVERLAID_AT_MOST = 4  # more activations than this: one panel each


def _band(values):
    """(epochs, mean, min, max) over seeds of a [seeds, epochs] array."""
    epochs = np.arange(1, values.shape[1] + 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN epochs
        return (epochs, np.nanmean(values, axis=0), np.nanmin(values, axis=0),
                np.nanmax(values, axis=0))


def _members(results, activation, key):
    return stack([r for r in results if r.activation == activation], key)


def _finish_axis(ax, key, label, threshold):
    if key == "val_accuracy" and threshold is not None:
        ax.axhline(threshold, color="0.4", linestyle="--", linewidth=0.9,
                   label=f"threshold {threshold:g}")
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # no epoch 1.2
    ax.grid(alpha=0.3)


def learning_curves(summary, results, colors, threshold=None, panels=None):
    """Both panels' curves, every activation on one axis each; small
    multiples instead when more than `OVERLAID_AT_MOST` activations."""
    panels = panels or curve_panels(summary, results)
    if len(summary.activations) > OVERLAID_AT_MOST:
        return small_multiples(summary, results, colors, threshold, panels)
    fig = blank_figure(11, 4.2)
    axes = fig.subplots(1, 2)
    for ax, (key, label) in zip(axes, panels):
        for a in summary.activations:
            values = _members(results, a.activation, key)
            if values.size == 0:
                continue
            epochs, mean, lo, hi = _band(values)
            c = colors[a.activation]
            ax.fill_between(epochs, lo, hi, color=c, alpha=0.18, linewidth=0)
            ax.plot(epochs, mean, color=c, linewidth=1.8,
                    label=f"{a.activation} (mean of {a.n} seeds)")
        _finish_axis(ax, key, label, threshold)
        ax.set_xlabel("epoch")
        ax.set_ylabel(label)
    axes[0].legend(fontsize=8, loc="lower right" if panels[0][0] == "val_accuracy" else "best")
    fig.suptitle("Learning curves: mean over seeds, band = min–max", fontsize=11)
    fig.tight_layout()
    return fig


def small_multiples(summary, results, colors, threshold, panels, columns=4):
    """One panel per activation and metric, on shared axes per metric: each
    activation's band and mean, the baseline's mean as a grey dashed line
    in every panel to compare against; the activation is the panel's title,
    so no legend lies over the data."""
    names = [a.activation for a in summary.activations]
    n_rows = -(-len(names) // columns)
    fig = blank_figure(2.6 * columns + 0.6, 2.1 * n_rows * len(panels) + 0.8)
    grids = fig.subfigures(len(panels), 1)
    for grid, (key, label) in zip(np.atleast_1d(grids), panels):
        axes = grid.subplots(n_rows, columns, sharex=True, sharey=True, squeeze=False)
        base = _members(results, summary.baseline, key)
        for ax, a in zip(axes.flat, summary.activations):
            values = _members(results, a.activation, key)
            if base.size:
                epochs, mean, _, _ = _band(base)
                ax.plot(epochs, mean, color="0.45", linestyle="--", linewidth=1.0)
            if values.size:
                epochs, mean, lo, hi = _band(values)
                ax.fill_between(epochs, lo, hi, color=colors[a.activation], alpha=0.25,
                                linewidth=0)
                ax.plot(epochs, mean, color=colors[a.activation], linewidth=1.6)
            _finish_axis(ax, key, label, threshold)
            ax.set_title(f"{a.activation} ({a.n} seeds)", fontsize=9)
        for ax in axes.flat[len(names):]:
            ax.set_visible(False)
        for ax in axes[:, 0]:
            ax.set_ylabel(label, fontsize=8)
        for ax in axes[-1, :]:
            ax.set_xlabel("epoch", fontsize=8)
    fig.suptitle(f"Learning curves, one panel per activation (mean over seeds, band = "
                 f"min–max; dashed: the baseline {summary.baseline}'s mean)", fontsize=11)
    return fig
