"""Everything said to MLflow and the pre-flight checks of where a run writes."""
