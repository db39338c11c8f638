"""What is built at index time and read at query time: each structure's data class, its
offline builder, its array codec and its registration (:mod:`.registry`).

Between the state (:mod:`graphstrata.state`) and the methods / indexing stages: a method reads
these structures at query time, an indexing stage may hand a builder its LLM seams (HiRAG's
summariser and reports, :func:`.summaries.provide_llm_stages`), and persistence registers them by
importing this package. Nothing here imports :mod:`graphstrata.methods` or
:mod:`graphstrata.indexing`.

Modules:

* :mod:`.registry` — :class:`DerivedSpec`, :func:`register_derived`, :func:`prepare`,
  :func:`encode` / :func:`decode`, :func:`pack_strings` / :func:`unpack_strings`;
* :mod:`.provenance` — document rows, bounded entity → chunk rows, chunk / community
  provenance;
* :mod:`.push` — walk graphs (:class:`~.push.Transition`, :class:`~.push.PushGraph`) and local
  PageRank;
* :mod:`.passages` — ArchRAG's passage graph, document titles and dates;
* :mod:`.text_vectors` — embedded texts per owner (relation and fact vectors);
* :mod:`.lightrag`, :mod:`.agrag` — those methods' graphs and vectors;
* :mod:`.hirag`, :mod:`.clustering`, :mod:`.summaries` — HiRAG's hierarchical index, its
  GMM / Leiden clusterings and its summary-entity seam (the LLM stages are provided to it).

Importing the package registers every structure (in the order the facade has always
registered them).
"""

from __future__ import annotations

from . import hirag  # noqa: F401  (each registers its structures, in this order, as before)
from . import provenance  # noqa: F401
from . import agrag  # noqa: F401
from . import passages  # noqa: F401
from . import lightrag  # noqa: F401
from .registry import (
    DerivedSpec,
    decode,
    encode,
    pack_strings,
    prepare,
    register_derived,
    registered,
    unpack_strings,
)

__all__ = [
    "DerivedSpec",
    "decode",
    "encode",
    "pack_strings",
    "prepare",
    "register_derived",
    "registered",
    "unpack_strings",
]
