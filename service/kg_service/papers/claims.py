"""docs/results.md's claims table for each paper: the claims its config
declared before the run, labelled from the stored per-seed numbers only
(issue 32 §1, §4). The label rule is `analysis.numbers.claims.label`;
the words `analysis.words.claim_wording`; nothing here decides.
"""

from kg_service.analysis.words import claim_wording
from kg_service.analysis.words import tables
from kg_service.sweep import studies


def study_labels(tag, runs):
    """The labels of a study's declared claims from its `page.StoredRun`s,
    Holm over them; () where the study declares none."""
    return studies.label_claims(tag, [(r.config, r.members) for r in runs])


def claims_lines(tag, runs):
    """The paper's "Claims" block: the table, its caption, why each label."""
    labels = study_labels(tag, runs)
    if not labels:
        return ["**Claims.** The study's config declares none (`claims:`), so this page "
                "labels nothing."]
    return (["**Claims** (declared in the config before the run; the page's only labels):",
             ""] + tables.markdown_table(*claim_wording.claim_rows(labels))
            + ["", claim_wording.caption(labels), ""]
            + [f"- {line}." for line in claim_wording.claim_lines(labels)])
