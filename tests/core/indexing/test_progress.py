"""show_progress: one display per build — a line per stage, and an embedding bar that moves
while the texts embed (not ten one-step bars, not one bar stuck at 0 % for a whole batch)."""

from __future__ import annotations

import re
import time

from graphstrata import GraphStrata
from graphstrata.indexing.progress import SHOWN_EMBED_BATCH
from graphstrata.testing import HashEmbedder


class SlowEmbedder(HashEmbedder):
    """The hashing embedder at a few milliseconds a text, as a CPU model is."""

    def embed(self, texts):
        time.sleep(0.004 * len(texts))
        return super().embed(texts)


def test_one_display_with_a_line_per_stage_and_a_moving_bar(capsys):
    docs = [f"Report {i}: the river Avon flooded the mill at Bath in spring {1900 + i}." for i in range(120)]
    gs = GraphStrata.build(docs, embedder=SlowEmbedder(), show_progress=True)
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if re.match(r"^  \S.* +\d+\.\d s", line)]
    named = {re.split(r"\s{2,}", line.strip())[0] for line in lines}
    assert set(gs.build_seconds) <= named  # every stage has its line
    assert "1/1" not in err  # no one-step bars
    chunk_stage = next(s for s in gs.build_seconds if "chunk" in s and "embed" in s.lower())
    counts = {int(m) for m in re.findall(rf"{re.escape(chunk_stage)}:\s+\d+%\S*\s*\|?[^|]*\|?\s*(\d+)/120", err)}
    assert len(counts) >= 2 and min(counts) < 120, counts  # it moved before the last batch
    assert min(c for c in counts if c) <= SHOWN_EMBED_BATCH * 2
