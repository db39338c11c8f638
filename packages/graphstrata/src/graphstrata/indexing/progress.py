"""Stage timing, progress bars and batched embedding shared by every indexing stage."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..models import Embedder
from ..structures.text_vectors import EMBED_BATCH, embed_batches

#: Texts per embedding batch while a progress display is shown: the bar moves every few
#: seconds even with the offline MiniLM on a CPU (a 256-text batch kept it at 0 % for ~8 s).
SHOWN_EMBED_BATCH = 32


def _line(name: str, seconds: float, extra: str = "") -> None:
    """One finished stage on the progress display (stderr, through tqdm so a live bar stays
    intact)."""
    from tqdm.auto import tqdm

    tqdm.write(f"  {name:<34} {seconds:7.1f} s{extra}", file=sys.stderr)


class Progress:
    """Stage timer and optional progress display (``show``): ``seconds[stage]`` accumulates
    wall time.

    The display is one per build: a line per stage as it finishes (name and seconds) and, while
    texts are embedded, one live bar that moves batch by batch (batches of
    :data:`SHOWN_EMBED_BATCH` texts) and is replaced by the stage's line when done.

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
            out = self._embed(embedder, texts, stage)
        finally:
            self._stop(stage, t0)
        if self.show and len(texts):
            _line(stage, time.perf_counter() - t0, f"  ({len(texts)} texts)")
        return out

    def _embed(self, embedder: Embedder, texts: Sequence[str], stage: str) -> np.ndarray:
        texts = list(texts)
        bar = None
        if self.show and texts:
            from tqdm.auto import tqdm

            bar = tqdm(total=len(texts), desc=f"  {stage}", unit="text", leave=False, file=sys.stderr)
        # one output array, each batch normalised into its rows as it arrives (row-wise, so the
        # same bits as normalising the whole): no list of parts, no stacked and divided copies
        # (issue 33: three copies of 1.7 GB of entity vectors at 1M chunks)
        out = np.empty((len(texts), embedder.dim), dtype=np.float32)
        size = SHOWN_EMBED_BATCH if bar is not None else EMBED_BATCH
        batches = [texts[i : i + size] for i in range(0, len(texts), size)]
        embed_batches(embedder, batches, out, bar.update if bar is not None else None)
        if bar is not None:
            bar.close()
        return out

    def stage(self, name: str, fn: Callable[[], Any]) -> Any:
        """Run ``fn()`` as stage ``name`` (timed; its line printed when done when ``show``)."""
        t0 = self._start()
        try:
            out = fn()
        finally:
            self._stop(name, t0)
        if self.show:
            _line(name, time.perf_counter() - t0)
        return out
