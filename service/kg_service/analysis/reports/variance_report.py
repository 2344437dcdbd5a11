"""The report's words for issue 19's two extra views of a sweep.

`paired_examples` (McNemar's test per test example, beside the across-seed
test) and `curves` (the training-loss curves compared, beside the end
point) compute; this module lays their numbers out as report sections
(`page` blocks) and as summary.json entries. Results are passed in; nothing here opens a
store.
"""

import math

from kg_service.analysis.numbers import curves
from kg_service.analysis.numbers import paired_examples
from kg_service.analysis.reports import page
from kg_service.analysis.numbers.plain import json_ready
from kg_service.analysis.words.wording import format_p

MEASURE_WORDS = {  # the table's first column; the section's text says more
    "loss_auc": "mean train loss (AUC / epoch)",
    "epochs_to_loss": "epochs to the loss",
}
COVERS_EXAMPLES = (
    "McNemar's test pairs the two activations' predictions on the same test examples "
    "(members of one seed share their split). It covers the sampling of the test "
    "examples only, each trained model taken as it is: it says whether the test split "
    "could tell these trained models apart, not whether another training run would "
    "rank them the same way."
)
COVERS_SEEDS = (
    "The across-seed verdicts above cover what a seed varies ({vary}): training "
    "randomness{split_words}."
)


def _vary_words(config):
    vary = tuple(getattr(config, "vary", ()) or ())
    if not vary:
        return "the seeds", ""
    split = ("split" in vary)
    return ", ".join(vary), (
        ", and, since each seed has its own split, which examples are tested too"
        if split else "; the split is fixed, so the test examples' sampling is not covered"
    )


def _thresholds(config):
    training = getattr(config, "training", None)
    return getattr(training, "loss_threshold", None)


def compute(summary, results, config=None):
    """(McNemar tests, curve summary) of a sweep; either may be empty / None."""
    results = list(results)
    examples = paired_examples.example_tests(results, summary.baseline)
    curve_summary = curves.compare_curves(
        results, summary.baseline, threshold=_thresholds(config), alpha=summary.alpha,
        confidence=summary.confidence)
    return examples, curve_summary


def sections(summary, results, config=None):
    """The report's "Per-example tests" and "Training-loss curves" sections
    (`page.Section`s)."""
    examples, curve_summary = compute(summary, results, config)
    out = []
    if examples:
        vary, split_words = _vary_words(config)
        blocks = [page.Paragraph(COVERS_EXAMPLES + " " + COVERS_SEEDS.format(
                      vary=vary, split_words=split_words)),
                  page.table(*example_rows(examples)),
                  page.Paragraph(
                      "b: test examples the activation gets right and the baseline "
                      "wrong; c: the reverse (summed over seeds). Pooled p: McNemar on the "
                      f"summed counts (exact binomial below {paired_examples.EXACT_BELOW} "
                      "discordant examples, else chi-square with continuity correction), "
                      "Holm-adjusted over the activations; Fisher p: the seeds' McNemar "
                      "p-values combined (conservative for discrete p-values).")]
        unpaired = {t.activation: t.unpaired for t in examples if t.unpaired}
        if unpaired:
            who = ", ".join(f"{a} {n}" for a, n in unpaired.items())
            blocks.append(page.Paragraph(
                f"Seeds left out (a member without kept test predictions, e.g. "
                f"one a resumed sweep read back from the store): {who}."))
        out.append(page.Section("Per-example tests (McNemar, test split)", tuple(blocks)))
    if curve_summary is not None and curve_summary.comparisons:
        source = ("training.loss_threshold" if curve_summary.threshold_from == "config"
                  else "the largest final training loss of the members, reached by all")
        blocks = [page.Paragraph(
                      "The GELU paper compares training-loss curves, not only end points: "
                      "per member, the mean training loss over its epochs (the area under "
                      "its curve per epoch) and the epochs it took to reach a training loss "
                      f"of {curve_summary.threshold:.4g} ({source}); each compared with the "
                      "baseline paired over seeds, with the end point's test and verdicts "
                      "(Holm over the activations; lower is better; no equivalence margin)."),
                  page.table(*curve_rows(curve_summary))]
        censored = sum(c.censored for c in curve_summary.comparisons
                       if c.measure == "epochs_to_loss")
        if censored:
            blocks.append(page.Paragraph(
                f"{censored} member(s) never reached the threshold: counted as "
                f"{curve_summary.epochs + 1} epochs (one past the end)."))
        out.append(page.Section("Training-loss curves", tuple(blocks)))
    return out


def example_rows(examples):
    header = ["activation vs baseline", "seeds", "test examples", "b", "c",
              "Δ acc (pooled)", "pooled p (Holm)", "Fisher p", "per-seed p"]
    rows = []
    for t in examples:
        per_seed = ", ".join(f"{s.seed}: {format_p(s.p_value)}" for s in t.seeds)
        diff = t.difference
        rows.append([
            f"{t.activation} vs {t.reference}", len(t.seeds), t.n, t.b, t.c,
            "n/a" if math.isnan(diff) else f"{100 * diff:+.2f} pp",
            f"{format_p(t.p_pooled)} ({format_p(t.p_pooled_holm)})", format_p(t.p_fisher),
            per_seed or "n/a",
        ])
    return header, rows


def curve_rows(curve_summary):
    header = ["measure", "activation", "mean", "baseline mean", "Δ (deciding CI, level)",
              "p (Holm)", "verdict"]
    rows = []
    for c in curve_summary.comparisons:
        t, v = c.test, c.verdict
        low, high = v.interval  # the one that decides, at Holm's level (issue 30 §8)
        ci = ("" if not (math.isfinite(low) and math.isfinite(high))
              else f" ({low:+.4g} to {high:+.4g}, {v.confidence:.1%})".replace(".0%", "%"))
        rows.append([
            MEASURE_WORDS[c.measure], c.activation, f"{c.mean:.4g}",
            f"{c.reference_mean:.4g}", f"{t.mean_diff:+.4g}{ci}",
            f"{format_p(t.p_value)} ({format_p(v.p_holm)})", v.outcome,
        ])
    return header, rows


def summary_entries(summary, results, config=None):
    """summary.json's "per_example" and "curves" entries (strict JSON types)."""
    examples, curve_summary = compute(summary, results, config)
    out = {"per_example": {
        t.activation: {
            "reference": t.reference, "test": "McNemar", "seeds": len(t.seeds),
            "test_examples": t.n, "b": t.b, "c": t.c, "p_pooled": t.p_pooled,
            "p_pooled_holm": t.p_pooled_holm, "p_fisher": t.p_fisher,
            "per_seed": [{"seed": s.seed, "n": s.n, "b": s.b, "c": s.c, "p": s.p_value}
                         for s in t.seeds],
        } for t in examples}}
    if curve_summary is not None:
        out["curves"] = {
            "loss_threshold": curve_summary.threshold,
            "threshold_from": curve_summary.threshold_from,
            "comparisons": [{
                "activation": c.activation, "measure": c.measure, "mean": c.mean,
                "baseline_mean": c.reference_mean, "mean_diff": c.test.mean_diff,
                "ci_low": c.test.ci_low, "ci_high": c.test.ci_high,
                "p": c.test.p_value, "p_holm": c.verdict.p_holm,
                "verdict": c.verdict.outcome, "censored": c.censored,
            } for c in curve_summary.comparisons],
        }
    return json_ready(out)
