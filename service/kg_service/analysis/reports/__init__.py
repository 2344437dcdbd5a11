"""The reports, assembled from `analysis.numbers` and `analysis.words`.

Modules:
    evaluate: what a model or an activation computes (Keras, lazily)
    page: the report model (blocks) and its two renderers, report.md and report.html
    canvas: the figures' off-screen matplotlib canvas, its DPI, and saving
    figures: the PNG figures and the table of their names
    learning: the learning curves, overlaid or as small multiples
    forest: the forest plot of comparisons (Δ, deciding interval, margin, verdict)
    report: a sweep's report.md, report.html and summary.json, with the figures
    variance_report: the curves' and McNemar's sections of the report
    sequential_report: a sequential sweep's looks, as printed and reported
    tuning: a tuning stage's choice per activation, its table and curves
    study_report: a study's tables, report.md, report.html, summary.json and figures
"""
