"""What a sweep's results say: numbers, then words, then the report.

Numbers (pure; numpy and scipy):
    stats         one function per statistic (estimate, paired test, Holm,
                  TOST, d_z interval, Fisher) and `decide`, the verdicts
    planning      the seeds that would decide a comparison (power)
    resampling    bootstrap interval, P(improvement), ASO, P(best)
    comparisons   a sweep's members compared by seed: `summarize` -> Summary
    plain         a Summary as plain data (summary.json's numbers, metrics)
Words:
    wording       how numbers read: formats, verdicts, notes, summary.json
    tables        the terminal, Markdown and registry tables
The report:
    evaluate      what a model or an activation computes (Keras, lazily)
    figures       the PNG figures and the table of their names
    report        report.md and summary.json, with the figures
    tuning        a tuning stage's choice per activation, its table and curves
A study (several sweeps as one family; docs/studies.md):
    study         Holm over every sweep's comparisons, interactions (numbers)
    aggregate     IQM, probability of improvement, profiles across tasks
    study_wording its verdicts, interactions and notes in words
    study_report  its tables, report.md, summary.json and figure

Each module imports only those listed above it, and nothing here imports
tracking or sweep: the results are passed in.
"""
