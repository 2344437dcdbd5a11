"""Tasks: what a sweep trains and how it is judged; one folder per task.

A new task is a new folder plus one registration line here. Registering
puts each task's facts in `kg_service.config.catalog`, where config
validation reads them; `kg_service/__init__.py` imports this package, so
every entry point has the built-in tasks.

Modules:
    base: the task plug-in: `Task`, `Metric` and the registry.
    classification: moons, circles and digits, and `task(...)` for more.
    language: a byte-level language model of Python's standard library.
"""

from kg_service.tasks import base
from kg_service.tasks import classification
from kg_service.tasks import language

base.register(classification.MOONS)
base.register(classification.CIRCLES)
base.register(classification.DIGITS)
base.register(language.PYTHON_CODE)
