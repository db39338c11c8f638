"""Step 4 of an incremental update (:mod:`graphstrata.indexing.update`): the community
hierarchy repaired layer by layer, bottom-up (ArchRAG's hierarchy, ``seed-archrag.md`` §1).

Members that disappeared leave their community; a new node joins the community it has the most
link weight to (layer 1: KG relations), else the nearest community vector; a community that
grew past :data:`SPLIT_FACTOR` × ``max_community_size`` or lost more than
:data:`COHESION_DROP` of its cohesion is re-clustered locally with the build's procedure
(k-NN-augmented weighted Leiden, :func:`~graphstrata.hierarchy.leiden_clusters`); touched
communities get a new summary (extractive, or an LLM report,
:func:`~.reports.community_reports`) and vector unless their centroid stayed within
:data:`COMMUNITY_VECTOR_DRIFT`. With LLM reports and the update's
:class:`~graphstrata.llm.records.AnswerBook` open, a community that keeps its report keeps the
answer it was read from, a re-described one owns its new answer (kept or asked), and the
answers of removed or re-described communities are no longer kept. An update that removes documents (``purge``) re-summarises
every touched community whatever its drift, so no summary keeps a deleted sentence.
"""

from __future__ import annotations

import dataclasses
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..extraction import split_sentences
from ..graph import KnowledgeGraph
from ..hierarchy import extractive_summary, knn_augment, leiden_clusters, rank_chunks
from ..llm.records import current_book
from ..llm.report_parsing import CommunityReport
from ..state import EngineState
from ..types import Community
from .communities import hierarchy_config
from .progress import Progress
from .reports import community_reports, graph_context

SPLIT_FACTOR = 1.5
"""A community growing past ``SPLIT_FACTOR × max_community_size`` members is re-clustered."""

COMMUNITY_VECTOR_DRIFT = 0.99
"""A touched community keeps its summary and vector while the cosine between its members'
centroid and the centroid its vector was computed from stays at or above this; only its
entity and chunk lists are refreshed. Past it, summary and vector are recomputed."""

COHESION_DROP = 0.1
"""A community whose cohesion (mean member-to-centroid cosine) fell by more than this in an
update is re-clustered."""


@dataclasses.dataclass
class _LayerEdit:
    """One layer's communities while :meth:`HierarchyUpdate.update_layer` repairs them: a
    community is copied on its first edit (most stay untouched), its members before the edit
    kept in ``old_members``."""

    comms: dict[str, Community]
    parent_of: dict[str, str]  # node of the layer below -> its community
    touched: set[str] = dataclasses.field(default_factory=set)
    old_members: dict[str, list[str]] = dataclasses.field(default_factory=dict)

    def edit(self, cid: str) -> Community:
        """Community ``cid``, copied (with its own member list) on first edit."""
        c = self.comms[cid]
        if cid not in self.touched:
            self.old_members[cid] = c.members
            self.comms[cid] = c = dataclasses.replace(c, members=list(c.members))
            self.touched.add(cid)
        return c


class HierarchyUpdate:
    """Layer-by-layer repair of the community hierarchy of ``state`` for the next KG ``kg``
    (see the module docstring).

    Args:
        state: the current state (read only).
        kg: the next state's knowledge graph.
        vec_of: ``{entity_id: float32 (dim,)}``, the next state's entity vectors.
        frozen: the frozen statistics (``"summary"``: the summaries' TF-IDF model).
        prog: the update's :class:`~.progress.Progress`.
        delta_pairs: the relation pairs the new chunks name (statistical extraction: every
            relation of a new entity is among them), or ``None`` (use the whole KG).
        llm: the index-time LLM client (LLM community reports when
            ``config.llm_community_reports``), or ``None``.
        purge: the update removes documents: every community that lost a member or whose
            members' text changed gets a new summary (the drift rule does not apply), and with
            LLM reports also every community whose members' relations or chunks changed, so no
            summary or report keeps text of a removed document.

    Attributes:
        reclustered, resummarised: counts for the state's drift counters.
    """

    def __init__(self, state: EngineState, kg: KnowledgeGraph, vec_of: dict[str, np.ndarray],
                 frozen: Mapping[str, Any], prog: Progress, delta_pairs: set[tuple[str, str]] | None = None,
                 llm: Any = None, purge: bool = False) -> None:
        self.state = state
        self.purge = purge
        self.llm = llm
        self.config = state.config
        self.kg = kg
        self.prog = prog
        self.below_vec = vec_of  # id -> vector of every node of the layer below (new state)
        self.below_old_vec = {e: state.vectors["entities"][i] for e, i in state.kg.row.items()}
        self.below_comm: dict[str, Community] = {}  # layer >= 2: the members' records
        summary = frozen.get("summary")
        self.vectorizer = summary.vectorizer() if summary is not None else None
        self.reclustered = 0
        self.resummarised = 0
        self._adj: dict[str, list[str]] | None = None
        self._delta_adj: dict[str, list[str]] | None = None
        if delta_pairs is not None:
            self._delta_adj = {}
            for a, b in delta_pairs:
                self._delta_adj.setdefault(a, []).append(b)
                self._delta_adj.setdefault(b, []).append(a)
        self.use_reports = llm is not None and self.config.llm_community_reports
        self.embed_summaries = self.config.community_vectors == "summary" or self.use_reports
        self.hcfg = hierarchy_config(self.config)

    # -- one layer ------------------------------------------------------------------------
    def update_layer(self, level: int, below_removed: set[str], below_added: dict[str, str | None],
                     below_touched: set[str], below_provenance: set[str]):
        """Repair layer ``level`` given what changed in the layer below.

        Args:
            level: the layer (1 = communities of entities).
            below_removed: nodes of the layer below that are gone.
            below_added: new nodes of the layer below → a sibling whose community they join
                first (``None``: placed by :meth:`_assign`).
            below_touched: nodes below whose content changed (a new summary and vector here).
            below_provenance: nodes below whose chunks alone changed (provenance only).

        Returns:
            ``None`` when the layer would be empty (the update falls back to a full build),
            else ``(communities, vectors, old_rows, removed, added, touched, provenance)``:
            the layer's communities in row order, their float32 ``(n, dim)`` vectors, int64
            ``(n,)`` rows in the previous layer (-1: a new or re-vectored node), and the
            change sets the layer above reads as ``below_*``.
        """
        old = self.state.communities[level - 1]
        old_vecs = self.state.vectors[f"layer_{level}"]
        le = _LayerEdit({c.id: c for c in old}, {m: c.id for c in old for m in c.members})
        shrunk, provenance = self._apply_below(level, le, below_removed, below_touched, below_provenance)
        self._place_new(level, le, below_added, [c.id for c in old], old_vecs)
        removed, split, new_nodes = self._split_drifted(level, le, old)
        if len(removed) == len(le.comms):
            return None
        comms, touched = le.comms, le.touched
        # a touched community whose centroid barely moved since its vector was computed keeps
        # summary and vector (changes accumulate until they pass the threshold)
        old_row = {c.id: i for i, c in enumerate(old)}
        for cid in sorted(touched - removed - split - shrunk):
            c = comms[cid]
            if self._settled(c, old_vecs[old_row[cid]], le.old_members.get(cid, [])):
                touched.discard(cid)
                provenance[cid] = c
        fresh = [cid for cid in touched if cid not in removed] + list(new_nodes)
        for cid in list(provenance):
            if cid in touched or cid in removed:
                del provenance[cid]
        self._provenance(level, list(provenance.values()))
        self._describe(level, [comms[cid] for cid in fresh])
        fresh_vec = dict(zip(fresh, self._vectors(level, [comms[cid] for cid in fresh]), strict=True))
        book = current_book()
        if self.use_reports and book is not None:
            # a community whose report stays keeps the answer it was read from
            for c in old:
                if c.id not in removed and c.id not in fresh_vec:
                    book.carry(c.id)
        # rows: surviving communities keep their position, new ones are appended; a touched
        # community keeps its row but gets a new vector (old_rows -1: a new native node)
        order = [c.id for c in old if c.id not in removed] + list(new_nodes)
        layer = [comms[cid] for cid in order]
        rows = np.asarray([-1 if cid in fresh_vec else old_row[cid] for cid in order], np.int64)
        vecs = np.vstack(
            [fresh_vec[cid] if cid in fresh_vec else old_vecs[old_row[cid]] for cid in order]
        ).astype(np.float32)
        # what the layer above sees
        self.below_old_vec = {c.id: old_vecs[i] for i, c in enumerate(old)}
        self.below_vec = {c.id: vecs[i] for i, c in enumerate(layer)}
        self.below_comm = {c.id: c for c in layer}
        return (layer, vecs, rows, removed, new_nodes, {cid for cid in touched if cid not in removed},
                set(provenance))

    def _apply_below(
        self, level: int, le: _LayerEdit, below_removed: set[str], below_touched: set[str],
        below_provenance: set[str],
    ) -> tuple[set[str], dict[str, Community]]:
        """Removed and changed nodes of the layer below edit their communities: the
        communities that must be re-summarised whatever their drift (``shrunk``) and those
        whose provenance alone is recomputed (``{id: community}``)."""
        shrunk: set[str] = set()  # lost members: always re-summarised (no stale names)
        for m in below_removed:
            if m in le.parent_of:
                le.edit(le.parent_of[m]).members.remove(m)
                shrunk.add(le.parent_of[m])
        for m in below_touched:
            if m in le.parent_of:
                le.edit(le.parent_of[m])
                if self.purge:
                    shrunk.add(le.parent_of[m])
        if self.purge and self.use_reports and level == 1:
            # an LLM report also quotes relations and chunks: rewrite it too
            for m in below_provenance:
                if m in le.parent_of:
                    le.edit(le.parent_of[m])
                    shrunk.add(le.parent_of[m])
            below_provenance = set()
        # a member whose chunks alone changed: the community's provenance is recomputed, its
        # summary and vector are kept
        provenance: dict[str, Community] = {}
        for m in below_provenance:
            cid = le.parent_of.get(m)
            if cid is not None and cid not in le.touched and cid not in provenance:
                provenance[cid] = le.comms[cid] = dataclasses.replace(le.comms[cid])
        return shrunk, provenance

    def _place_new(self, level: int, le: _LayerEdit, below_added: dict[str, str | None],
                   centroid_ids: list[str], old_vecs: np.ndarray) -> None:
        """New nodes of the layer below join their sibling's community, else the one
        :meth:`_assign` picks."""
        orphans = []
        for node, sibling in below_added.items():
            home = le.parent_of.get(sibling) if sibling is not None else None
            if home is None or home not in le.comms:
                orphans.append(node)
                continue
            le.edit(home).members.append(node)
            le.parent_of[node] = home
        for node, home in self._assign(level, orphans, le.parent_of, le.comms, centroid_ids, old_vecs).items():
            le.edit(home).members.append(node)
            le.parent_of[node] = home

    def _split_drifted(
        self, level: int, le: _LayerEdit, old: Sequence[Community]
    ) -> tuple[set[str], set[str], dict[str, str | None]]:
        """Drift: touched communities that grew too large or lost cohesion split, empty ones
        go. Returns ``(removed, split, new_nodes)``; ``new_nodes`` maps a new community id to
        the community it split from."""
        removed: set[str] = set()
        split: set[str] = set()
        new_nodes: dict[str, str | None] = {}
        next_index = 1 + max((int(c.id.split("C", 1)[1]) for c in old if "C" in c.id), default=-1)
        for cid in sorted(le.touched):
            c = le.comms[cid]
            if not c.members:
                removed.add(cid)
                continue
            parts = self._split(level, c, old_members=le.old_members.get(cid, []))
            if len(parts) > 1:
                split.add(cid)
                self.reclustered += 1
                c.members = parts[0]
                for part in parts[1:]:
                    nid = f"L{level}C{next_index}"
                    next_index += 1
                    le.comms[nid] = Community(id=nid, layer=level, members=part)
                    new_nodes[nid] = cid
        return removed, split, new_nodes

    def _settled(self, c: Community, old_vec: np.ndarray, old_members: list[str]) -> bool:
        """Whether ``c``'s centroid is within :data:`COMMUNITY_VECTOR_DRIFT` (cosine) of what
        its vector was computed from: its stored vector for centroid vectors, else the centroid
        of its previous members."""
        new = _centroid(np.vstack([self.below_vec[m] for m in c.members]))
        if self.embed_summaries:
            olds = [self.below_old_vec[m] for m in old_members if m in self.below_old_vec]
            if not olds:
                return False
            old_vec = _centroid(np.vstack(olds))
        norm = float(np.linalg.norm(old_vec))
        return norm > 0 and float(new @ old_vec) / norm >= COMMUNITY_VECTOR_DRIFT

    def _neighbors(self, node: str) -> list[str]:
        """KG neighbours of an entity (a dict adjacency built once per update: cheaper than the
        graph's weighted CSR, which the next state builds on its first query)."""
        if self._adj is None:
            adj: dict[str, list[str]] = {}
            for a, b in self.kg.relations:
                adj.setdefault(a, []).append(b)
                adj.setdefault(b, []).append(a)
            self._adj = adj
        return self._adj.get(node, [])

    def _provenance(self, level: int, comms: list[Community]) -> None:
        """Recompute the entity ids and ranked chunk provenance of communities from their
        members (alone where only the members' chunks changed; as part of :meth:`_describe`)."""
        kg = self.kg
        for c in comms:
            if level > 1:
                c.entity_ids = sorted(
                    {e for m in c.members for e in self.below_comm[m].entity_ids}, key=lambda e: kg.row[e]
                )
            else:
                c.entity_ids = sorted(c.members, key=lambda e: kg.row[e])
            c.chunk_ids = rank_chunks([kg.entities[e].chunk_ids for e in c.entity_ids])

    def _assign(self, level, nodes, parent_of, comms, centroid_ids, old_vecs) -> dict[str, str]:
        """Home community of each new node: most link weight (layer 1: KG relations), else the
        nearest community vector."""
        out: dict[str, str] = {}
        if not nodes:
            return out
        pending = list(nodes)
        if level == 1:
            for _ in range(3):  # new entities linked only to each other settle in a few passes
                still = []
                for node in pending:
                    weight: Counter = Counter()
                    nbs = self._delta_adj.get(node, []) if self._delta_adj is not None else self._neighbors(node)
                    for nb in nbs:
                        home = parent_of.get(nb) or out.get(nb)
                        if home is not None and home in comms:
                            weight[home] += self.kg.relation(node, nb).weight
                    if weight:
                        out[node] = max(weight, key=lambda h: (weight[h], h))
                    else:
                        still.append(node)
                if len(still) == len(pending):
                    break
                pending = still
        pending = [n for n in pending if n not in out]
        if pending:
            alive = [i for i, cid in enumerate(centroid_ids) if cid in comms]
            if not alive:
                return out
            q = np.vstack([self.below_vec[n] for n in pending])
            best = np.argmax(q @ old_vecs[np.asarray(alive)].T, axis=1)
            for n, b in zip(pending, best.tolist(), strict=True):
                out[n] = centroid_ids[alive[b]]
        return out

    def _split(self, level: int, c: Community, old_members: list[str]) -> list[list[str]]:
        """Local re-clustering of a drifted community, or ``[members]`` unchanged."""
        members = c.members
        if len(members) < 2:
            return [members]
        vecs = np.vstack([self.below_vec[m] for m in members])
        too_big = len(members) > SPLIT_FACTOR * self.config.max_community_size
        drifted = False
        if not too_big and old_members:
            olds = [self.below_old_vec[m] for m in old_members if m in self.below_old_vec]
            if olds:
                drifted = _cohesion(np.vstack(olds)) - _cohesion(vecs) > COHESION_DROP
        if not (too_big or drifted):
            return [members]
        edges = self._edges(level, members)
        aug, weights = knn_augment(vecs, edges, self.hcfg)
        clusters = leiden_clusters(len(members), aug, weights, vecs, self.hcfg)
        return [[members[i] for i in cl] for cl in clusters] if len(clusters) > 1 else [members]

    def _edges(self, level: int, members: list[str]) -> np.ndarray:
        """int64 ``(m, 2)`` local index pairs of linked members (layer ≥ 2: communities
        linked when their entities are, spec A2)."""
        pos = {m: i for i, m in enumerate(members)}
        pairs: set[tuple[int, int]] = set()
        if level == 1:  # a community is small: test its member pairs (no graph-wide adjacency)
            rel = self.kg.relations
            for i, a in enumerate(members):
                for j in range(i + 1, len(members)):
                    b = members[j]
                    if (a, b) in rel or (b, a) in rel:
                        pairs.add((i, j))
        else:
            owner = {e: pos[m] for m in members for e in self.below_comm[m].entity_ids}
            for e, i in owner.items():
                for nb in self._neighbors(e):
                    j = owner.get(nb)
                    if j is not None and j != i:
                        pairs.add((min(i, j), max(i, j)))
        return np.asarray(sorted(pairs), np.int64).reshape(-1, 2)

    def _describe(self, level: int, comms: list[Community]) -> None:
        """Entity ids, chunk provenance, title and summary (extractive, or an LLM report)."""
        if not comms:
            return
        kg = self.kg
        self._provenance(level, comms)
        candidates = []
        for c in comms:
            if level == 1:
                sentences = [
                    kg.entities[e].description[s:t] for e in c.members
                    for s, t in split_sentences(kg.entities[e].description)
                ]
            else:
                sentences = [self.below_comm[m].summary for m in c.members if self.below_comm[m].summary]
            candidates.append(sentences)
        vectorizer = self.vectorizer
        if vectorizer is not None:  # one TF-IDF transform for every touched community
            vectorizer = _RowCache(vectorizer, [s for sents in candidates for s in sents if s])
        texts = []
        for c, sentences in zip(comms, candidates, strict=True):
            if vectorizer is not None:
                title, summary = extractive_summary(
                    [kg.entities[e].name for e in c.entity_ids],
                    [kg.entities[e].weight for e in c.entity_ids],
                    sentences,
                    vectorizer,
                )
            else:
                title, summary = ", ".join(kg.entities[e].name for e in c.entity_ids[:3]), " ".join(sentences[:3])
            texts.append((title, summary))
        if self.use_reports:
            texts = self._reports(level, comms, texts)
        for c, (title, summary) in zip(comms, texts, strict=True):
            c.title, c.summary = title, summary
        self.resummarised += len(comms)

    def _reports(self, level: int, comms: list[Community], fallbacks: list[tuple[str, str]]):
        contexts = []
        for c in comms:
            subs = [] if level == 1 else [
                CommunityReport(title=s.title, summary=s.summary, findings=list(s.findings), rating=s.rating)
                for s in (self.below_comm[m] for m in c.members)
            ]
            contexts.append(graph_context(self.kg, c.entity_ids, subs))
        reports = self.prog.stage(
            f"community reports (LLM), layer {level}",
            lambda: community_reports(self.llm, contexts, fallbacks, stage=f"community_reports:layer_{level}"),
        )
        book = current_book()
        for c, r in zip(comms, reports, strict=True):
            c.rating, c.findings = r.rating, list(r.findings)
            if book is not None:  # the answer the new report was read from stays with the index
                book.own(c.id, r.answer_key)
        return [(r.title, r.text()) for r in reports]

    def _vectors(self, level: int, comms: list[Community]) -> list[np.ndarray]:
        if not comms:
            return []
        if self.embed_summaries:
            v = self.prog.embed(self.state.embedder, [f"{c.title}\n{c.summary}" for c in comms], "embedding communities")
            return list(v)
        return [_centroid(np.vstack([self.below_vec[x] for x in c.members])) for c in comms]


class _RowCache:
    """A fitted vectorizer's ``transform`` over a known set of texts, computed in one call
    (scikit-learn's per-call validation dominated many small transforms)."""

    def __init__(self, vectorizer: Any, texts: Sequence[str]) -> None:
        self._pos = {t: i for i, t in enumerate(dict.fromkeys(texts))}
        self._matrix = vectorizer.transform(list(self._pos)).tocsr() if self._pos else None
        self._vectorizer = vectorizer

    def transform(self, texts: Sequence[str]) -> Any:
        rows = [self._pos.get(t) for t in texts]
        if self._matrix is None or any(r is None for r in rows):
            return self._vectorizer.transform(list(texts))
        return self._matrix[rows]


def _centroid(vecs: np.ndarray) -> np.ndarray:
    """float32 ``(dim,)``: the L2-normalised mean of the rows (a community's offline vector)."""
    m = vecs.mean(axis=0)
    return (m / max(float(np.linalg.norm(m)), 1e-12)).astype(np.float32)


def _cohesion(vecs: np.ndarray) -> float:
    """Mean cosine of rows (L2-normalised) to their normalised centroid."""
    if len(vecs) < 2:
        return 1.0
    return float((vecs @ _centroid(vecs)).mean())


__all__ = ["COHESION_DROP", "COMMUNITY_VECTOR_DRIFT", "SPLIT_FACTOR", "HierarchyUpdate"]
