"""What a trained sweep member hands to statistics, reports and tracking."""

import dataclasses
from typing import Any, Optional


@dataclasses.dataclass
class MemberResult:
    """One (activation, seed) member of a sweep, after training.

    `history` holds one value per epoch for "loss", "accuracy" (training
    set), "val_loss" and "val_accuracy", and any series a task adds
    (a language model's attention entropies, for one). Test metrics are computed once,
    after training: the test set plays no part in training or selection.
    """

    activation: str
    seed: int
    history: dict
    test_loss: float
    test_accuracy: float
    # First epoch (1-based) whose val_accuracy reached the configured
    # threshold; None if it never did.
    epochs_to_threshold: Optional[int]
    model: Any = None  # the trained plain keras.Model of the configured architecture
    train_seconds: float = 0.0
    # Set when the member diverged: why, and the first epoch (1-based)
    # whose loss was not finite. A failed member is tracked as FAILED and
    # left out of the statistics, never averaged in.
    failure: Optional[str] = None
    failed_epoch: Optional[int] = None
    # Task-specific final numbers beside the test loss and accuracy, e.g.
    # a language model's "test_perplexity"; tracked as metrics.
    final: dict = dataclasses.field(default_factory=dict)
    # A classifier's: per example of its test split, in the split's order,
    # whether the prediction was right (bool array); members of one seed
    # share the split, so two activations pair example by example
    # (McNemar, kg_service.analysis.numbers.paired_examples). None when not kept
    # (another task; a member a resumed sweep read back from the store).
    test_correct: Any = None

    @property
    def ok(self):
        return self.failure is None

    @property
    def val_accuracy(self):
        return self.history["val_accuracy"][-1]

    @property
    def val_loss(self):
        return self.history["val_loss"][-1]
