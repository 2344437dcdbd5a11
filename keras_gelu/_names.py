"""Transitional: `keras_gelu.name_table` under its old file name.

kg_service's config validation loads this file by path (issue 16 moves it
to `importlib.import_module("keras_gelu.name_table")`, which no longer
imports Keras). Delete this file with that switch.
"""

from keras_gelu.name_table import *  # noqa: F401,F403
