"""The build's per-chunk stages alone — chunking and BM25 — on scale corpora, timed as the build
runs them (its worker pool on every core), one corpus after the other in this process.

The whole-build benchmark (``bench_scale.py``) times every stage of a full build; a 1M-chunk
build takes ~48 minutes on the 2-core VM, so a rerun of just these two stages on an otherwise
idle machine is what checks their growth exponent (issue 33: every stage ≤ n^1.1 from 50k to 1M
chunks) when the full builds' figures were taken beside other work.

    .venv/bin/python bench/bench_scale_stages.py .bench_out/scale/corpus-50000-s0 .bench_out/scale/corpus-1000000-s0

Prints one JSON line per corpus (chunks, seconds per stage) and the fitted exponent
``b`` of ``t ∝ n^b`` between the first and the last corpus.
"""

from __future__ import annotations

import json
import math
import sys
import time

from graphstrata.config import as_config
from graphstrata.bm25 import BM25Index, lexical_texts
from graphstrata.indexing.build import build_runner, lexical_tokens
from graphstrata.indexing.chunks import chunk_stage
from graphstrata.loaders import load_documents
from graphstrata.models import resolve_embedder
from graphstrata.runner import current_runner
from graphstrata.types import DocumentChunk


def stages(corpus: str) -> dict[str, float | int | str]:
    """Chunking and BM25 of the fast preset's build over the files under ``corpus``."""
    config = as_config(None)
    embedder = resolve_embedder("fast")
    docs = load_documents((), paths=[corpus], max_document_chars=config.max_document_chars)
    with build_runner(docs, config):
        start = time.perf_counter()
        chunks = chunk_stage(docs, config, embedder)
        chunking = time.perf_counter() - start
        documents = {d.id: d for d in docs}
        chunks = DocumentChunk.of_documents(chunks, documents)
        start = time.perf_counter()
        texts = lexical_texts(chunks, documents, config.use_titles)
        BM25Index(tokens=lexical_tokens(texts, current_runner()))
        bm25 = time.perf_counter() - start
    return {"corpus": corpus, "chunks": len(chunks), "chunking_s": chunking, "bm25_s": bm25}


def main(argv: list[str]) -> None:
    if len(argv) < 1:
        raise SystemExit(__doc__)
    rows = []
    for corpus in argv:
        rows.append(stages(corpus))
        print(json.dumps(rows[-1]), flush=True)
    if len(rows) > 1:
        a, b = rows[0], rows[-1]
        span = math.log(b["chunks"] / a["chunks"])
        for key in ("chunking_s", "bm25_s"):
            print(
                f"{key[:-2]}: n^{math.log(b[key] / a[key]) / span:.2f} from {a['chunks']:,} to {b['chunks']:,} chunks"
            )


if __name__ == "__main__":
    main(sys.argv[1:])
