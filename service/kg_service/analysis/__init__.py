"""What a sweep's results say, in three rooms: numbers, then words, then reports.

Modules:
    numbers: the statistics, pure (numpy, scipy): tests, verdicts (one
        rule, `numbers.decisions.decide`), seed plans, resampling,
        sequential looks, studies
    words: every sentence and column title made of those numbers
    reports: report.md, summary.json and the figures, assembled

A room imports only the rooms listed above it (reports -> words ->
numbers), and nothing here imports tracking or sweep: the results are
passed in. The paper reruns (docs/results.md) are a room of their own
above this one, `kg_service.papers`.
"""
