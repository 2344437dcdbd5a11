"""A sweep's statistics as tables: header + rows of strings, and their captions.

Words only, built from `kg_service.analysis.words.wording`'s formats and
verdicts: the terminal table `kg-train` prints (`format_table`), the
report's tables (`table_rows`, `comparison_rows`, `pair_rows` for all
pairs and contrasts, `per_seed_rows`, `member_rows`) with their captions,
`kg plan`'s table (`plan_rows`) and `kg models`' registry table.
`text_table` and `markdown_table` lay out any header + rows.
"""

import math

from kg_service.analysis.numbers import planning
from kg_service.analysis.numbers import stats
from kg_service.analysis.words import verdict_wording
from kg_service.analysis.words import wording
from kg_service.config.schema import DEFAULT_MARGINS


def table_rows(summary):
    """The results table: one row per activation."""
    s = wording.shown(summary.metric.name)
    others = [wording.shown(m.name) for m in summary.secondary]
    stat_cols = wording.columns(terminal_only=True)
    failures = any(a.failed for a in summary.activations)
    header = (["activation", "seeds", s.header + (" %" if s.kind.percent else ""),
               f"{summary.confidence:.0%} CI"] + [o.header for o in others]
              + [f"Δ {s.kind.abbrev} vs base", "p (Holm)" if summary.holm else "p"]
              + [col.header for _, col in stat_cols] + ["verdict"]
              + (["P(best)"] if summary.rank_first else [])
              + (["failed"] if failures else [])
              + (["epochs to thr"] if wording.thresholded(summary) else []))
    rows = []
    for a in summary.activations:
        row = [a.activation, str(a.n), s.pm(a.estimate, unit=False),
               s.interval(a.estimate.ci_low, a.estimate.ci_high)]
        row += [o.pm(a.secondary[m.name]) for o, m in zip(others, summary.secondary)]
        c = summary.comparison(a.activation)
        if a.activation == summary.baseline:
            row += ["(baseline)", ""] + [""] * len(stat_cols) + [""]
        else:
            row += [s.diff(c.paired.mean_diff),
                    wording.format_p(c.p_holm) + ("*" if c.significant else "")]
            row += [wording.statistic_text(name, c.paired, summary.alpha)
                    for name, _ in stat_cols]
            row.append(verdict_wording.OUTCOME_WORDS[c.verdict.outcome] if c.verdict else "")
        if summary.rank_first:
            row.append(f"{summary.rank_first.get(a.activation, math.nan):.2f}")
        if failures:
            row.append(f"{a.failed}/{a.attempted}")
        if not wording.thresholded(summary):
            pass
        elif a.reached:
            row.append(f"{a.epochs_to_threshold_median:g} ({a.reached}/{a.n})")
        else:
            row.append(f"– (0/{a.n})")
        rows.append(row)
    return header, rows


def results_caption(summary):
    """The words under the report's results table."""
    s = wording.shown(summary.metric.name)
    percent = " in percent" if s.kind.percent else ""
    points = ", in percentage points" if s.kind.percent else ""
    text = (f"{s.label.capitalize()}{percent}, mean ± sd over seeds (sd with n − 1), with a "
            f"t-based {summary.confidence:.0%} interval of the mean. Δ: mean paired "
            f"difference from the baseline, seed by seed{points}. p: two-sided paired t-test")
    if summary.holm:
        text += (f", Holm-adjusted over the {len(summary.comparisons)} comparisons with "
                 "the baseline")
    text += f"; * marks p < {summary.alpha:g}."
    for _, col in wording.columns(terminal_only=True):
        text += f" {col.header}: {col.meaning}."
    text += " " + verdict_caption(summary)
    if summary.rank_first:
        text += (" P(best): how often the activation has the best mean when the seeds are "
                 "resampled (bootstrap, a seed's runs kept together): the uncertainty of "
                 "the winner.")
    if any(a.failed for a in summary.activations):
        text += (" failed: members that diverged / members trained; they are left out of "
                 "the metric's statistics and compared with the baseline's by Fisher's "
                 "exact test.")
    if not wording.thresholded(summary):
        return text
    return text + (" Epochs to thr: median first epoch whose validation accuracy reached "
                   "the threshold, over the seeds that reached it (k/n).")


def verdict_caption(summary):
    """What a verdict means, with the margin and the intervals that decide."""
    if summary.sequential:  # issue 30 §7
        return ("Verdict: the sequential design's decision at its looks (\"Sequential "
                "seeds\" below); no fixed-design test over every seed decides here, and "
                "the means after a stop are biased away from zero.")
    margin = verdict_wording.margin_text(summary)
    holm = " (Holm over the comparisons)" if summary.holm else ""
    text = (f"Verdict: better or worse when the paired t-test rejects at {summary.alpha:g}"
            f"{holm}, with an interval at the level Holm tests that comparison at, so the "
            "interval and the verdict agree; ")
    if margin:
        text += (f"equivalent when the two one-sided tests (TOST) show the difference "
                 f"inside {margin}{holm}, with the 1 − 2α interval; ")
    else:
        text += "no margin is set, so equivalence is not tested; "
    return text + ("inconclusive otherwise, which is not evidence of no difference: more "
                   "seeds are needed (see the seed plan).")


def comparison_rows(summary):
    """The report's comparison table: every paired test and statistic."""
    conf = f"{summary.confidence:.0%} CI"
    s = wording.shown(summary.metric.name)
    cols = wording.columns()
    header = (["vs " + summary.baseline, "pairs", f"Δ {s.kind.abbrev}{s.diff_unit}", conf,
               "paired t p"] + [col.header for _, col in cols]
              + ["d_z CI", "verdict", "deciding CI", "TOST p", "seeds to decide",
                 f"bootstrap {conf}", "P(improve)", "ASO ε_min"])
    for m in summary.secondary:
        o = wording.shown(m.name)
        header += [f"Δ {o.kind.abbrev}{o.diff_unit}", f"{conf} ({o.kind.abbrev})",
                   f"p ({o.kind.abbrev})"]
    rows = []
    for c in summary.comparisons:
        t = c.paired
        row = [c.activation, str(t.n), s.diff_number(t.mean_diff),
               s.interval(t.ci_low, t.ci_high, " to ", True), wording.format_p(t.p_t)]
        row += [wording.statistic_text(name, t, summary.alpha) for name, _ in cols]
        row += [f"{t.dz_low:.2f} to {t.dz_high:.2f}" if math.isfinite(t.dz_low) else "n/a"]
        row += _verdict_cells(summary, c)
        row += [s.interval(*c.bootstrap, " to ", True), _number(c.p_improvement),
                _number(c.aso)]
        for m in summary.secondary:
            o, u = wording.shown(m.name), c.secondary[m.name]
            row += [o.diff_number(u.mean_diff), o.interval(u.ci_low, u.ci_high, " to ", True),
                    wording.format_p(u.p_value)]
        rows.append(row)
    return header, rows


def _number(x, digits=2):
    return "n/a" if not math.isfinite(x) else f"{x:.{digits}f}"


def pair_rows(summary, family):
    """A family of `PairComparison`s (all pairs, or the contrasts) as a table."""
    s = wording.shown(summary.metric.name)
    header = ["comparison", "pairs", f"Δ {s.kind.abbrev}{s.diff_unit}", "paired t p",
              "Holm p", "verdict", "deciding CI", "TOST p (Holm)"]
    rows = []
    for pc in family:
        t, v = pc.paired, pc.verdict
        lo, hi = v.interval
        ci = ("n/a" if not (math.isfinite(lo) and math.isfinite(hi))
              else f"{s.interval(lo, hi, ' to ', True)} ({v.confidence:.1%})".replace(
                  ".0%", "%"))
        name = pc.name if len(pc.plus) == 1 and len(pc.minus) == 1 else (
            f"{pc.name}: {verdict_wording.group_text(pc.plus)} − {verdict_wording.group_text(pc.minus)}")
        rows.append([name, str(t.n), s.diff_number(t.mean_diff), wording.format_p(t.p_value),
                     wording.format_p(v.p_holm), verdict_wording.OUTCOME_WORDS[v.outcome], ci,
                     wording.format_p(v.p_equivalence_holm)])
    return header, rows


def few_runs_caption(summary):
    conf = f"{summary.confidence:.0%}"
    return (f"Bootstrap {conf} CI: percentile interval of the mean paired difference, "
            "resampling the seeds (10,000 resamples, no normality assumed), beside the "
            "t-interval. P(improve): the chance that a run of the activation beats a run "
            "of the baseline (all pairs of runs; 0.5 = no edge). ASO ε_min: almost "
            "stochastic order (Dror et al. 2019), below 0.5 the activation's scores are "
            "almost stochastically better, the smaller the surer (1000 bootstrap "
            "iterations, Bonferroni over the comparisons). d_z CI: noncentral t. The "
            f"Wilcoxon p is shown from n={stats.wilcoxon_floor(summary.alpha)} pairs and "
            "is not Holm-adjusted.")


def plan_rows(summary, *, margin=None, power=None, alpha=None):
    """`kg plan`'s table from a stored summary.json (plain data).

    Each comparison with the baseline, then each declared contrast: its
    pairs, mean difference, sd and d_z, and the seeds to show the
    difference, to show equivalence, and to decide either way. Returns
    (header, rows, a note saying the margin, power and alpha used).
    """
    metric = summary["metric"]
    s = wording.shown(metric)
    short = stats.Metric(metric).short
    if margin is None:
        margin = summary.get("margin") or DEFAULT_MARGINS.get(metric)
    power = power or summary.get("power") or 0.8
    alpha = alpha or summary.get("alpha") or 0.05
    families = [("comparisons", lambda name, c: f"{name} vs {c['baseline']}"),
                ("contrasts", lambda name, c: name)]
    header = ["comparison", "pairs", f"Δ {s.kind.abbrev}{s.diff_unit}", "sd", "d_z",
              "seeds: difference", "seeds: equivalence", "to decide", "had"]
    rows = []
    for key, label in families:
        family = summary.get(key) or {}
        for name, c in family.items():
            t = c[short]
            mean, sd, n = (math.nan if t[k] is None else t[k]
                           for k in ("mean_diff", "std_diff", "n"))
            p = planning.plan_from(mean, sd, int(n), margin=margin, alpha=alpha,
                                   power=power, family=len(family))
            rows.append([label(name, c), str(int(n)), s.diff_number(mean),
                         "n/a" if not math.isfinite(sd) else s.number(sd),
                         wording.format_d(mean / sd if sd and math.isfinite(sd) else math.nan),
                         *("–" if x is None else f"~{x}"
                           for x in (p.superiority, p.equivalence, p.decide)),
                         str(int(n))])
    shown_margin = "none" if not margin else "±" + s.diff(margin).lstrip("+")
    note = (f"margin {shown_margin}, power {power:g}, alpha {alpha:g} divided by the "
            "comparisons of each family (Holm's strictest step). difference: a paired t-test "
            "at the observed d_z; equivalence: TOST, if the true difference is the observed "
            "one; – : no count reaches the power (a mean outside the margin cannot be shown "
            "equivalent; a zero or constant difference gives no d_z). A small pilot's d_z is "
            "noisy: read these as orders of magnitude.")
    return header, rows, note


def _verdict_cells(summary, c):
    """verdict, the interval that decides it (with its level), TOST p, seeds to decide."""
    v, s = c.verdict, wording.shown(summary.metric.name)
    if v is None:
        return ["", "", "", ""]
    lo, hi = v.interval
    ci = ("n/a" if not (math.isfinite(lo) and math.isfinite(hi))
          else f"{s.interval(lo, hi, ' to ', True)} ({v.confidence:.1%})".replace(".0%", "%"))
    plan = c.plan.decide if c.plan is not None else None
    return [verdict_wording.OUTCOME_WORDS[v.outcome], ci, wording.format_p(v.p_equivalence),
            "–" if plan is None else f"~{plan}"]


def secondary_note(summary):
    """'test loss: lower is better; its p-values are not adjusted'."""
    parts = [f"{wording.shown(m.name).label}: "
             f"{'higher' if m.higher_is_better else 'lower'} is better"
             for m in summary.secondary]
    if not parts:
        return ""
    return "; ".join(parts) + ("; its" if len(parts) == 1 else "; their") + (
        " p-values are not adjusted")


def per_seed_rows(summary, results):
    """The compared metric by seed, with the paired differences from the baseline."""
    s = wording.shown(summary.metric.name)
    table = {(r.activation, r.seed): getattr(r, summary.metric.name) for r in results}
    names = [a.activation for a in summary.activations]
    best = {a.activation: a.best_seed for a in summary.activations}
    base = summary.baseline
    header = ["seed"] + names + [f"{n} − {base}" for n in names if n != base]
    rows = []
    for seed in sorted({r.seed for r in results}):
        row = [str(seed)]
        for n in names:
            v = table.get((n, seed))
            row.append("–" if v is None else s.number(v) + (" ★" if best[n] == seed else ""))
        for n in names:
            if n == base:
                continue
            v, b = table.get((n, seed)), table.get((base, seed))
            row.append("–" if v is None or b is None else s.diff_number(v - b))
        rows.append(row)
    return header, rows


def per_seed_caption(summary):
    s = wording.shown(summary.metric.name)
    unit = " (%)" if s.kind.percent else ""
    return (f"{s.label.capitalize()}{unit} by seed; ★ marks each activation's best seed by "
            f"final {wording.shown(summary.select_by.name).label} (the one whose model is shown "
            "and registered). The last columns are the paired differences the tests use"
            f"{s.diff_unit}.")


def member_rows(summary, results):
    """Every member's final values: selection, validation loss, test metrics."""
    names = []
    for m in (summary.select_by.name, "val_loss", summary.metric.name,
              *(m.name for m in summary.secondary)):
        if m not in names:
            names.append(m)
    threshold = wording.thresholded(summary)
    header = (["activation", "seed"] + [wording.shown(n).header for n in names]
              + ["epochs to thr"] * threshold + ["train s"])
    order = {a.activation: i for i, a in enumerate(summary.activations)}
    rows = []
    for r in sorted(results, key=lambda r: (order.get(r.activation, len(order)), r.seed)):
        rows.append([r.activation, str(r.seed)]
                    + [wording.shown(n).number(float(getattr(r, n, math.nan))) for n in names]
                    + ["–" if r.epochs_to_threshold is None else str(r.epochs_to_threshold)]
                    * threshold
                    + [f"{r.train_seconds:.1f}"])
    return header, rows



# --- Layout: any header + rows, for the terminal or Markdown. -------------------


def text_table(header, rows, left=()):
    """Aligned plain-text lines: the header, a rule, the rows.

    Columns whose index is in `left` are left-aligned, the others right-
    aligned; trailing spaces are dropped.
    """
    widths = [max(len(r[i]) for r in [header] + rows) for i in range(len(header))]

    def line(cells):
        return "  ".join(c.ljust(w) if i in left else c.rjust(w)
                         for i, (c, w) in enumerate(zip(cells, widths))).rstrip()

    return [line(header), line(["-" * w for w in widths])] + [line(r) for r in rows]


def markdown_table(header, rows):
    """A Markdown table: the first column left-aligned, the others right."""
    out = ["| " + " | ".join(_md_escape(h) for h in header) + " |",
           "|" + "|".join("---" if i == 0 else "---:" for i in range(len(header))) + "|"]
    out += ["| " + " | ".join(_md_escape(c) for c in r) + " |" for r in rows]
    return out


def _md_escape(cell):
    return str(cell).replace("|", "\\|")


# --- The terminal table. ---------------------------------------------------------


def format_table(summary):
    """A compact plain-text table of the summary, then the verdict lines.

    Epochs to threshold: median over the seeds that reached it (k/n).
    `*` marks p < alpha.
    """
    header, rows = table_rows(summary)
    threshold = wording.thresholded(summary)
    left = {0, 3} | ({len(header) - 1} if threshold else set())  # activation, CI, epochs to thr
    out = text_table(header, rows, left)
    out.append("")
    out += [f"- {v}" for v in verdict_wording.verdicts(summary)]
    out += [f"- {line}" for line in verdict_wording.contrast_lines(summary)]
    out.append(f"Metric: {wording.metric_note(summary)}.")
    foot = ("epochs to thr: median epoch val accuracy first reached the threshold "
            "(seeds that reached it / seeds). " if threshold else "") + f"* p < {summary.alpha:g}"
    if summary.holm:
        foot += f", Holm-adjusted over {len(summary.comparisons)} comparisons"
    out.append(foot + ".")
    out += [f"Seed plan: {line}." for line in verdict_wording.plan_lines(summary)]
    out += [f"Failures: {line}." for line in verdict_wording.failure_lines(summary)]
    for who, note in wording.all_notes(summary):
        out.append(f"note ({who}): {note}" if who else f"note: {note}")
    return "\n".join(out)


# --- kg models: the registry as a table. ----------------------------------------


def versions_table(versions):
    """`kg models`: one line per registered version (`tracking.RegisteredVersion`)."""
    if not versions:
        return "No registered models. `kg train --config configs/tiny.yaml` registers two."
    header = ["model", "version", "aliases", "activation", "seed", "val acc %",
              "test acc %", "created (UTC)", "SavedModel"]

    def percent(value):
        return "–" if value is None else f"{100 * value:.2f}"

    rows = [
        [v.name, str(v.version), ",".join(f"@{a}" for a in v.aliases) or "–",
         v.activation or "–", "–" if v.seed is None else str(v.seed),
         percent(v.val_accuracy), percent(v.test_accuracy),
         (v.created or "–").replace("+00:00", "").replace("T", " "),
         v.saved_model or "–"]
        for v in versions
    ]
    numeric = {1, 4, 5, 6}
    left = set(range(len(header))) - numeric
    return "\n".join(text_table(header, rows, left))
