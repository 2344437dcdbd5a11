"""Serving a registered model: kg serve, kg predict, the request guard, SavedModel export."""
