"""Tasks: what a sweep trains and how it is judged; one folder per task."""
