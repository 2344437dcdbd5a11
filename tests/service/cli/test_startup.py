"""What every kg-train sweep and `kg report` pays before it does anything
(issue 17): the `version.<library>` tags of a sweep are the libraries'
own versions, read without importing a library the sweep does not run
on (importing JAX and torch for a version string cost each TensorFlow
kg-train and `kg report` process ~3 CPU s; TensorFlow ~7 under the
other backends)."""

import importlib
import sys

import pytest

from kg_service.tracking import versions


@pytest.mark.parametrize("name", sorted(versions.OTHER_LIBRARIES))
def test_a_librarys_version_is_its_own_read_without_importing_it(name, monkeypatch):
    module = importlib.import_module(name)  # the reference: what the library says it is
    monkeypatch.delitem(sys.modules, name)  # as in a process that never imported it
    version = versions.installed_version(name, versions.OTHER_LIBRARIES[name])
    assert version == module.__version__
    assert name not in sys.modules


def test_the_version_tags_are_what_each_library_says(monkeypatch):
    tags = versions.library_versions()
    for name in versions.OTHER_LIBRARIES:
        assert tags[f"version.{name}"] == importlib.import_module(name).__version__
    # A library that is not installed gets no tag, instead of a guess.
    assert versions.installed_version("no_such_library_kg", ("no-such-library-kg",)) is None
