"""Sweep members of fixed numbers, for the analysis tests."""

from kg_service.results import MemberResult


def member(activation, seed, test_acc, test_loss=0.3, val_acc=0.9, val_loss=0.3,
           epochs_to_threshold=5, epochs=3):
    history = {
        "loss": [0.5] * epochs,
        "accuracy": [0.8] * epochs,
        "val_loss": [0.5] * (epochs - 1) + [val_loss],
        "val_accuracy": [0.8] * (epochs - 1) + [val_acc],
    }
    return MemberResult(activation, seed, history, test_loss, test_acc, epochs_to_threshold)


def sweep(accs, losses=None):
    """{activation: [test acc per seed]} -> MemberResult list, seeds 0..n-1."""
    out = []
    for act, values in accs.items():
        for seed, acc in enumerate(values):
            loss = losses[act][seed] if losses else 1.0 - acc
            out.append(member(act, seed, acc, test_loss=loss))
    return out
