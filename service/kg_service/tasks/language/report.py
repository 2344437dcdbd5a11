"""The language model's lines in the sweep report (`Task.data_parts`,
`Task.model_line`, `Task.tables`, `Task.unused_keys`;
`kg_service.analysis.reports.report` writes them in)."""

import numpy as np


def data_parts(data_cfg, dataset):
    """The corpus as it was read (`corpus.Corpus.describe`), when loaded."""
    return [dataset.describe()] if dataset is not None else []


def model_line(m):
    """The decoder-only transformer in one line."""
    return (f"- Model: decoder-only transformer, {len(m.hidden_units)} blocks, d_model "
            f"{m.d_model}, {m.heads} heads, FFN widths {tuple(m.hidden_units)}"
            + (", gated FFNs parameter-matched" if m.match_params else "")
            + f", LayerNorm {'on' if m.layer_norm else 'off'}, "
            f"{'tied' if m.tie_embeddings else 'untied'} embeddings.")


def tables(summary, results):
    """Perplexity and attention-entropy quarters: `(caption, header, rows)`.

    Means over seeds of the final values: test perplexity and bits per
    byte, and the share of heads in each quarter of [0, max entropy]
    ("ReLU's Revival", Table 3's layout), with the mean final slope of
    any learnable leaky ReLU. None where a member has no perplexity.
    """
    rows = []
    for a in summary.activations:
        members = [r for r in results if r.activation == a.activation]
        if not members or "test_perplexity" not in members[0].final:
            return None
        mean = lambda values: float(np.mean(values))  # noqa: E731
        quarters = [mean([r.history[f"entropy_quarter{k}"][-1] for r in members])
                    for k in range(1, 5)]
        slopes = [v[-1] for r in members for k, v in r.history.items()
                  if k.startswith("leaky_slope.") and v]
        rows.append([
            a.activation,
            f"{mean([r.final['test_perplexity'] for r in members]):.4f}",
            f"{mean([r.final['test_bits_per_byte'] for r in members]):.4f}",
            *(f"{100 * q:.0f}%" for q in quarters),
            f"{mean(slopes):.4f}" if slopes else "",
        ])
    header = ["activation", "test perplexity", "bits/byte", "q1", "q2", "q3", "q4",
              "leaky slope"]
    caption = ("Language model, means over seeds of the final values (entropy "
               "quarters: share of heads in [0, max/4), [max/4, max/2), [max/2, 3max/4), "
               "[3max/4, max], max = the highest head entropy of the member):")
    return caption, header, rows


def unused_keys(cfg):
    """The common keys a language model does not read."""
    return ("data.standardize", "model.block", "training.convergence_threshold")
