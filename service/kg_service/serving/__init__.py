"""Serving a registered model: kg serve, kg predict, the request guard, SavedModel export.

Modules:
    answers: what the guard sends back: one JSON error shape.
    columns: named columns matched to the model's features by name.
    export: SavedModel export in the TF Serving layout, verified.
    fast_path: a batch of numbers for a classifier, without pandas.
    model_folder: a MODEL as a local MLflow pyfunc model folder.
    model_input: a request's input as the model takes it.
    predict: `kg predict`: a model's predictions for a file's rows.
    request_checks: what a scoring request must be.
    saved_model_proto: a SavedModel's signatures, without TensorFlow.
    scoring_app: the ASGI app `kg serve` runs: MLflow's server, guarded.
    server: `kg serve`'s scoring server process.
"""
