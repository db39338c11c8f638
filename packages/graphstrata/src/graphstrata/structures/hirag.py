"""HiRAG's hierarchical index (spec seed-hirag.md §2.5–2.7 HiIndex): data, builder, codec.

HiRAG retrieval (:mod:`graphstrata.methods.hirag`) reads the index through :func:`hi_index`
(``state.derived``). The default index is a registered derived structure
(:data:`DEFAULT_HI_INDEX`, :mod:`.registry`): built at index time — by the build's
LLM stage (:func:`~graphstrata.indexing.hirag.summary_entity_stage`) when there is an LLM — and persisted as arrays with
the index (:func:`hi_index_arrays`), so a loaded index's first HiRAG query builds nothing.
:func:`build_hi_index` is a function of the state's records alone (the KG, the entity vectors,
the embedder and, for LLM summaries, the state's LLM client). The :class:`HiIndex` holds no
per-entity Python objects: G_k and the communities are CSR arrays over node indices, and the
entity layer (ids, vectors) is the state's, attached by :meth:`HiIndex.bind`.

1. Layer 0 = the KG entities, with their stored vectors.
2. Layer ``i`` = summary entities of a Gaussian-mixture clustering of layer ``i − 1``
   (scikit-learn ``GaussianMixture``, diagonal covariance, on a PCA projection — the spec's
   UMAP is not a dependency here; fitted on a subsample of ``fit_sample`` nodes and
   ``predict``-ed on the rest). The number of clusters is the BIC minimum over a small grid
   around ``sqrt(n)``; membership is soft (posterior > ``soft_threshold``, spec §9 #6).
   All non-singleton clusters of a layer are summarised in one call of the layer's
   :data:`SummariseFn` (so an LLM summariser runs them concurrently). Offline the summary
   entity is extractive: its name lists its top members (by occurrence weight), its
   description names up to ten, its vector is the normalised centroid of its members. With an
   LLM (:func:`~graphstrata.indexing.hirag.llm_summariser`, spec §2.5.1: one call per cluster, the members' names and
   descriptions in, one summary entity out) name and description are the model's and the
   vector embeds ``name + " " + description`` (spec §2.8; ``HiIndexConfig.summary_vectors``).
   A summary entity links to every member of its cluster (inter-layer edges only, spec
   §9 #12). Singleton clusters carry their node forward (spec §9 #9).
3. Stop rule (spec §2.5 code rules, §9 #10): after clustering a layer, stop when the cluster
   sparsity ``CS = 1 − Σ|S|(|S|−1) / (n(n−1))`` is ≥ ``cs_cap`` or changed by ≤ ``eps``
   relative to the previous layer (``CS_prev`` starts at 0.01, so one layer is always built),
   when ≤ 2 nodes remain, or at ``max_layers``.
4. Communities: Leiden (graspologic-native ``hierarchical_leiden``, leaf clusters of at most
   ``leiden_max_cluster_size`` nodes, fixed seed, edges in sorted order) over the
   *multi-layer* graph G_k
   (KG relations + inter-layer edges), as the spec says — not ArchRAG's layer-1 communities,
   which are built on the flat KG plus k-NN edges. Offline, reports are extractive and made on
   demand by the retrieval (:func:`extractive_community_report`: title = the top members by
   degree, body = the first sentence of the top members' descriptions). With the state's LLM,
   each community gets an LLM report at build time (:func:`~graphstrata.indexing.hirag.llm_community_reports`, stage
   ``"hirag_reports"``, persisted with the index; a failed report keeps the extractive text).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import networkx as nx
import numpy as np

from ..hierarchy import rank_chunks
from ..llm.client import LLMClient
from ..models import l2_normalise
from .clustering import cluster_sparsity, csr_edges, gmm_clusters, leiden_leaves
from .registry import DerivedSpec, lossless_float32, pack_strings, register_derived, unpack_strings
from .summaries import LazyNames, SummariseFn, SummaryCluster, extractive_summariser, llm_stages

SUMMARY_PREFIX = "\u00a7hirag:"  # summary-entity node ids: "§hirag:L<layer>S<index>"

SUMMARY_VECTORS = ("auto", "centroid", "embedding")


@dataclass(frozen=True)
class HiIndexConfig:
    """HiIndex build parameters (spec §2.9 / §10 defaults where they fit offline).

    Attributes:
        max_layers: summary layers at most (spec caps at 50; the hierarchy is 1–3 deep).
        eps: stop when the relative change of cluster sparsity is ≤ eps (spec 0.05).
        cs_cap: stop when cluster sparsity ≥ cs_cap (code rule 0.98; ``None`` disables).
        max_clusters: clusters per layer at most (the code's 49 is small for 10⁴ entities).
        fit_sample: nodes used to fit each GMM (the rest are predicted).
        pca_dim: dimensions of the projection the GMM is fitted in.
        soft_threshold: posterior above which a node also belongs to a cluster.
        leiden_max_cluster_size: Leiden leaf-community size cap (spec 10).
        seed: random seed of PCA / GMM / Leiden.
        summarise_fn: the summary-entity seam (see :data:`SummariseFn`); ``None`` = the
            state's LLM when it has one (:func:`~graphstrata.indexing.hirag.llm_summariser`), else extractive.
        summary_vectors: a summary entity's vector: ``"centroid"`` (normalised mean of its
            members' vectors), ``"embedding"`` (the state's embedder on ``name + " " +
            description``, spec §2.8) or ``"auto"`` (embedding when the summaries are not the
            extractive ones, whose text only lists member names).
        llm_reports: with the state's LLM, write one report per Leiden community at build
            time (spec §2.7, :func:`~graphstrata.indexing.hirag.llm_community_reports`, stage ``"hirag_reports"``);
            ``False`` keeps the extractive community text. Ignored offline.

    Raises:
        ValueError: ``summary_vectors`` is not one of :data:`SUMMARY_VECTORS`.
    """

    max_layers: int = 3
    eps: float = 0.05
    cs_cap: float | None = 0.98
    max_clusters: int = 200
    fit_sample: int = 4000
    pca_dim: int = 16
    soft_threshold: float = 0.1
    leiden_max_cluster_size: int = 10
    seed: int = 0
    summarise_fn: SummariseFn | None = None
    summary_vectors: str = "auto"
    llm_reports: bool = True

    def __post_init__(self) -> None:
        if self.summary_vectors not in SUMMARY_VECTORS:
            raise ValueError(
                f"summary_vectors must be one of {', '.join(SUMMARY_VECTORS)}, got {self.summary_vectors!r}"
            )


class HiIndex:
    """All layers of HiRAG's hierarchical KG plus its communities, as flat arrays.

    Node ``i < n_entities`` is KG entity row ``i`` (its id, row and vector are the state's:
    ``kg.entity_ids[i]``, ``vectors["entities"][i]``, attached by :meth:`bind`); node
    ``n_entities + j`` is summary entity ``j``. Everything a query reads is an array or a list
    of the (few) summary entities, so the index persists as arrays
    (:func:`hi_index_arrays`, :data:`DEFAULT_HI_INDEX`) and a query touches only the nodes it
    visits: nothing here is sized by the corpus except the CSR arrays.

    Attributes:
        n_entities: KG entities (layer 0).
        summary_ids: summary node ids ``"§hirag:L<l>S<j>"``, in node order.
        summary_layer: int64 ``(n_summary,)`` layer (≥ 1) of each summary node.
        names, descriptions: per summary node.
        chunk_ids: per summary node, the source chunks of its most frequent entities.
        summary_vectors: float32 ``(n_summary, dim)`` normalised.
        indptr, indices, weights: G_k (KG relations with their weights, inter-layer edges of
            weight 1) as CSR: int64 ``(n_nodes + 1,)``, int32 ``(2 · edges,)`` neighbour node
            indices and float64 edge weights; each node's neighbours are in edge insertion
            order (KG relations in ``kg.relations`` order, then the inter-layer edges), the
            order a networkx graph built from the same edges iterates them in.
        community_indptr, community_members: Leiden leaf communities as CSR: int64
            ``(n_communities + 1,)`` and int32 sorted member node indices.
        node_community: int32 ``(n_nodes,)`` the community of each node, ``-1`` for none
            (leaf communities partition the nodes they cover).
        sparsity: cluster sparsity of each clustered layer.
        variant: which summaries it holds: ``"extractive"``, ``"llm:<model id>"`` or
            ``"custom"`` (:func:`hi_index_key`).
        report_titles, report_texts: per community, the LLM report's title and body (spec
            §2.7, :func:`~graphstrata.indexing.hirag.llm_community_reports`), ``""`` for a community whose report fell
            back to the extractive text; both empty lists when the index has no LLM reports
            (offline), in which case every community's text is
            :func:`extractive_community_report`.

    Compatibility views (built on access, for inspection and tests; queries do not use them):
    :attr:`node_ids`, :attr:`node_row`, :attr:`layer`, :attr:`vectors`, :attr:`graph`
    (networkx), :attr:`communities`, :attr:`community_of`.
    """

    def __init__(
        self,
        n_entities: int,
        summary_ids: list[str],
        summary_layer: np.ndarray,
        names: list[str],
        descriptions: list[str],
        chunk_ids: list[list[str]],
        summary_vectors: np.ndarray,
        indptr: np.ndarray,
        indices: np.ndarray,
        weights: np.ndarray,
        community_indptr: np.ndarray,
        community_members: np.ndarray,
        node_community: np.ndarray,
        sparsity: list[float] | None = None,
        variant: str = "extractive",
        report_titles: list[str] | None = None,
        report_texts: list[str] | None = None,
    ) -> None:
        self.n_entities = int(n_entities)
        self.summary_ids = list(summary_ids)
        self.summary_layer = np.asarray(summary_layer, np.int64)
        self.names = list(names)
        self.descriptions = list(descriptions)
        self.chunk_ids = [list(c) for c in chunk_ids]
        self.summary_vectors = np.asarray(summary_vectors, np.float32)
        self.indptr = np.asarray(indptr, np.int64)
        self.indices = np.asarray(indices, np.int32)
        self.weights = np.asarray(weights, np.float64)
        self.community_indptr = np.asarray(community_indptr, np.int64)
        self.community_members = np.asarray(community_members, np.int32)
        self.node_community = np.asarray(node_community, np.int32)
        self.sparsity = list(sparsity or [])
        self.variant = str(variant)
        self.report_titles = list(report_titles or [])
        self.report_texts = list(report_texts or [])
        self.summary_row = {nid: self.n_entities + j for j, nid in enumerate(self.summary_ids)}
        self.degree = np.diff(self.indptr)
        self._entity_ids: Sequence[str] | None = None
        self._entity_row: Mapping[str, int] | None = None
        self._entity_vectors: np.ndarray | None = None
        self._check()

    def _check(self) -> None:
        n = self.n_nodes
        s = len(self.summary_ids)
        if not (len(self.summary_layer) == len(self.names) == len(self.descriptions) == len(self.chunk_ids) == s):
            raise ValueError("HiIndex: summary arrays of different lengths")
        if self.summary_vectors.ndim != 2 or len(self.summary_vectors) != s:
            raise ValueError(f"HiIndex: summary_vectors of shape {self.summary_vectors.shape} for {s} summary nodes")
        if len(self.indptr) != n + 1 or self.indptr[0] != 0 or self.indptr[-1] != len(self.indices):
            raise ValueError("HiIndex: graph indptr does not match the node count or the edges")
        if len(self.weights) != len(self.indices) or (len(self.indices) and not (
            0 <= int(self.indices.min()) and int(self.indices.max()) < n
        )):
            raise ValueError("HiIndex: graph edges name unknown nodes")
        c = self.community_indptr
        if len(c) < 1 or c[0] != 0 or c[-1] != len(self.community_members) or len(self.node_community) != n:
            raise ValueError("HiIndex: community arrays do not match")
        if len(self.report_titles) != len(self.report_texts) or (
            self.report_texts and len(self.report_texts) != len(c) - 1
        ):
            raise ValueError("HiIndex: community reports do not match the communities")

    # -- binding to the state's entity layer --------------------------------------------------
    def bind(self, kg, entity_vectors: np.ndarray | None) -> HiIndex:
        """Attach the state's entity ids, rows and vectors (node ``i < n_entities`` is entity
        row ``i``); returns ``self``. A persisted index is decoded without them.

        Raises:
            ValueError: ``kg`` or ``entity_vectors`` hold another number of entities.
        """
        if self._entity_ids is kg.entity_ids and self._entity_vectors is entity_vectors:
            return self
        if len(kg.entity_ids) != self.n_entities:
            raise ValueError(f"HiIndex of {self.n_entities} entities bound to a graph of {len(kg.entity_ids)}")
        if entity_vectors is not None and len(entity_vectors) != self.n_entities:
            raise ValueError(f"HiIndex of {self.n_entities} entities bound to {len(entity_vectors)} entity vectors")
        self._entity_ids, self._entity_row, self._entity_vectors = kg.entity_ids, kg.row, entity_vectors
        return self

    def _bound(self) -> tuple[Sequence[str], Mapping[str, int]]:
        if self._entity_ids is None or self._entity_row is None:
            raise ValueError("HiIndex is not bound to a state's entities (hi_index() binds it)")
        return self._entity_ids, self._entity_row

    # -- per-node access (what queries use) ---------------------------------------------------
    @property
    def n_nodes(self) -> int:
        """Entities plus summary entities."""
        return self.n_entities + len(self.summary_ids)

    def node_id(self, i: int) -> str:
        """The id of node ``i`` (an entity id or a summary id)."""
        if i < self.n_entities:
            return self._bound()[0][i]
        return self.summary_ids[i - self.n_entities]

    def node_ids_of(self, rows: Iterable[int]) -> list[str]:
        """The ids of nodes ``rows`` (ints in ``[0, n_nodes)``), in order: :meth:`node_id` for
        many nodes at once (a large community's member list is read in one pass, not a method
        call per member).

        Raises:
            ValueError: the index is not bound to a state's entities (:meth:`bind`).
            IndexError: a row ``>= n_nodes`` (rows are not checked otherwise, as in
                :meth:`node_id`)."""
        ids, n, summary = self._bound()[0], self.n_entities, self.summary_ids
        return [ids[i] if i < n else summary[i - n] for i in rows]

    def row_of(self, node_id: str) -> int | None:
        """The node index of ``node_id``, ``None`` when it is not a node."""
        i = self.summary_row.get(node_id)
        return i if i is not None else self._bound()[1].get(node_id)

    def layer_of(self, i: int) -> int:
        """The layer of node ``i`` (0 for entities)."""
        return 0 if i < self.n_entities else int(self.summary_layer[i - self.n_entities])

    def neighbours(self, i: int) -> np.ndarray:
        """int32 neighbour node indices of node ``i`` (a view), in edge insertion order."""
        return self.indices[self.indptr[i] : self.indptr[i + 1]]

    def edge_weight(self, i: int, j: int) -> float | None:
        """The weight of edge ``(i, j)``, ``None`` when there is none (scans the smaller of
        the two neighbour lists)."""
        a, b = (i, j) if self.degree[i] <= self.degree[j] else (j, i)
        nbrs = self.neighbours(a)
        hit = np.flatnonzero(nbrs == b)
        return float(self.weights[self.indptr[a] + hit[0]]) if len(hit) else None

    @property
    def n_communities(self) -> int:
        """Leiden leaf communities."""
        return len(self.community_indptr) - 1

    def members(self, c: int) -> np.ndarray:
        """int32 sorted member node indices of community ``c`` (a view)."""
        return self.community_members[self.community_indptr[c] : self.community_indptr[c + 1]]

    def llm_report(self, c: int) -> tuple[str, str] | None:
        """``(title, body)`` of community ``c``'s LLM report, or ``None`` when the index has
        none for it (offline, or the model's report fell back: use
        :func:`extractive_community_report`)."""
        if not self.report_texts or not self.report_texts[c]:
            return None
        return self.report_titles[c], self.report_texts[c]

    def similarity(self, rows: np.ndarray, query: np.ndarray) -> np.ndarray:
        """float32 cosine of ``query`` (float32 ``(dim,)``, normalised) to nodes ``rows``
        (int array): entity rows read the bound entity vectors, summary rows their own."""
        rows = np.asarray(rows, np.int64)
        q = np.asarray(query, np.float32)
        out = np.empty(len(rows), np.float32)
        ent = rows < self.n_entities
        if ent.any():
            if self._entity_vectors is None:
                raise ValueError("HiIndex is not bound to a state's entity vectors")
            out[ent] = self._entity_vectors[rows[ent]] @ q
        if (~ent).any():
            out[~ent] = self.summary_vectors[rows[~ent] - self.n_entities] @ q
        return out

    # -- compatibility views --------------------------------------------------------------
    @property
    def node_ids(self) -> list[str]:
        """Every node id (entity ids, then summary ids): a new list of ``n_nodes``."""
        return list(self._bound()[0]) + self.summary_ids

    @property
    def node_row(self) -> Mapping[str, int]:
        """``{node id: node index}`` as a read-only mapping over the state's entity rows and
        the summary ids (nothing copied)."""
        return _NodeRow(self)

    @property
    def layer(self) -> np.ndarray:
        """int64 ``(n_nodes,)`` layer per node."""
        return np.concatenate([np.zeros(self.n_entities, np.int64), self.summary_layer])

    @property
    def vectors(self) -> np.ndarray:
        """float32 ``(n_nodes, dim)``: entity vectors then summary vectors (a new array)."""
        if self._entity_vectors is None:
            raise ValueError("HiIndex is not bound to a state's entity vectors")
        return np.vstack([self._entity_vectors, self.summary_vectors]).astype(np.float32)

    @cached_property
    def graph(self) -> nx.Graph:
        """G_k as a networkx graph (node ids, edge attribute ``weight``); built on first access."""
        ids = self.node_ids
        g = nx.Graph()
        g.add_nodes_from(ids)
        src = np.repeat(np.arange(self.n_nodes), self.degree)
        keep = src < self.indices
        g.add_weighted_edges_from(
            (ids[a], ids[b], float(w))
            for a, b, w in zip(src[keep].tolist(), self.indices[keep].tolist(), self.weights[keep].tolist(), strict=True)
        )
        return g

    @property
    def communities(self) -> list[list[int]]:
        """Leiden leaf communities as sorted node-index lists."""
        return [self.members(c).tolist() for c in range(self.n_communities)]

    @property
    def community_of(self) -> dict[int, list[int]]:
        """``{node index: [community]}`` for the nodes in a community."""
        nodes = np.flatnonzero(self.node_community >= 0)
        return {int(i): [int(self.node_community[i])] for i in nodes}


class _NodeRow(Mapping):
    """:attr:`HiIndex.node_row`: node id → node index without building a dict of every node."""

    def __init__(self, hi: HiIndex) -> None:
        self._hi = hi

    def __getitem__(self, key: str) -> int:
        i = self._hi.row_of(key)
        if i is None:
            raise KeyError(key)
        return i

    def __contains__(self, key: object) -> bool:
        return isinstance(key, str) and self._hi.row_of(key) is not None

    def __iter__(self) -> Iterator[str]:
        yield from self._hi._bound()[0]
        yield from self._hi.summary_ids

    def __len__(self) -> int:
        return self._hi.n_nodes


def _built_with(state) -> str | None:
    """The id of the LLM ``state``'s records were built with (``state.llm_id``; the facade's
    state's), ``None`` for an offline build."""
    for obj in (state, getattr(state, "state", None)):
        if obj is not None and hasattr(obj, "llm_id"):
            return obj.llm_id
    return None


def _state_llm(state) -> LLMClient | None:
    """The :class:`LLMClient` attached to ``state`` (``state.llm``), which writes its summary
    entities and reports, when the index was built with an LLM; else ``None`` (extractive).

    An offline-built index loaded with an LLM (to answer, or for LightRAG's keywords) keeps its
    extractive HiRAG index: building the LLM one would cost a summary per GMM cluster and a
    report per Leiden community on the first HiRAG query — a surprise bill, as re-extracting
    would be on an update (:func:`~.update.build_llm`)."""
    llm = getattr(state, "llm", None)
    return llm if isinstance(llm, LLMClient) and _built_with(state) is not None else None


def _summariser(state, config: HiIndexConfig) -> SummariseFn:
    """``config.summarise_fn``, else the LLM summariser of the state's LLM, else extractive."""
    if config.summarise_fn is not None:
        return config.summarise_fn
    llm = _state_llm(state)
    return extractive_summariser if llm is None else llm_stages().summariser(llm)


def hi_node_name(kg, hi: HiIndex, i: int) -> str:
    return kg.entities[hi.node_id(i)].name if i < hi.n_entities else hi.names[i - hi.n_entities]


def extractive_community_report(kg, hi: HiIndex, c: int, top: Sequence[int] | None = None) -> tuple[str, str]:
    """The offline ``(title, body)`` of HiRAG community ``c`` (the design's extractive
    community summary): title = the names of its three highest-degree members in G_k, body =
    the first sentence of the descriptions of its top KG-entity members by degree (at most
    three distinct sentences; summary entities contribute to the title only).

    Args:
        kg: the state's knowledge graph; ``hi`` must be bound to it (:meth:`HiIndex.bind`).
        hi: the HiIndex; ``c`` one of its communities.
        top: ``c``'s members already in that order, when the caller has them (a community of
            a million-chunk index has tens of thousands of members: sorting them is the cost).

    Raises:
        ValueError: ``hi`` is not bound to a state's entities.
    """
    if top is None:
        member_arr = hi.members(c)  # ascending node indices
        # by degree, highest first, ties by node index (a stable sort of the ascending members)
        top = member_arr[np.argsort(-hi.degree[member_arr], kind="stable")].tolist()
    title = ", ".join(hi_node_name(kg, hi, i) for i in top[:3])
    sentences: list[str] = []
    for i in top:
        if i >= hi.n_entities:
            continue
        desc = kg.entities[hi.node_id(i)].description
        if desc:
            first = re.split(r"(?<=[.!?])\s+", desc, maxsplit=1)[0]
            if first not in sentences:
                sentences.append(first)
        if len(sentences) >= 3:
            break
    return title, " ".join(sentences)


def build_hi_index(state, config: HiIndexConfig | None = None) -> HiIndex:
    """Build HiIndex over ``state``'s KG (see the module docstring).

    A function of the state's records alone, so it can run on any state (or at index time):

    Args:
        state: an index state, the facade, or any object with the records read: ``kg`` (the
            :class:`~graphstrata.graph.KnowledgeGraph`), ``vectors["entities"]`` (float32
            ``(n_entities, dim)`` in ``kg.entity_ids`` order, L2-normalised), ``embedder``
            (embeds LLM summary entities) and optionally ``llm`` (an
            :class:`~graphstrata.llm.LLMClient` for the summaries).
        config: build parameters (defaults when ``None``); the summariser is
            ``config.summarise_fn``, else :func:`~graphstrata.indexing.hirag.llm_summariser` over ``state.llm`` when that
            is an :class:`~graphstrata.llm.LLMClient`, else :func:`extractive_summariser`.

    Returns:
        The :class:`HiIndex` (``vectors`` float32 ``(n_nodes, dim)``, the entity rows first);
        deterministic for deterministic summaries (always offline).

    Raises:
        ValueError: the summariser returned another number of summaries than clusters.
        LLMError: an LLM call of the LLM summariser failed after its retries.
    """
    config = config or HiIndexConfig()
    kg = state.kg
    ent_vecs = np.asarray(state.vectors.get("entities", np.zeros((0, 1), np.float32)), np.float32)
    summarise = _summariser(state, config)
    b = _LayerBuild(kg, ent_vecs, summarise is extractive_summariser)
    embed = config.summary_vectors == "embedding" or (config.summary_vectors == "auto" and not b.extractive)
    cs_prev = 0.01
    for level in range(1, config.max_layers + 1):
        n = len(b.cur_nodes)
        if n <= 2:
            break
        clusters = gmm_clusters(b.cur_vecs, config)
        cs = cluster_sparsity(clusters, n)
        b.sparsity.append(cs)
        if level > 1 and (
            (config.cs_cap is not None and cs >= config.cs_cap)
            or abs(cs - cs_prev) / cs_prev <= config.eps
        ):
            break
        cs_prev = cs
        cluster_ents, todo = b.summary_clusters(clusters)
        texts = summarise(level, todo) if todo else []
        if len(texts) != len(todo):
            raise ValueError(f"summarise_fn returned {len(texts)} summaries for {len(todo)} clusters")
        summary_vecs = None
        if embed and todo:
            summary_vecs = l2_normalise(
                np.asarray(state.embedder.embed([f"{t} {d}".strip() for t, d in texts]), np.float32)
            )
        if not b.add_layer(level, clusters, cluster_ents, texts, summary_vecs):  # nothing merged
            break
    hi = b.index(config, _variant(state, config))
    llm = _state_llm(state)
    if llm is not None and config.llm_reports and hi.n_communities:
        hi.report_titles, hi.report_texts = llm_stages().community_reports(kg, hi, llm)
    return hi


class _LayerBuild:
    """The layers of a :func:`build_hi_index` run as they grow: every node so far (the KG
    entities, then each layer's summary entities) and the current layer's nodes, vectors and
    entity rows (``cur_ents[i]``: the entity rows under node ``i``, most frequent first;
    ``None`` at layer 0, where node ``i`` is entity ``i``)."""

    def __init__(self, kg, ent_vecs: np.ndarray, extractive: bool) -> None:
        self.kg, self.ent_vecs, self.extractive = kg, ent_vecs, extractive
        self.n0 = len(kg)
        self.node_ids = list(kg.entity_ids)
        self.layers = [0] * self.n0
        self.names: list[str] = []
        self.descriptions: list[str] = []
        self.chunk_lists: list[list[str]] = []
        self.vec_parts = [ent_vecs]
        # occurrence weight of each entity row (orders members and names)
        self.weight = np.asarray([kg.entities[e].weight for e in kg.entity_ids], np.float64)
        self.cur_nodes = list(range(self.n0))
        self.cur_vecs = ent_vecs
        self.cur_ents: list[np.ndarray] | None = None
        self.inter_edges: list[tuple[int, int]] = []
        self.sparsity: list[float] = []

    def node_name(self, i: int) -> str:
        kg = self.kg
        return kg.entities[kg.entity_ids[i]].name if i < self.n0 else self.names[i - self.n0]

    def node_description(self, i: int) -> str:
        kg = self.kg
        return kg.entities[kg.entity_ids[i]].description if i < self.n0 else self.descriptions[i - self.n0]

    def entity_name(self, e: int) -> str:
        return self.kg.entities[self.kg.entity_ids[e]].name

    def summary_clusters(self, clusters: list[list[int]]) -> tuple[dict[int, np.ndarray], list[SummaryCluster]]:
        """The entity rows under each non-singleton cluster (by occurrence weight, then row)
        and what the summariser reads of it, in cluster order."""
        cur_ents, weight, n = self.cur_ents, self.weight, len(self.cur_nodes)
        top_ent = (
            np.arange(n, dtype=np.int64) if cur_ents is None
            else np.fromiter((e[0] for e in cur_ents), np.int64, len(cur_ents))
        )
        cluster_ents = {}
        todo: list[SummaryCluster] = []
        for ci, members in enumerate(clusters):
            if len(members) == 1:
                continue
            m = np.asarray(members, np.int64)
            ents = m if cur_ents is None else np.unique(np.concatenate([cur_ents[i] for i in members]))
            ents = ents[np.lexsort((ents, -weight[ents]))]  # by occurrence weight, then row
            cluster_ents[ci] = ents
            if self.extractive:  # reads the entity names only, and of them the first ten
                todo.append(SummaryCluster([], [], LazyNames(ents, self.entity_name)))
                continue
            below = [self.cur_nodes[i] for i in m[np.lexsort((m, -weight[top_ent[m]]))].tolist()]
            todo.append(
                SummaryCluster(
                    member_names=[self.node_name(i) for i in below],
                    member_descriptions=[self.node_description(i) for i in below],
                    entity_names=[self.entity_name(e) for e in ents.tolist()],
                )
            )
        return cluster_ents, todo

    def add_layer(self, level: int, clusters, cluster_ents, texts, summary_vecs) -> bool:
        """Add layer ``level``: a summary entity per non-singleton cluster (``texts`` in
        cluster order; its vector embedded, ``summary_vecs``, or its members' normalised
        centroid), singletons carried forward. ``False`` (and nothing kept as the current
        layer) when nothing merged."""
        kg, cur_nodes, cur_vecs, cur_ents = self.kg, self.cur_nodes, self.cur_vecs, self.cur_ents
        next_nodes, next_vecs, next_ents = [], [], []
        seen_single: set[int] = set()
        done = 0
        for ci, members in enumerate(clusters):
            if len(members) == 1:  # carried forward unchanged
                m = members[0]
                if m not in seen_single:
                    seen_single.add(m)
                    next_nodes.append(cur_nodes[m])
                    next_vecs.append(cur_vecs[m])
                    next_ents.append(np.asarray([m]) if cur_ents is None else cur_ents[m])
                continue
            ents = cluster_ents[ci]
            title, desc = texts[done]
            idx = len(self.node_ids)
            self.node_ids.append(f"{SUMMARY_PREFIX}L{level}S{len(next_nodes)}")
            self.layers.append(level)
            self.names.append(title)
            self.descriptions.append(desc)
            top_chunks = [kg.entities[kg.entity_ids[e]].chunk_ids for e in ents[:5].tolist()]
            self.chunk_lists.append(rank_chunks(top_chunks, limit=10))
            if summary_vecs is not None:
                v = summary_vecs[done]
            else:
                v = cur_vecs[members].mean(axis=0)
                v = v / max(float(np.linalg.norm(v)), 1e-12)
            done += 1
            self.vec_parts.append(v[None, :].astype(np.float32))
            for m in members:
                self.inter_edges.append((cur_nodes[m], idx))
            next_nodes.append(idx)
            next_vecs.append(v)
            next_ents.append(ents)
        if len(next_nodes) >= len(cur_nodes):
            return False
        self.cur_nodes, self.cur_ents = next_nodes, next_ents
        self.cur_vecs = np.vstack(next_vecs).astype(np.float32)
        return True

    def index(self, config: HiIndexConfig, variant: str) -> HiIndex:
        """The :class:`HiIndex` of the layers: G_k (KG relations + inter-layer edges) as CSR,
        its Leiden leaf communities, bound to the KG's entities."""
        kg, n0, ent_vecs = self.kg, self.n0, self.ent_vecs
        dim = int(ent_vecs.shape[1]) if ent_vecs.ndim == 2 else 1
        summary_vectors = (
            np.vstack(self.vec_parts[1:]).astype(np.float32) if len(self.vec_parts) > 1
            else np.zeros((0, dim), np.float32)
        )
        n_nodes = len(self.node_ids)
        row = kg.row
        rel_a = np.fromiter((row[a] for a, _ in kg.relations), np.int64, len(kg.relations))
        rel_b = np.fromiter((row[b] for _, b in kg.relations), np.int64, len(kg.relations))
        rel_w = np.fromiter((float(r.weight) for r in kg.relations.values()), np.float64, len(kg.relations))
        inter = np.asarray(self.inter_edges, np.int64).reshape(-1, 2)
        ea = np.concatenate([rel_a, inter[:, 0]])
        eb = np.concatenate([rel_b, inter[:, 1]])
        ew = np.concatenate([rel_w, np.ones(len(inter), np.float64)])
        indptr, indices, weights = csr_edges(n_nodes, ea, eb, ew)
        communities = leiden_leaves(ea, eb, ew, config)
        sizes = np.asarray([len(c) for c in communities], np.int64)
        community_indptr = np.zeros(len(communities) + 1, np.int64)
        np.cumsum(sizes, out=community_indptr[1:])
        members = np.asarray([m for c in communities for m in c], np.int32)
        node_community = np.full(n_nodes, -1, np.int32)
        node_community[members] = np.repeat(np.arange(len(communities), dtype=np.int32), sizes)
        hi = HiIndex(
            n_entities=n0, summary_ids=self.node_ids[n0:], summary_layer=np.asarray(self.layers[n0:], np.int64),
            names=self.names, descriptions=self.descriptions, chunk_ids=self.chunk_lists,
            summary_vectors=summary_vectors, indptr=indptr, indices=indices, weights=weights,
            community_indptr=community_indptr, community_members=members, node_community=node_community,
            sparsity=self.sparsity, variant=variant,
        )
        return hi.bind(kg, ent_vecs if len(ent_vecs) == n0 else None)


def _variant(state, config: HiIndexConfig) -> str:
    """``extractive``, ``llm:<model id>`` (no ``summarise_fn`` and an
    :class:`~graphstrata.llm.LLMClient` as ``state.llm``) or ``custom`` (a ``summarise_fn``)."""
    if config.summarise_fn is not None:
        return "custom"
    llm = _state_llm(state)
    # the model the index was built with names the variant, so the HiIndex persisted by an LLM
    # build is used whichever client the index is loaded with
    return "extractive" if llm is None else f"llm:{_built_with(state)}"


def hi_index_key(state, config: HiIndexConfig | None = None) -> str:
    """The key of ``state``'s HiIndex for ``config`` in the state's derived cache
    (:meth:`~graphstrata.state.EngineState.derived`): ``"hirag:index:<config repr>:<variant>"``,
    the variant ``extractive``, ``llm:<model id>`` (``config.summarise_fn`` unset, an
    :class:`~graphstrata.llm.LLMClient` as ``state.llm`` and an LLM-built index; the id of the
    model it was built with) or ``custom`` (a
    ``summarise_fn``), so the variants never share an index."""
    config = config or HiIndexConfig()
    return f"hirag:index:{config!r}:{_variant(state, config)}"


#: the derived-cache key the default HiIndex is persisted under (:data:`DEFAULT_HI_INDEX`); it
#: holds whichever variant the state had when it was prepared (``HiIndex.variant``)
PERSISTED_KEY = "hirag:index"


def _snapshot(state) -> Mapping[str, Any]:
    """The derived cache of ``state`` (an EngineState, the facade, or a wrapper of either)."""
    for obj in (state, getattr(state, "state", None)):
        snap = getattr(obj, "derived_snapshot", None)
        if callable(snap):
            return snap()
    return {}


def hi_index(state, config: HiIndexConfig | None = None) -> HiIndex:
    """The cached :class:`HiIndex` of ``state`` for ``config`` (built on first use per
    state, :meth:`~graphstrata.state.EngineState.derived`, under :func:`hi_index_key`), bound
    to the state's entities (:meth:`HiIndex.bind`).

    With the default config, an index found under :data:`PERSISTED_KEY` (built at index time or
    loaded with the index, :data:`DEFAULT_HI_INDEX`) is used when its variant is the state's.
    With ``config.summarise_fn`` unset, an :class:`~graphstrata.llm.LLMClient` as
    ``state.llm`` and an index built with an LLM (``state.llm_id``; an offline-built index
    loaded with an LLM stays extractive: :func:`_state_llm`), the summary entities are the LLM's (stage ``"hirag_summaries"``; the
    client's response cache makes rebuilding an unchanged layer free, and inside a build or
    update so do the answers the index keeps, :func:`~graphstrata.llm.records.kept_map`); the cache key names the
    variant (``extractive`` or ``llm:<model id>``), so the two never share an index.

    Raises:
        LLMError: as :func:`build_hi_index`.
        ValueError: a persisted index that does not fit the state's entities.
    """
    config = config or HiIndexConfig()

    def build() -> HiIndex:
        if config == HiIndexConfig():
            stored = _snapshot(state).get(PERSISTED_KEY)
            if stored is not None and stored.variant == _variant(state, config):
                return stored
        return build_hi_index(state, config)

    hi = state.derived(hi_index_key(state, config), build)
    return hi.bind(state.kg, state.vectors.get("entities"))


# -- persistence ---------------------------------------------------------------------------


def hi_index_arrays(hi: HiIndex) -> dict[str, np.ndarray]:
    """:class:`HiIndex` as named numpy arrays (no objects; the entity layer is the state's and
    is not stored): what :mod:`.registry` persists."""
    out: dict[str, np.ndarray] = {
        "counts": np.asarray([hi.n_entities, len(hi.summary_ids)], np.int64),
        "summary_layer": hi.summary_layer,
        "summary_vectors": hi.summary_vectors,
        "indptr": hi.indptr,
        "indices": hi.indices,
        "weights": lossless_float32(hi.weights),
        "community_indptr": hi.community_indptr,
        "community_members": hi.community_members,
        "node_community": hi.node_community,
        "sparsity": np.asarray(hi.sparsity, np.float64),
        "chunk_counts": np.asarray([len(c) for c in hi.chunk_ids], np.int64),
    }
    for name, strings in (
        ("summary_ids", hi.summary_ids),
        ("names", hi.names),
        ("descriptions", hi.descriptions),
        ("chunk_ids", [c for cs in hi.chunk_ids for c in cs]),
        ("variant", [hi.variant]),
    ):
        packed = pack_strings(strings)
        out[name], out[f"{name}_offsets"] = packed["utf8"], packed["offsets"]
    if hi.report_texts:  # LLM reports only: an offline index stores exactly what it did before
        for name, strings in (("report_titles", hi.report_titles), ("report_texts", hi.report_texts)):
            packed = pack_strings(strings)
            out[name], out[f"{name}_offsets"] = packed["utf8"], packed["offsets"]
    return out


def hi_index_from_arrays(arrays: Mapping[str, np.ndarray]) -> HiIndex:
    """The inverse of :func:`hi_index_arrays` (unbound: :func:`hi_index` binds it).

    Raises:
        KeyError: a missing array; ValueError: arrays that do not fit together.
    """
    text = {
        name: unpack_strings(arrays[name], arrays[f"{name}_offsets"])
        for name in ("summary_ids", "names", "descriptions", "chunk_ids", "variant")
    }
    counts = np.asarray(arrays["counts"], np.int64).ravel()
    chunk_counts = np.asarray(arrays["chunk_counts"], np.int64).ravel()
    if len(counts) != 2 or int(chunk_counts.sum()) != len(text["chunk_ids"]) or len(text["variant"]) != 1:
        raise ValueError("HiIndex arrays: counts do not match")
    ends = np.cumsum(chunk_counts).tolist()
    flat = text["chunk_ids"]
    chunk_ids = [flat[e - k : e] for e, k in zip(ends, chunk_counts.tolist(), strict=True)]
    if len(text["summary_ids"]) != int(counts[1]):
        raise ValueError("HiIndex arrays: summary count does not match")
    return HiIndex(
        n_entities=int(counts[0]),
        summary_ids=text["summary_ids"],
        summary_layer=arrays["summary_layer"],
        names=text["names"],
        descriptions=text["descriptions"],
        chunk_ids=chunk_ids,
        summary_vectors=arrays["summary_vectors"],
        indptr=arrays["indptr"],
        indices=arrays["indices"],
        weights=arrays["weights"],
        community_indptr=arrays["community_indptr"],
        community_members=arrays["community_members"],
        node_community=arrays["node_community"],
        sparsity=np.asarray(arrays["sparsity"], np.float64).tolist(),
        variant=text["variant"][0],
        report_titles=(
            unpack_strings(arrays["report_titles"], arrays["report_titles_offsets"]) if "report_texts" in arrays else None
        ),
        report_texts=(
            unpack_strings(arrays["report_texts"], arrays["report_texts_offsets"]) if "report_texts" in arrays else None
        ),
    )


#: HiRAG's default HiIndex, built at index time (:func:`~.registry.prepare`) and
#: persisted with the index, so the first HiRAG query after a load does not build it. Built
#: before the other derived structures: its hierarchical Leiden run over every relation is the
#: largest transient of a build's last stage (~2 GB at 10⁶ chunks), and the others then do not
#: sit under it (issue 33).
DEFAULT_HI_INDEX = register_derived(
    DerivedSpec(
        key=PERSISTED_KEY,
        build=lambda state: hi_index(state),
        to_arrays=hi_index_arrays,
        from_arrays=hi_index_from_arrays,
        order=-1,
    )
)
