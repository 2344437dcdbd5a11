"""Seed statistics (numbers), their wording (words), the report and its figures."""
