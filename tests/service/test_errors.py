"""Messages built from another library's words and ours read as sentences
(issue 30 §18: "...not found Did you mean ..."): every joint goes through
`kg_service.errors.sentence`."""

import re

import pytest

from kg_service import errors
from kg_service.cli import messages
from kg_service.tracking import client

# A lower-case word, a space, then one of our sentences: two sentences run together.
RUN_ON = re.compile(r"[a-z0-9'\")\]] (Did you mean|If that|The sweep|Check|Once the)\b")


@pytest.mark.parametrize("text, expected", [
    ("not found", "not found."), ("not found.", "not found."), ("why?", "why?"),
    ("  padded  ", "padded."), ("", ""),
])  # fmt: skip
def test_sentence_ends_a_message_once(text, expected):
    assert errors.sentence(text) == expected


@pytest.mark.parametrize("foreign", ["Registered Model with name=x not found", "done."])
def test_every_joint_of_foreign_words_and_ours_is_a_full_stop(foreign):
    said = [
        messages.describe(errors.RegisteredAlready(foreign, run_id="r1", registrar="r0")),
        messages.describe(errors.StoreUnavailable(foreign, in_sweep=True)),
        client.store_problem("sqlite:///x.db", RuntimeError(foreign)),
    ]
    for message in said:
        assert not RUN_ON.search(message), message
        assert ".." not in message, message
