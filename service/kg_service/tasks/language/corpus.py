"""A Python-code corpus built offline from the running interpreter's stdlib.

"ReLU's Revival" trains on CodeParrot (Python source); no download is
possible here, so the corpus is the `.py` files of the Python standard
library that runs kg-train (third-party `site-packages` excluded): the
same files on every machine with the same Python version, and a content
hash that says so.

Each file goes whole to one split, chosen by a hash of its relative path
and `data.seed` (so a file's split does not depend on which other files
are present). Files are read in an order fixed by another hash of the
same (a sample across the whole library, not its first folders), each
split taking files until it holds its share of `data.corpus_bytes`
(test: `test_fraction`; validation: `validation_fraction` of the rest;
the last file of a split is cut at the share). The vocabulary
is bytes: 256 tokens, and bits per byte is the loss in nats over ln 2.

With `vary: [split]` each member takes its own held-out bytes
(`resplit`): the three splits are cut into contiguous blocks of whole
windows, and the member's split seed picks which blocks are validation
and which test (as many bytes as the corpus's own splits, so members
still stack); the rest is its training data. Every byte of a member's
validation and test windows is a held-out byte of its split, never one of
its training bytes.

Importing this module imports neither Keras nor scikit-learn.
"""

import dataclasses
import hashlib
import pathlib
import sysconfig
import zlib

import numpy as np

from kg_service.errors import ServiceError

VOCABULARY_SIZE = 256  # byte-level


@dataclasses.dataclass(frozen=True)
class Corpus:
    """The corpus, split by file, as byte arrays.

    Attributes:
        name: The task name.
        train, validation, test: `uint8` arrays: each split's files joined,
            one newline between files.
        files: `(train, validation, test)` file counts.
        sha256: Hash of every file's relative path and bytes, in order.
        root: The stdlib folder the files came from.
        context: Tokens per training window (the model's context).
    """

    name: str
    train: np.ndarray
    validation: np.ndarray
    test: np.ndarray
    files: tuple
    sha256: str
    root: str
    context: int
    n_classes: int = VOCABULARY_SIZE

    def windows(self, split, limit=None):
        """Non-overlapping `(inputs, targets)` windows of one split.

        Args:
            split: "train", "validation" or "test".
            limit: At most this many windows (the first ones), or all.

        Returns:
            Two `int32` arrays `[n, context]`; targets are inputs shifted
            by one byte.
        """
        data = getattr(self, split)
        n = (len(data) - 1) // self.context
        if limit is not None:
            n = min(n, limit)
        x = data[: n * self.context].reshape(n, self.context)
        y = data[1 : n * self.context + 1].reshape(n, self.context)
        return x.astype("int32"), y.astype("int32")

    @property
    def x_test(self):
        """Test windows: what export verification feeds the SavedModel."""
        return self.windows("test", limit=64)[0]

    def describe(self):
        """One line for the plan and the report's setup."""
        sizes = "/".join(
            f"{len(a):,}" for a in (self.train, self.validation, self.test)
        )
        files = "/".join(str(n) for n in self.files)
        return (
            f"Python standard library source ({self.root}): train/val/test "
            f"{sizes} bytes in {files} files, byte vocabulary "
            f"({self.n_classes}), context {self.context}; sha256 "
            f"{self.sha256[:12]}"
        )

    def tags(self):
        """What a tracked run records so two runs know they saw the same corpus."""
        return {
            "corpus.sha256": self.sha256,
            "corpus.bytes": int(len(self.train) + len(self.validation) + len(self.test)),
            "corpus.files": int(sum(self.files)),
            "corpus.root": self.root,
        }

    def describe_inputs(self):
        return (
            f"int32 [n, t] byte ids (UTF-8 bytes of Python source, t <= "
            f"{self.context}); the served model takes a prompt string."
        )

    def describe_outputs(self):
        return (
            f"float32 [n, t, {self.n_classes}] next-byte logits (the "
            f"SavedModel); the served model returns a greedy continuation "
            f"and the next-byte log-probabilities."
        )

    def metadata(self):
        return {
            "inputs": self.describe_inputs(),
            "outputs": self.describe_outputs(),
            "vocabulary": "bytes (UTF-8), 256 tokens",
            "context": self.context,
            "corpus_sha256": self.sha256,
        }


def stdlib_root():
    """The folder of the running interpreter's standard library."""
    return pathlib.Path(sysconfig.get_paths()["stdlib"])


def source_files(root):
    """Every `.py` file under `root` but third-party packages, sorted by
    relative path (the order of `sha256`'s input is the read order)."""
    skip = {"site-packages", "dist-packages", "__pycache__"}
    files = [
        p for p in root.rglob("*.py")
        if not skip.intersection(p.relative_to(root).parts)
    ]
    return sorted(files, key=lambda p: p.relative_to(root).as_posix())


def _uniform(text):
    return zlib.crc32(text.encode()) / 2**32


def split_of(relative_path, seed, validation_fraction, test_fraction):
    """0 train, 1 validation, 2 test: a fixed function of path and seed."""
    u = _uniform(f"{seed}:{relative_path}")
    if u < test_fraction:
        return 2
    if u < test_fraction + validation_fraction * (1 - test_fraction):
        return 1
    return 0


BLOCK_WINDOWS = 8  # evaluation windows per held-out block (`resplit`)


def blocks(corpus):
    """`(block length, number of blocks)` that `resplit` cuts the corpus's
    bytes (train, validation and test, joined in that order) into: whole
    evaluation windows (`windows`' stride is the context), at most
    `BLOCK_WINDOWS` and no more than the smaller held-out split holds."""
    held_out = min(len(corpus.validation), len(corpus.test)) - 1
    length = corpus.context * max(1, min(BLOCK_WINDOWS, held_out // corpus.context))
    total = len(corpus.train) + len(corpus.validation) + len(corpus.test)
    return length, total // length


def held_out_blocks(corpus, seed):
    """`(validation blocks, test blocks)`: sorted block indices (of
    `blocks(corpus)`) split seed `seed` holds out, as many as the corpus's
    own validation and test splits fill (at least one each)."""
    length, count = blocks(corpus)
    n_val = max(1, len(corpus.validation) // length)
    n_test = max(1, len(corpus.test) // length)
    if n_val + n_test >= count:
        raise ServiceError(
            f"data.corpus_bytes: the corpus's {count} blocks of {length} bytes leave no "
            "training data once each member's own validation and test blocks are held "
            "out (vary: split). Raise data.corpus_bytes, or leave split out of vary."
        )
    chosen = np.random.default_rng(seed).permutation(count)
    return np.sort(chosen[:n_val]), np.sort(chosen[n_val : n_val + n_test])


def resplit(corpus, seed):
    """`corpus` split again with split seed `seed` (`vary: split`).

    The corpus's bytes (its train, validation and test splits, joined in
    that order) are cut into `blocks`; `held_out_blocks(corpus, seed)` are
    the validation and the test split, each its blocks joined in corpus
    order, and every other byte (the remaining blocks, and the tail past
    the last whole block) is the training split, joined likewise. The
    splits' sizes depend on the corpus alone, so members on different
    splits still stack. An evaluation window's (`windows`) inputs lie in
    one block; the last window of a block takes its last target from the
    split's next block: a byte of the same split either way, so no
    validation or test window holds a training byte.

    Example:

    >>> c = Corpus("toy", np.arange(200, dtype=np.uint8), np.arange(40, dtype=np.uint8),
    ...            np.arange(40, dtype=np.uint8), (1, 1, 1), "", "", context=4)
    >>> a, b = resplit(c, 1), resplit(c, 2)
    >>> (len(a.validation), len(a.test), len(a.train)) == (len(b.validation), len(b.test), len(b.train))
    True
    """
    length, count = blocks(corpus)
    joined = np.concatenate([corpus.train, corpus.validation, corpus.test])
    validation, test = held_out_blocks(corpus, seed)
    train = np.setdiff1d(np.arange(count), np.concatenate([validation, test]))
    cut = joined[: count * length].reshape(count, length)
    return dataclasses.replace(
        corpus,
        train=np.concatenate([cut[train].ravel(), joined[count * length :]]),
        validation=cut[validation].ravel(),
        test=cut[test].ravel(),
    )


def load(name, data_cfg, root=None):
    """Reads the corpus of `data_cfg` (corpus_bytes, context, fractions, seed).

    Raises:
        ServiceError: if the stdlib has no source files, or a split gets
            fewer bytes than one window.
    """
    root = pathlib.Path(root) if root is not None else stdlib_root()
    context = data_cfg.context
    files = source_files(root)
    if not files:
        raise ServiceError(
            f"data.dataset: {name}: no .py files under {root}; this Python "
            f"installation ships no standard library sources."
        )
    test = round(data_cfg.corpus_bytes * data_cfg.test_fraction)
    validation = round((data_cfg.corpus_bytes - test) * data_cfg.validation_fraction)
    room = [data_cfg.corpus_bytes - test - validation, validation, test]
    relative = {p: p.relative_to(root).as_posix() for p in files}
    order = sorted(files, key=lambda p: (_uniform(f"order:{data_cfg.seed}:{relative[p]}"),
                                         relative[p]))
    parts = ([], [], [])
    counts = [0, 0, 0]
    digest = hashlib.sha256()
    for path in order:
        if not any(room):
            break
        k = split_of(
            relative[path], data_cfg.seed, data_cfg.validation_fraction, data_cfg.test_fraction
        )
        if not room[k]:
            continue
        content = path.read_bytes()[: room[k]]
        room[k] -= len(content)
        digest.update(relative[path].encode() + b"\0" + content + b"\0")
        parts[k].append(content)
        counts[k] += 1
    arrays = [
        np.frombuffer(b"\n".join(chunks), dtype=np.uint8) for chunks in parts
    ]
    for split, array in zip(("train", "validation", "test"), arrays):
        if len(array) <= context:
            raise ServiceError(
                f"data.corpus_bytes: {data_cfg.corpus_bytes} bytes leave the "
                f"{split} split {len(array)} bytes, fewer than one window of "
                f"data.context + 1 = {context + 1}. Raise data.corpus_bytes "
                f"or the split's fraction."
            )
    return Corpus(
        name=name,
        train=arrays[0],
        validation=arrays[1],
        test=arrays[2],
        files=tuple(counts),
        sha256=digest.hexdigest(),
        root=str(root),
        context=context,
    )
