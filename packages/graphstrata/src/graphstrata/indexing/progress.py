"""Stage timing, progress bars and batched embedding shared by every indexing stage."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..models import Embedder, l2_normalise
from ..runner import current_runner

EMBED_BATCH = 256


class Progress:
    """Stage timer and optional tqdm bars (``show``): ``seconds[stage]`` accumulates wall time.

    A stage run inside another (community embedding or a new C-HNSW layer inside clustering)
    is timed under its own name only: the enclosing stage's seconds leave it out, so the
    stages add up to the build's time.
    """

    def __init__(self, show: bool) -> None:
        self.show = show
        self.seconds: dict[str, float] = {}
        self._open: list[float] = []  # seconds of nested stages, per open stage

    def _start(self) -> float:
        self._open.append(0.0)
        return time.perf_counter()

    def _stop(self, name: str, t0: float) -> None:
        elapsed = time.perf_counter() - t0
        nested = self._open.pop()
        self.seconds[name] = self.seconds.get(name, 0.0) + elapsed - nested
        if self._open:
            self._open[-1] += elapsed

    def embed(self, embedder: Embedder, texts: Sequence[str], stage: str) -> np.ndarray:
        """Embed ``texts`` in batches of :data:`EMBED_BATCH` on the active runner
        (:func:`graphstrata.runner.current_runner`; the batches are the same whatever runs them).

        Returns:
            float32 ``(len(texts), embedder.dim)``, rows L2-normalised.

        Raises:
            ValueError: the embedder returned another shape.
        """
        t0 = self._start()
        try:
            return self._embed(embedder, texts, stage)
        finally:
            self._stop(stage, t0)

    def _embed(self, embedder: Embedder, texts: Sequence[str], stage: str) -> np.ndarray:
        texts = list(texts)
        bar = None
        if self.show and texts:
            from tqdm.auto import tqdm

            bar = tqdm(total=len(texts), desc=stage, unit="text")
        parts = []
        batches = [texts[i : i + EMBED_BATCH] for i in range(0, len(texts), EMBED_BATCH)]
        for batch, out in zip(batches, current_runner().embed(embedder, batches), strict=True):
            vecs = np.asarray(out, dtype=np.float32)
            if vecs.shape != (len(batch), embedder.dim):
                raise ValueError(
                    f"embedder {embedder.id!r} returned shape {vecs.shape} for {len(batch)} "
                    f"texts; expected ({len(batch)}, {embedder.dim})"
                )
            parts.append(vecs)
            if bar is not None:
                bar.update(len(batch))
        if bar is not None:
            bar.close()
        if not parts:
            return np.zeros((0, embedder.dim), dtype=np.float32)
        return l2_normalise(np.vstack(parts))

    def stage(self, name: str, fn: Callable[[], Any]) -> Any:
        """Run ``fn()`` as stage ``name`` (timed, with a one-step bar when ``show``)."""
        t0 = self._start()
        try:
            if self.show:
                from tqdm.auto import tqdm

                with tqdm(total=1, desc=name, unit="stage") as bar:
                    out = fn()
                    bar.update(1)
            else:
                out = fn()
        finally:
            self._stop(name, t0)
        return out
