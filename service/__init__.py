"""kg-train: seeded activation comparisons tracked in MLflow."""
