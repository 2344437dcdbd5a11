"""The numbers of `analysis.numbers` in words: every sentence and column title.

Modules:
    wording: formats, notes, columns: how a number reads
    verdict_wording: a sweep's verdicts in words (each `decisions.decide`'s)
    study_wording: a study's verdicts, interactions and notes in words
    claim_wording: each claim's label in a row and a sentence; the claims plan
    tables: the terminal, Markdown and registry tables
"""
