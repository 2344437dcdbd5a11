"""A sweep's statistics as numbers: pure, no words, no files.

Modules:
    stats: one function per statistic (estimate, paired test,
        TOST, d_z interval, Fisher)
    multiplicity: Holm's step-down over a family: adjusted p, levels
    decisions: the one verdict rule, `decide` (better / worse /
        equivalent / inconclusive)
    claims: the one claim rule, `label` (reproduced / contradicted /
        not tested / inconclusive), Holm over a paper's claims, power
    claim_data: a config's claims as numbers, and the per-seed values
        each reads (a sweep's members, a study's levels)
    planning: the seeds that would decide a comparison (power)
    resampling: bootstrap interval, P(improvement), ASO, P(best)
    spending: alpha spending and group-sequential boundaries
    sequential: a sequential sweep's looks and when it stops
    sequential_estimates: after a stop: futility (conditional power),
        repeated confidence intervals, the median-unbiased estimate
    sequential_claims: a sequential sweep's claims, each its own
        group-sequential test at the sweep's looks, labelled by `label`
    comparisons: a sweep's members compared by seed: `summarize` -> Summary
    summary: the Summary's types (activations, comparisons, winner)
    curves: the training-loss curves compared
    paired_examples: McNemar's test on the test split's examples
    plain: a Summary as plain data (summary.json's numbers, metrics)
    study: several sweeps as one Holm family, interactions
    aggregate: IQM, probability of improvement, profiles across tasks
    mixed: one linear mixed model across tasks, contrasts with max-t
        simultaneous intervals
"""
