"""The knowledge graph: merged entities and relations with their source chunks.

:class:`KnowledgeGraph` keeps records in insertion-stable order (entity row ``i`` is vector row
``i`` of the entity layer) and exposes a networkx view for graph algorithms (PageRank, shortest
paths) and a scipy adjacency for the fast paths.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping

import networkx as nx
import numpy as np
import scipy.sparse as sp

from .types import Entity, Relation


class KnowledgeGraph:
    """Entities (nodes) and undirected relations (edges) with provenance.

    Args:
        entities: entity records; their order fixes the row index used by every vector array.
        relations: relation records; endpoints must be entity ids (others are dropped).

    Attributes:
        entities: ``{entity_id: Entity}`` in row order.
        relations: ``{(source, target): Relation}`` with ``source < target``.
        entity_ids: entity ids in row order.
    """

    def __init__(self, entities: Iterable[Entity] = (), relations: Iterable[Relation] = ()):
        self.entities: dict[str, Entity] = {e.id: e for e in entities}
        self.entity_ids: list[str] = list(self.entities)
        self.row: dict[str, int] = {eid: i for i, eid in enumerate(self.entity_ids)}
        self.relations: dict[tuple[str, str], Relation] = {}
        ents = self.entities
        for r in relations:
            s, t = r.source, r.target
            if s in ents and t in ents and s != t:
                self.relations[(s, t) if s < t else (t, s)] = r
        self._nx: nx.Graph | None = None
        self._adj: sp.csr_matrix | None = None
        self._chunk_entities: dict[str, list[str]] | None = None

    @classmethod
    def from_keyed(cls, entities: Iterable[Entity], relations: dict[tuple[str, str], Relation]) -> KnowledgeGraph:
        """A graph from records already checked: ``relations`` keyed ``(source, target)``
        with ``source < target``, both entities of ``entities`` (incremental updates; skips
        the per-relation checks of the constructor)."""
        self = cls()
        self.entities = {e.id: e for e in entities}
        self.entity_ids = list(self.entities)
        self.row = {eid: i for i, eid in enumerate(self.entity_ids)}
        self.relations = relations
        return self

    def __len__(self) -> int:
        return len(self.entities)

    def share_strings(self, chunk_ids: Mapping[str, str]) -> None:
        """Make equal strings and weights one object, in place, as a loaded index holds them
        (:func:`graphstrata.store.read_database`): every relation endpoint and relation key is
        its entity's own id string, every chunk id in ``chunk_ids`` lists is the chunk's own
        (``chunk_ids`` maps an id to that object), equal descriptions (an offline relation's is
        the sentence its entities share, often an entity's own) and equal weights are one object.

        A build's records come back from worker processes with a new string per occurrence:
        at 50k chunks this held ~90 MB (1.8 kB a chunk) of duplicates (issue 33). Values do not
        change; only their identity does.
        """
        texts: dict[str, str] = {}
        numbers: dict[float, float] = {}
        own = {eid: eid for eid in self.entity_ids}
        for e in self.entities.values():
            e.id = own[e.id]
            if e.name == e.id:
                e.name = e.id
            e.description = texts.setdefault(e.description, e.description)
            e.chunk_ids = [chunk_ids.get(c, c) for c in e.chunk_ids]
            e.weight = numbers.setdefault(e.weight, e.weight)
        relations: dict[tuple[str, str], Relation] = {}
        for (a, b), r in self.relations.items():
            r.source, r.target = own.get(r.source, r.source), own.get(r.target, r.target)
            r.description = texts.setdefault(r.description, r.description)
            r.chunk_ids = [chunk_ids.get(c, c) for c in r.chunk_ids]
            r.weight = numbers.setdefault(r.weight, r.weight)
            relations[(own[a], own[b])] = r
        self.relations = relations

    @property
    def nx(self) -> nx.Graph:
        """networkx ``Graph`` view (nodes = entity ids, edge attr ``weight``); built once."""
        if self._nx is None:
            g = nx.Graph()
            g.add_nodes_from(self.entity_ids)
            g.add_weighted_edges_from((a, b, r.weight) for (a, b), r in self.relations.items())
            self._nx = g
        return self._nx

    def adjacency(self) -> sp.csr_matrix:
        """Symmetric weighted adjacency, float32 CSR ``(n_entities, n_entities)``."""
        if self._adj is None:
            n = len(self.entity_ids)
            if self.relations:
                rows = np.fromiter((self.row[a] for a, _ in self.relations), np.int64)
                cols = np.fromiter((self.row[b] for _, b in self.relations), np.int64)
                w = np.fromiter((r.weight for r in self.relations.values()), np.float32)
                m = sp.coo_matrix((w, (rows, cols)), shape=(n, n))
                self._adj = (m + m.T).tocsr()
            else:
                self._adj = sp.csr_matrix((n, n), dtype=np.float32)
        return self._adj

    def neighbors(self, entity_id: str) -> list[str]:
        """Entity ids adjacent to ``entity_id`` (empty for an unknown id)."""
        if entity_id not in self.row:
            return []
        adj = self.adjacency()
        i = self.row[entity_id]
        return [self.entity_ids[j] for j in adj.indices[adj.indptr[i] : adj.indptr[i + 1]]]

    def relation(self, a: str, b: str) -> Relation | None:
        """The relation between ``a`` and ``b`` in either direction, or ``None``."""
        return self.relations.get((a, b) if a < b else (b, a))

    def chunk_entities(self) -> dict[str, list[str]]:
        """``{chunk_id: [entity_id, ...]}``: the inverse of ``Entity.chunk_ids``."""
        if self._chunk_entities is None:
            out: dict[str, list[str]] = defaultdict(list)
            for eid, e in self.entities.items():
                for cid in e.chunk_ids:
                    out[cid].append(eid)
            self._chunk_entities = dict(out)
        return self._chunk_entities

    def induced_relations(self, entity_ids: Iterable[str]) -> list[Relation]:
        """Relations whose both endpoints are in ``entity_ids`` (ArchRAG §3.2 R_0, spec A12)."""
        ids = list(dict.fromkeys(entity_ids))
        out = []
        for i, a in enumerate(ids):
            for b in ids[i + 1 :]:
                r = self.relation(a, b)
                if r is not None:
                    out.append(r)
        return out
