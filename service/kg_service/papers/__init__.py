"""The papers' reruns: docs/results.md, from the studies in an MLflow store.

Modules:
    published: the papers' published numbers (shared/reference/papers.md)
    maths: the page's own numbers: ranks, Spearman's rho, entropies
    sections: the GELU and GLU sections, and the words every section shares
    revival: the "ReLU's Revival" section
    claims: each paper's claims table, from its config's claims only
    page: the whole page from stored runs (`render`)
    runner: `kg results`'s work: fill a store, read its runs through
        `kg_service.tracking`, write the page

It stands above `kg_service.analysis` (and `sweep.studies`): nothing in
the product imports it.
"""
