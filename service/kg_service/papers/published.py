"""The papers' published numbers that docs/results.md sets ours beside.

Copied from ../shared/reference/papers.md (the project's reference
sheet, which cites each paper's table); `kg results` reads them from here
and nowhere else, so the page's "paper" columns are code, not typing.
"""

# Hendrycks & Gimpel 2016, "Gaussian Error Linear Units" (arXiv 1606.08415),
# MNIST classifier, 8 x 128, 5 runs: curves only. The claim our digits
# section tests: GELU has the lowest median training log-loss.
GELU_PAPER = "Hendrycks & Gimpel 2016"
GELU_LOWEST_TRAINING_LOSS = "gelu"

# Shazeer 2020, "GLU Variants Improve Transformer" (arXiv 2002.05202),
# held-out log-perplexity after 65,536 steps (mean, sd over 4 runs); lower
# is better. Keys are kg-train's activation names.
GLU_PAPER = "Shazeer 2020"
GLU_65K = {
    "relu": (1.997, 0.005),
    "gelu": (1.983, 0.005),
    "swish": (1.994, 0.003),
    "glu": (1.982, 0.006),
    "bilinear": (1.960, 0.005),
    "reglu": (1.953, 0.003),
    "geglu": (1.942, 0.004),
    "swiglu": (1.944, 0.010),
}

# Jha & Reagen 2024, "ReLU's Revival" (arXiv 2410.09637): GPT-2, T=128,
# eval perplexity, by (layer_norm, activation).
REVIVAL_PAPER = "Jha & Reagen 2024"
REVIVAL_GPT2_PERPLEXITY = {
    (True, "gelu"): 2.688,
    (True, "relu"): 2.757,
    (False, "gelu"): 3.197,
    (False, "relu"): 2.936,
}
# Share of heads per quarter of [0, max entropy] (low -> high), max = the
# highest head entropy observed; by (layer_norm, activation).
REVIVAL_ENTROPY_QUARTERS = {
    (True, "gelu"): (0.04, 0.14, 0.74, 0.08),
    (True, "relu"): (0.06, 0.16, 0.74, 0.03),
    (False, "gelu"): (0.01, 0.18, 0.23, 0.58),
    (False, "relu"): (0.03, 0.20, 0.53, 0.24),
}
# The learnable leaky ReLU's slope starts here; the paper reports it tends
# to zero in normalization-free models.
REVIVAL_INITIAL_SLOPE = 0.01
