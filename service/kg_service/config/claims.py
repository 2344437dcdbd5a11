"""`claims:` what a sweep (or a study's sweeps) claims, declared before
anything trains (issue 32 §1).

Each claim names what it compares (`pair: [a, b]`, a declared `contrast`
of `analysis.contrasts`, or an `interaction: [a, b]` across the study's
factor with its `reference` level), the `metric`, the claimed
`direction` of a - b, the `smallest_effect` of interest in the metric's
units, and `alpha` (the family's: every claim of a config shares one).
`kg_service.analysis.numbers.claims` labels them after the run. The
checks that span keys read the fields validated before `claims:`
(activations, data, analysis, study_factor), and each problem is
reported at its key and line with a "did you mean".
"""

import dataclasses
import re
from typing import Annotated
from typing import Literal
from typing import Optional
from typing import Union

from pydantic import Field

from kg_service.config import catalog
from kg_service.config import fields
from kg_service.config.excerpts import quoted
from kg_service.config.excerpts import show

# The final per-member metrics every task logs (each member's run): the
# test ones and the last epoch's training and validation ones.
COMMON_METRICS = ("test_accuracy", "test_loss", "loss", "accuracy", "val_loss", "val_accuracy")
_NAME = re.compile(r"[\w.\- ]{1,100}")
_Level = Annotated[Union[fields.Bool, fields.number(), fields.Text],
                   Field(description="a value of the study factor's setting")]


@dataclasses.dataclass(frozen=True)
class ClaimConfig:
    """One claim. Exactly one of `pair`, `contrast`, `interaction`;
    `reference` with an interaction only; `level` (the factor level whose
    sweep a pair or contrast is tested in) in a study with a factor."""

    __pydantic_config__ = fields.STRICT
    name: fields.Text
    metric: fields.Text
    direction: Literal["greater", "less"]  # of a - b (plus - minus)
    smallest_effect: fields.number(gt=0)  # in the metric's units
    pair: Optional[Annotated[tuple[fields.Activation, fields.Activation],
                             Field(description="two activations [a, b]")]] = None
    contrast: Optional[fields.Text] = None  # a name in analysis.contrasts
    interaction: Optional[Annotated[tuple[fields.Activation, fields.Activation],
                                    Field(description="two activations [a, b]")]] = None
    reference: Optional[_Level] = None
    level: Optional[_Level] = None
    alpha: Optional[fields.number(gt=0, lt=0.5)] = None  # None: analysis.alpha

    def sides(self, contrasts=()):
        """(plus, minus): the activations whose mean is a, and b's."""
        if self.contrast is not None:
            c = next(c for c in contrasts if c.name == self.contrast)
            return tuple(c.plus), tuple(c.minus)
        a, b = self.pair or self.interaction
        return (a,), (b,)


Claims = Annotated[tuple[ClaimConfig, ...], Field(
    description="a list of {name, pair | contrast | interaction, metric, direction, "
                "smallest_effect, alpha}")]


def metric_names(data, model):
    """The final metrics a member of the config's task logs."""
    task = catalog.task(data.dataset) if data is not None else None
    extra = task.metrics(model) if task is not None and task.metrics and model else ()
    return COMMON_METRICS + tuple(extra)


def claims_valid(claims, info):
    """The checks that span keys: names, what is compared, metric, alpha."""
    data = info.data
    names = [c.name for c in claims]
    alphas = set()
    for i, c in enumerate(claims):
        if not _NAME.fullmatch(c.name):
            fields.fail(at=(i, "name"), message=(
                f"got {show(c.name)}; expected a claim name of letters, digits, '_', '-', "
                "'.' and spaces, e.g. gated-beats-plain."))
        if c.name in names[:i]:
            fields.fail(at=(i, "name"), message=(
                f"claim name {show(c.name)} appears twice; expected distinct names."))
        _compared(c, i, data)
        _metric(c, i, data)
        alpha = c.alpha if c.alpha is not None else getattr(data.get("analysis"), "alpha", 0.05)
        alphas.add(alpha)
        if len(alphas) > 1:
            fields.fail(at=(i, "alpha"), message=(
                f"{alpha:g} differs from another claim's alpha; expected one alpha for "
                "every claim of a config (Holm's family-wise level over its claims)."))
    return claims


def _compared(c, i, data):
    given = [k for k in ("pair", "contrast", "interaction") if getattr(c, k) is not None]
    if len(given) != 1:
        fields.fail(at=(i,), message=(
            f"claim {show(c.name)} names {' and '.join(given) or 'nothing to compare'}; "
            "expected exactly one of pair: [a, b], contrast: NAME (of analysis.contrasts) "
            "or interaction: [a, b] (with reference: LEVEL)."))
    activations = data.get("activations")
    for key in ("pair", "interaction"):
        for j, name in enumerate(getattr(c, key) or ()):
            if activations is not None and name not in activations:
                fields.fail(at=(i, key, j), message=(
                    f"{show(name)} is not one of the activations ({', '.join(activations)}); "
                    f"a claim compares activations the sweep trains."
                    f"{catalog.closest(name, activations)}"))
        both = getattr(c, key)
        if both is not None and both[0] == both[1]:
            fields.fail(at=(i, key, 1), message=(
                f"{show(both[0])} twice; expected two different activations [a, b]."))
    if c.contrast is not None:
        declared = [x.name for x in getattr(data.get("analysis"), "contrasts", ())]
        if c.contrast not in declared:
            fields.fail(at=(i, "contrast"), message=(
                f"{show(c.contrast)} is not a declared contrast (analysis.contrasts: "
                f"{quoted(tuple(declared)) if declared else 'none'}); expected the name of "
                f"one.{catalog.closest(c.contrast, declared)}"))
    _levels(c, i, data)


def _levels(c, i, data):
    factor = data.get("study_factor")
    if c.interaction is not None and c.reference is None:
        fields.fail(at=(i, "interaction"), message=(
            "an interaction without `reference:`; expected the reference level of the "
            "study's factor (e.g. reference: true), from which the interaction is measured."))
    if c.interaction is None and c.reference is not None:
        fields.fail(at=(i, "reference"), message=(
            "`reference:` belongs to an interaction; a pair or contrast names its sweep's "
            "factor level with `level:`."))
    if c.interaction is not None and c.level is not None:
        fields.fail(at=(i, "level"), message=(
            "an interaction spans the factor's levels; expected no `level:` on it."))
    wanted = c.reference if c.interaction is not None else c.level
    key = "reference" if c.interaction is not None else "level"
    if factor is None and (c.interaction is not None or c.level is not None):
        fields.fail(at=(i, key), message=(
            f"{key} without a `study_factor:`; expected study_factor: {{setting: KEY, "
            "reference: VALUE}} beside `study:` (the setting the study's sweeps differ by)."))
    if factor is not None and wanted is not None and not _same_kind(factor.reference, wanted):
        fields.fail(at=(i, key), message=(
            f"{wanted!r} is not a value {factor.setting} can take; expected one like "
            f"{factor.reference!r}."))


def _same_kind(value, other):
    if isinstance(value, bool) or isinstance(other, bool):
        return isinstance(value, bool) and isinstance(other, bool)
    return isinstance(value, str) == isinstance(other, str)


def _metric(c, i, data):
    known = metric_names(data.get("data"), data.get("model"))
    if c.metric not in known:
        fields.fail(at=(i, "metric"), message=(
            f"{show(c.metric)} is not a metric this sweep's members log; expected one of "
            f"{quoted(known)}.{catalog.closest(c.metric, known)}"))
