"""A tuning stage's numbers and its part of the report (issue 19).

Each activation's candidates (a value of the tuned setting, with the
validation scores of its tuning members; which values: `Search`), the
choice among them (`choose`, `choice`) and its JSON form, and the
report's tuning section: a table per activation (value -> mean validation
score ± sd over the tuning seeds), the value each got, a figure of the
curves, and an entry of summary.json. Pure but for `Search` (Optuna's
study), `tuning_section` (draws the figure) and `add_tuning_summary`.
"""

import dataclasses
import json
import math
import pathlib

import numpy as np

from kg_service.analysis.reports import page
from kg_service.config import tuning as config_tuning
from kg_service.errors import ServiceError

HEADING = "Tuning"
FIGURE = "tuning_curves.png"
FIGURE_ALT = "Tuning curves: the mean validation score of each value tried, the chosen value starred"


@dataclasses.dataclass(frozen=True)
class Candidate:
    """One value of the tuned setting, for one activation."""

    value: float
    scores: tuple  # the validation score of each member that did not diverge
    failed: int = 0  # members that diverged (loss not finite)

    @property
    def mean(self):
        return float(np.mean(self.scores)) if self.scores else math.nan

    @property
    def sd(self):
        """Sample standard deviation over the tuning seeds (nan for one)."""
        return float(np.std(self.scores, ddof=1)) if len(self.scores) > 1 else math.nan


@dataclasses.dataclass(frozen=True)
class ActivationTuning:
    activation: str
    candidates: tuple  # Candidate, in the order they trained
    chosen: float


@dataclasses.dataclass(frozen=True)
class Tuning:
    """What a tuning stage found: each activation's candidates and choice."""

    parameter: str  # "training.learning_rate"
    select_by: str  # "val_loss" or "val_accuracy"
    higher_is_better: bool
    seeds: int  # tuning seeds per candidate
    activations: tuple  # ActivationTuning, config order

    def chosen(self):
        """`{activation: chosen value}`."""
        return {a.activation: a.chosen for a in self.activations}


def choose(candidates, higher_is_better):
    """The index of the best candidate, or None if every member of every
    candidate diverged.

    Best: the best mean validation score over its members; a candidate
    with a diverged member ranks after every candidate without one (a
    value that diverges on some seed is not one to compare at); ties go to
    the earlier candidate.

    >>> choose([Candidate(1e-3, (0.5, 0.7)), Candidate(3e-3, (0.4, 0.4))], False)
    1
    """
    usable = [i for i, c in enumerate(candidates) if c.scores]
    if not usable:
        return None
    sign = -1.0 if higher_is_better else 1.0
    return min(usable, key=lambda i: (candidates[i].failed > 0, sign * candidates[i].mean, i))


def score(result, select_by):
    """A member's validation score: its final epoch's `select_by`, or None
    if it diverged."""
    return getattr(result, select_by) if result.ok else None


def candidate(value, results, select_by):
    """The `Candidate` of `value` from its members' `MemberResult`s."""
    scores = tuple(float(score(r, select_by)) for r in results if r.ok)
    return Candidate(value=value, scores=scores, failed=sum(not r.ok for r in results))


def choice(activation, candidates, tuning):
    """The `ActivationTuning` of `activation`: its best candidate (`choose`)
    by the tuning block's `select_by`.

    Raises:
        ServiceError: every member of every candidate diverged.
    """
    best = choose(candidates, config_tuning.SELECT_BY[tuning.select_by])
    if best is None:
        raise ServiceError(
            f"every tuning member of {activation} diverged (loss not finite) at every "
            f"{tuning.parameter} tried; no value can be chosen. They are logged as FAILED "
            "runs. Tune over a safer range."
        )
    return ActivationTuning(
        activation=activation, candidates=candidates, chosen=candidates[best].value
    )


def outcome(tuning, per_activation):
    """The `Tuning` of a tuning block, from each activation's choice."""
    return Tuning(
        parameter=tuning.parameter,
        select_by=tuning.select_by,
        higher_is_better=config_tuning.SELECT_BY[tuning.select_by],
        seeds=tuning.seeds,
        activations=tuple(per_activation),
    )


def choice_as_dict(chosen):
    """An `ActivationTuning` as JSON (floats' repr: read back exactly)."""
    return {
        "activation": chosen.activation,
        "chosen": chosen.chosen,
        "candidates": [
            {"value": c.value, "scores": [float(x) for x in c.scores], "failed": c.failed}
            for c in chosen.candidates
        ],
    }


def choice_from_dict(data, activation, run_id):
    """The `ActivationTuning` that `choice_as_dict` wrote, claimed for
    `activation` on the sweep's run `run_id`.

    Raises:
        ServiceError: it is another activation's (another sweep's choices).
    """
    if data["activation"] != activation:
        raise ServiceError(
            f"the sweep's run {run_id} holds a tuning choice for {data['activation']!r} "
            f"where this config has {activation!r}; the store holds another sweep's "
            "choices. Start the sweep afresh (without --resume, or another --sweep-id)."
        )
    return ActivationTuning(
        activation=activation,
        candidates=tuple(
            Candidate(c["value"], tuple(c["scores"]), c["failed"]) for c in data["candidates"]
        ),
        chosen=data["chosen"],
    )


class Search:
    """The candidates of one activation, in order: a grid's values, or
    Optuna's TPE asked one trial at a time and told each trial's mean score.

    TPE's sampler is seeded, so a resumed sweep, told the same scores, asks
    the same values again and finds their members in the store.
    """

    def __init__(self, tuning, kind):
        self.tuning, self.kind = tuning, kind
        self.values = config_tuning.grid(tuning, kind)
        self.study = self.trial = None
        if self.values is None:
            import optuna  # only a range searched by TPE needs it

            optuna.logging.set_verbosity(optuna.logging.WARNING)
            higher = config_tuning.SELECT_BY[tuning.select_by]
            # Half the budget random, then TPE (Optuna's default, 10 random
            # trials, would leave a budget of 6 random search).
            sampler = optuna.samplers.TPESampler(
                seed=0, n_startup_trials=max(1, tuning.trials // 2)
            )
            self.study = optuna.create_study(
                direction="maximize" if higher else "minimize", sampler=sampler
            )
            if kind is int:
                low, high = math.ceil(tuning.low), math.floor(tuning.high)
                self.space = optuna.distributions.IntDistribution(low, high, log=tuning.log)
            else:
                self.space = optuna.distributions.FloatDistribution(
                    tuning.low, tuning.high, log=tuning.log
                )

    def __iter__(self):
        if self.values is not None:
            yield from enumerate(self.values)
            return
        for index in range(self.tuning.trials):
            self.trial = self.study.ask({"value": self.space})
            yield index, self.trial.params["value"]

    def tell(self, candidate):
        if self.study is None:
            return
        import optuna  # optuna: only for a tuned sweep

        if candidate.failed or not candidate.scores:
            self.study.tell(self.trial, state=optuna.trial.TrialState.FAIL)
        else:
            self.study.tell(self.trial, candidate.mean)


# --- The report's part. ------------------------------------------------------


def _label(select_by):
    return {"val_loss": "validation loss", "val_accuracy": "validation accuracy"}[select_by]


def _number(x):
    return "–" if math.isnan(x) else f"{x:.4f}"


def tuning_blocks(tuning):
    """The report's tuning section's text and table (`page` blocks, without
    the heading): each activation's values in increasing order."""
    better = "highest" if tuning.higher_is_better else "lowest"
    rows = []
    for a in tuning.activations:
        for c in sorted(a.candidates, key=lambda c: c.value):  # TPE's trials: by value too
            n = f"{len(c.scores)}" + (f" ({c.failed} diverged)" if c.failed else "")
            rows.append([a.activation, f"{c.value:g}", f"{_number(c.mean)} ± {_number(c.sd)}",
                         n, "**chosen**" if c.value == a.chosen else ""])
    return [
        page.Paragraph(
            f"Before the comparison, each activation's `{tuning.parameter}` was chosen by "
            f"the {better} mean final {_label(tuning.select_by)} over {tuning.seeds} tuning "
            f"seed{'s' if tuning.seeds > 1 else ''} per value (their own seeds, none shared "
            "with the comparison's; the test split plays no part). The comparison above "
            "trained every activation at its chosen value."),
        page.table(["activation", tuning.parameter, f"mean {tuning.select_by} ± sd",
                    "members", "chosen"], rows, left=True),
        page.Paragraph("Chosen: " + "; ".join(
            f"{a.activation} {tuning.parameter} = {a.chosen:g}"
            for a in tuning.activations) + "."),
    ]


def tuning_summary(tuning):
    """summary.json's "tuning" entry: plain numbers."""
    def plain(x):
        return None if math.isnan(x) else x

    return {
        "parameter": tuning.parameter,
        "select_by": tuning.select_by,
        "seeds": tuning.seeds,
        "chosen": tuning.chosen(),
        "candidates": {
            a.activation: [
                {"value": c.value, "mean": plain(c.mean), "sd": plain(c.sd),
                 "members": len(c.scores), "diverged": c.failed}
                for c in a.candidates
            ]
            for a in tuning.activations
        },
    }


def tuning_tags(tuning):
    """Each activation's chosen value, as tags on the sweep's run."""
    return {f"tuning.{a.activation}.{tuning.parameter}": f"{a.chosen:g}"
            for a in tuning.activations}


def _one_value_axis(ax, value):
    """The x axis of a tuning that tried one value: that value written, not
    an axis of ticks spanning a rounding error around it (issue 34 §2)."""
    half = abs(value) or 1.0
    ax.set_xlim(value - half, value + half)
    ax.set_xticks([value], [f"one value: {value:g}"])


def draw_curves(tuning, path):
    """tuning_curves.png: mean score ± sd against the value, one line per
    activation, the chosen values marked; a log x axis for positive values
    spanning more than a factor of ten; one value tried: that value named
    on the axis, no scale drawn around it. Returns the figure."""
    from kg_service.analysis.reports.canvas import blank_figure  # matplotlib: the figure only

    fig = blank_figure(6, 4)
    ax = fig.subplots()
    values = [c.value for a in tuning.activations for c in a.candidates]
    for a in tuning.activations:
        shown = sorted(a.candidates, key=lambda c: c.value)
        x = [c.value for c in shown]
        y = [c.mean for c in shown]
        err = [0.0 if math.isnan(c.sd) else c.sd for c in shown]
        line = ax.errorbar(x, y, yerr=err, marker="o", capsize=3, label=a.activation)
        best = [c for c in shown if c.value == a.chosen]
        ax.plot([best[0].value], [best[0].mean], marker="*", markersize=14,
                color=line[0].get_color(), linestyle="none")
    if len(set(values)) == 1:
        _one_value_axis(ax, values[0])
    elif min(values) > 0 and max(values) / min(values) > 10:
        ax.set_xscale("log")
    ax.set_xlabel(tuning.parameter + (" (one value tried)" if len(set(values)) == 1 else ""))
    ax.set_ylabel(f"mean final {_label(tuning.select_by)} (± sd)")
    ax.set_title("Tuning (★ the value each activation got)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(path)
    return fig


def tuning_section(tuning, out_dir):
    """The report's tuning section (a `page.Section`), its figure drawn into
    `out_dir`; returns (section, the figure's path)."""
    pathlib.Path(out_dir).mkdir(parents=True, exist_ok=True)
    figure = pathlib.Path(out_dir) / FIGURE
    draw_curves(tuning, figure)
    return (page.Section(HEADING, (*tuning_blocks(tuning), page.Figure(FIGURE, FIGURE_ALT))),
            figure)


def add_tuning_summary(summary_path, tuning):
    """Adds the tuning's entry to summary.json ("tuning")."""
    data = json.loads(summary_path.read_text())
    data["tuning"] = tuning_summary(tuning)
    summary_path.write_text(json.dumps(data, indent=2, allow_nan=False) + "\n")
