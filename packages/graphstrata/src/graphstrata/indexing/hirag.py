"""HiRAG's hierarchical index as an indexing stage (spec seed-hirag.md §2.5–2.7 HiIndex).

HiRAG retrieval (:mod:`graphstrata.methods.hirag`) reads the index through :func:`hi_index`,
built lazily once per state with ``state.derived`` — or eagerly by a build with an LLM
(:func:`summary_entity_stage`), whose state is constructed with it in its derived cache.
:func:`build_hi_index` is a function of the state's records alone (the KG, the entity vectors,
the embedder and, for LLM summaries, the state's LLM client).

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
   LLM (:func:`llm_summariser`, spec §2.5.1: one call per cluster, the members' names and
   descriptions in, one summary entity out) name and description are the model's and the
   vector embeds ``name + " " + description`` (spec §2.8; ``HiIndexConfig.summary_vectors``).
   A summary entity links to every member of its cluster (inter-layer edges only, spec
   §9 #12). Singleton clusters carry their node forward (spec §9 #9).
3. Stop rule (spec §2.5 code rules, §9 #10): after clustering a layer, stop when the cluster
   sparsity ``CS = 1 − Σ|S|(|S|−1) / (n(n−1))`` is ≥ ``cs_cap`` or changed by ≤ ``eps``
   relative to the previous layer (``CS_prev`` starts at 0.01, so one layer is always built),
   when ≤ 2 nodes remain, or at ``max_layers``.
4. Communities: Leiden (graspologic-native ``hierarchical_leiden``, leaf clusters of at most
   ``leiden_max_cluster_size`` nodes, fixed seed) over the *multi-layer* graph G_k
   (KG relations + inter-layer edges), as the spec says — not ArchRAG's layer-1 communities,
   which are built on the flat KG plus k-NN edges. Reports are extractive and made on demand
   by the retrieval (title = the top members by degree, body = the first sentence of the top
   members' descriptions).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import networkx as nx
import numpy as np

from ..hierarchy import LEIDEN_SEED, rank_chunks
from ..llm.client import LLMClient
from ..llm.prompts.hirag import META_TYPES
from ..models import l2_normalise
from .reports import DEFAULT_SUMMARY_INPUT_TOKENS, SUMMARY_STAGE, summary_entities

SUMMARY_PREFIX = "\u00a7hirag:"  # summary-entity node ids: "§hirag:L<layer>S<index>"

SUMMARY_VECTORS = ("auto", "centroid", "embedding")


@dataclass(frozen=True)
class SummaryCluster:
    """One non-singleton cluster of layer ``l − 1`` that becomes a summary entity of layer ``l``.

    Attributes:
        member_names, member_descriptions: the cluster's nodes in layer ``l − 1`` (KG
            entities for ``l = 1``; summary entities or carried-forward nodes above), most
            frequent first (by the occurrence weight of their top entity): what the spec's
            prompt summarises (§2.5.1).
        entity_names: every KG entity under the cluster (flattened), by occurrence weight
            descending: what the extractive summary names.
    """

    member_names: list[str]
    member_descriptions: list[str]
    entity_names: list[str]


SummariseFn = Callable[[int, list[SummaryCluster]], list[tuple[str, str]]]
"""``summarise_fn(layer, clusters) -> [(name, description), ...]``: the summary-entity seam of
HiIndex (spec §2.5), called once per layer with all its non-singleton clusters, returning one
``(name, description)`` per cluster in order. Defaults: :func:`extractive_summariser` offline,
:func:`llm_summariser` with the state's LLM (see :func:`hi_index`)."""


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
            state's LLM when it has one (:func:`llm_summariser`), else extractive.
        summary_vectors: a summary entity's vector: ``"centroid"`` (normalised mean of its
            members' vectors), ``"embedding"`` (the state's embedder on ``name + " " +
            description``, spec §2.8) or ``"auto"`` (embedding when the summaries are not the
            extractive ones, whose text only lists member names).

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

    def __post_init__(self) -> None:
        if self.summary_vectors not in SUMMARY_VECTORS:
            raise ValueError(
                f"summary_vectors must be one of {', '.join(SUMMARY_VECTORS)}, got {self.summary_vectors!r}"
            )


@dataclass
class HiIndex:
    """All layers of HiRAG's hierarchical KG plus its communities.

    Node ``i < n_entities`` is KG entity row ``i``; the rest are summary entities.

    Attributes:
        node_ids: node ids (entity ids, then ``"§hirag:L<l>S<j>"``).
        node_row: id → node index.
        layer: int layer per node.
        names, descriptions: per summary node (index ``i − n_entities``).
        chunk_ids: per summary node, the source chunks of its most frequent entities.
        vectors: float32 ``(n_nodes, dim)`` normalised.
        graph: networkx G_k (KG relations with their weights, inter-layer edges weight 1).
        communities: Leiden communities as sorted node-index lists.
        community_of: node index → community indices.
        sparsity: cluster sparsity of each clustered layer.
    """

    n_entities: int
    node_ids: list[str]
    node_row: dict[str, int]
    layer: np.ndarray
    names: list[str]
    descriptions: list[str]
    chunk_ids: list[list[str]]
    vectors: np.ndarray
    graph: nx.Graph
    communities: list[list[int]]
    community_of: dict[int, list[int]]
    sparsity: list[float] = field(default_factory=list)


def cluster_sparsity(clusters: Sequence[Sequence[int]], n: int) -> float:
    """``1 − Σ|S|(|S|−1) / (n(n−1))`` (spec §2.6 Eq. 17); 1.0 when ``n < 2``."""
    if n < 2:
        return 1.0
    same = sum(len(c) * (len(c) - 1) for c in clusters)
    return 1.0 - same / (n * (n - 1))


def gmm_clusters(vectors: np.ndarray, config: HiIndexConfig) -> list[list[int]]:
    """Soft GMM clusters of ``vectors`` (node indices, each list sorted; empty ones dropped).

    PCA to ``pca_dim``, then diagonal ``GaussianMixture`` fitted on up to ``fit_sample``
    nodes for each cluster count of a grid around ``sqrt(n)`` (capped at ``max_clusters``);
    the lowest BIC wins and labels every node (argmax, plus any cluster whose posterior
    exceeds ``soft_threshold``).
    """
    from sklearn.decomposition import PCA
    from sklearn.mixture import GaussianMixture

    n = len(vectors)
    if n < 3:
        return [[i] for i in range(n)]
    rng = np.random.default_rng(config.seed)
    dim = min(config.pca_dim, n - 1, vectors.shape[1])
    fit_rows = np.sort(rng.choice(n, size=min(n, config.fit_sample), replace=False))
    pca = PCA(n_components=dim, random_state=config.seed).fit(vectors[fit_rows])
    x = pca.transform(vectors).astype(np.float64)
    xf = x[fit_rows]
    root = max(2, int(round(np.sqrt(n))))
    cap = min(config.max_clusters, len(xf) - 1)
    grid = sorted({max(2, min(int(g), cap)) for g in (root / 2, root, root * 2)})
    best, best_bic = None, np.inf
    for g in grid:
        gm = GaussianMixture(
            n_components=g, covariance_type="diag", random_state=config.seed, max_iter=100,
            reg_covar=1e-4,
        ).fit(xf)
        bic = gm.bic(xf)
        if bic < best_bic:
            best, best_bic = gm, bic
    proba = best.predict_proba(x)
    label = proba.argmax(axis=1)
    clusters: dict[int, set[int]] = {}
    for i, c in enumerate(label.tolist()):
        clusters.setdefault(c, set()).add(i)
    if config.soft_threshold is not None and config.soft_threshold < 1.0:
        rows, cols = np.nonzero(proba > config.soft_threshold)
        for i, c in zip(rows.tolist(), cols.tolist(), strict=True):
            clusters.setdefault(c, set()).add(i)
    return sorted((sorted(m) for m in clusters.values() if m), key=lambda m: (m[0], len(m)))


def _extractive_summary(names: list[str]) -> tuple[str, str]:
    title = ", ".join(names[:3])
    listed = ", ".join(names[:10])
    more = f" and {len(names) - 10} more" if len(names) > 10 else ""
    return title, f"Summary of {len(names)} related entities: {listed}{more}."


def extractive_summariser(layer: int, clusters: list[SummaryCluster]) -> list[tuple[str, str]]:
    """The offline :data:`SummariseFn`: name = the top three entities under the cluster (by
    occurrence weight), description = "Summary of N related entities: <up to ten names>"."""
    return [_extractive_summary(c.entity_names) for c in clusters]


class LLMSummariser:
    """The LLM :data:`SummariseFn` (spec §2.5.1): one call per cluster through
    ``client.map``, our prompt in the spec's record format, the extractive summary where the
    output is unreadable (counted with ``client.skip(stage)``); see
    :func:`graphstrata.indexing.reports.summary_entities`. Its ``repr`` names the model, so it
    keys the derived-index cache.

    Raises (when called):
        LLMError: an LLM call failed after its retries.
    """

    def __init__(
        self,
        client: Any,
        stage: str = SUMMARY_STAGE,
        meta_types: Sequence[str] = META_TYPES,
        max_input_tokens: int = DEFAULT_SUMMARY_INPUT_TOKENS,
    ) -> None:
        self.client = LLMClient.of(client)
        self.stage = stage
        self.meta_types = tuple(meta_types)
        self.max_input_tokens = int(max_input_tokens)

    def __call__(self, layer: int, clusters: list[SummaryCluster]) -> list[tuple[str, str]]:
        return summary_entities(
            self.client,
            [(c.member_names, c.member_descriptions) for c in clusters],
            extractive_summariser(layer, clusters),
            stage=self.stage,
            meta_types=self.meta_types,
            max_input_tokens=self.max_input_tokens,
        )

    def __repr__(self) -> str:
        return (
            f"LLMSummariser(llm={self.client.id!r}, stage={self.stage!r}, "
            f"meta_types={self.meta_types!r}, max_input_tokens={self.max_input_tokens})"
        )


def llm_summariser(
    client: Any,
    *,
    stage: str = SUMMARY_STAGE,
    meta_types: Sequence[str] = META_TYPES,
    max_input_tokens: int = DEFAULT_SUMMARY_INPUT_TOKENS,
) -> LLMSummariser:
    """The LLM :data:`SummariseFn` for ``client`` (an :class:`~graphstrata.llm.LLMClient`, an
    LLM or a callable): pass it as ``HiIndexConfig(summarise_fn=...)``.

    Args:
        client: the LLM.
        stage: ledger stage of its calls (default ``"hirag_summaries"``).
        meta_types: the meta summary-entity types X (spec §2.9 list).
        max_input_tokens: token budget of one cluster's member list (the most frequent
            members are kept; the reference code's 60,000 with random subsampling fits only
            hosted models).

    Raises:
        TypeError: ``client`` is not an LLM, client or callable.
    """
    return LLMSummariser(client, stage, meta_types, max_input_tokens)


def _state_llm(state) -> LLMClient | None:
    llm = getattr(state, "llm", None)
    return llm if isinstance(llm, LLMClient) else None


def _summariser(state, config: HiIndexConfig) -> SummariseFn:
    """``config.summarise_fn``, else the LLM summariser of the state's LLM, else extractive."""
    if config.summarise_fn is not None:
        return config.summarise_fn
    llm = _state_llm(state)
    return extractive_summariser if llm is None else llm_summariser(llm)


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
            ``config.summarise_fn``, else :func:`llm_summariser` over ``state.llm`` when that
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
    n0 = len(kg)
    ent_vecs = np.asarray(state.vectors.get("entities", np.zeros((0, 1), np.float32)), np.float32)
    node_ids = list(kg.entity_ids)
    layers = [0] * n0
    names: list[str] = []
    descriptions: list[str] = []
    chunk_lists: list[list[str]] = []
    vec_parts = [ent_vecs]
    # layer-0 entity rows under each node of the current layer, for names and provenance
    weight = np.asarray([kg.entities[e].weight for e in kg.entity_ids], np.float64)
    cur_nodes = list(range(n0))
    cur_vecs = ent_vecs
    cur_ents: list[list[int]] = [[i] for i in range(n0)]
    inter_edges: list[tuple[int, int]] = []
    sparsity: list[float] = []
    cs_prev = 0.01

    def node_name(i: int) -> str:
        return kg.entities[kg.entity_ids[i]].name if i < n0 else names[i - n0]

    def node_description(i: int) -> str:
        return kg.entities[kg.entity_ids[i]].description if i < n0 else descriptions[i - n0]

    summarise = _summariser(state, config)
    embed = config.summary_vectors == "embedding" or (
        config.summary_vectors == "auto" and summarise is not extractive_summariser
    )
    for level in range(1, config.max_layers + 1):
        n = len(cur_nodes)
        if n <= 2:
            break
        clusters = gmm_clusters(cur_vecs, config)
        cs = cluster_sparsity(clusters, n)
        sparsity.append(cs)
        if level > 1 and (
            (config.cs_cap is not None and cs >= config.cs_cap)
            or abs(cs - cs_prev) / cs_prev <= config.eps
        ):
            break
        cs_prev = cs
        cluster_ents = {}
        todo: list[SummaryCluster] = []
        for ci, members in enumerate(clusters):
            if len(members) == 1:
                continue
            ents = sorted({e for m in members for e in cur_ents[m]}, key=lambda e: (-weight[e], e))
            cluster_ents[ci] = ents
            below = sorted(members, key=lambda m: (-weight[cur_ents[m][0]], m))
            todo.append(
                SummaryCluster(
                    member_names=[node_name(cur_nodes[m]) for m in below],
                    member_descriptions=[node_description(cur_nodes[m]) for m in below],
                    entity_names=[kg.entities[kg.entity_ids[e]].name for e in ents],
                )
            )
        texts = summarise(level, todo) if todo else []
        if len(texts) != len(todo):
            raise ValueError(f"summarise_fn returned {len(texts)} summaries for {len(todo)} clusters")
        summary_vecs = None
        if embed and todo:
            summary_vecs = l2_normalise(
                np.asarray(state.embedder.embed([f"{t} {d}".strip() for t, d in texts]), np.float32)
            )
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
                    next_ents.append(cur_ents[m])
                continue
            ents = cluster_ents[ci]
            title, desc = texts[done]
            idx = len(node_ids)
            node_ids.append(f"{SUMMARY_PREFIX}L{level}S{len(next_nodes)}")
            layers.append(level)
            names.append(title)
            descriptions.append(desc)
            top_chunks = [kg.entities[kg.entity_ids[e]].chunk_ids for e in ents[:5]]
            chunk_lists.append(rank_chunks(top_chunks, limit=10))
            if summary_vecs is not None:
                v = summary_vecs[done]
            else:
                v = cur_vecs[members].mean(axis=0)
                v = v / max(float(np.linalg.norm(v)), 1e-12)
            done += 1
            vec_parts.append(v[None, :].astype(np.float32))
            for m in members:
                inter_edges.append((cur_nodes[m], idx))
            next_nodes.append(idx)
            next_vecs.append(v)
            next_ents.append(ents)
        if len(next_nodes) >= n:  # nothing merged
            break
        cur_nodes, cur_ents = next_nodes, next_ents
        cur_vecs = np.vstack(next_vecs).astype(np.float32)
    vectors = np.vstack(vec_parts).astype(np.float32) if len(node_ids) else ent_vecs
    graph = nx.Graph()
    graph.add_nodes_from(node_ids)
    graph.add_weighted_edges_from(
        (a, b, r.weight) for (a, b), r in kg.relations.items()
    )
    graph.add_weighted_edges_from((node_ids[a], node_ids[b], 1.0) for a, b in inter_edges)
    communities = _leiden(graph, node_ids, config)
    community_of: dict[int, list[int]] = {}
    for ci, members in enumerate(communities):
        for m in members:
            community_of.setdefault(m, []).append(ci)
    return HiIndex(
        n_entities=n0,
        node_ids=node_ids,
        node_row={nid: i for i, nid in enumerate(node_ids)},
        layer=np.asarray(layers, np.int64),
        names=names,
        descriptions=descriptions,
        chunk_ids=chunk_lists,
        vectors=vectors,
        graph=graph,
        communities=communities,
        community_of=community_of,
        sparsity=sparsity,
    )


def _leiden(graph: nx.Graph, node_ids: list[str], config: HiIndexConfig) -> list[list[int]]:
    """Leaf communities of hierarchical Leiden over G_k (spec §2.7); isolated nodes get none."""
    if graph.number_of_edges() == 0:
        return []
    import graspologic_native as gn

    row = {nid: str(i) for i, nid in enumerate(node_ids)}
    edges = []
    for a, b, w in graph.edges(data="weight", default=1.0):
        ra, rb = sorted((int(row[a]), int(row[b])))
        edges.append((str(ra), str(rb), float(max(w, 1e-6))))
    edges.sort()
    result = gn.hierarchical_leiden(
        edges,
        max_cluster_size=config.leiden_max_cluster_size,
        seed=LEIDEN_SEED if config.seed == 0 else config.seed,
        resolution=1.0,
    )
    final: dict[int, int] = {}
    for hc in result:
        if hc.is_final_cluster:
            final[int(hc.node)] = int(hc.cluster)
    groups: dict[int, list[int]] = {}
    for node in sorted(final):
        groups.setdefault(final[node], []).append(node)
    return sorted(groups.values(), key=lambda m: m[0])


def hi_index_key(state, config: HiIndexConfig | None = None) -> str:
    """The key of ``state``'s HiIndex for ``config`` in the state's derived cache
    (:meth:`~graphstrata.state.EngineState.derived`): ``"hirag:index:<config repr>:<variant>"``,
    the variant ``extractive``, ``llm:<model id>`` (``config.summarise_fn`` unset and an
    :class:`~graphstrata.llm.LLMClient` as ``state.llm``) or ``custom`` (a
    ``summarise_fn``), so the variants never share an index."""
    config = config or HiIndexConfig()
    variant = "extractive"
    if config.summarise_fn is None:
        llm = _state_llm(state)
        if llm is not None:
            variant = f"llm:{llm.id}"
    else:
        variant = "custom"
    return f"hirag:index:{config!r}:{variant}"


def hi_index(state, config: HiIndexConfig | None = None) -> HiIndex:
    """The cached :class:`HiIndex` of ``state`` for ``config`` (built on first use per
    state, :meth:`~graphstrata.state.EngineState.derived`, under :func:`hi_index_key`).

    With ``config.summarise_fn`` unset and an :class:`~graphstrata.llm.LLMClient` as
    ``state.llm``, the summary entities are the LLM's (stage ``"hirag_summaries"``; the
    client's response cache makes rebuilding an unchanged layer free); the cache key names the
    variant (``extractive`` or ``llm:<model id>``), so the two never share an index.

    Raises:
        LLMError: as :func:`build_hi_index`.
    """
    config = config or HiIndexConfig()
    return state.derived(hi_index_key(state, config), lambda: build_hi_index(state, config))


def summary_entity_stage(state) -> dict[str, HiIndex]:
    """HiRAG's LLM summary entities as an index-time stage (spec §2.5): the default HiIndex of
    ``state`` (:func:`hi_index` with ``HiIndexConfig()``, the one HiRAG retrieval uses), built
    now so that its calls count in the build's LLM usage and land in the response cache.

    A build or update with an LLM runs it on the state it is about to publish, then constructs
    the published state with the result as its ``derived_seed``
    (:class:`~graphstrata.state.EngineState`): the first HiRAG query finds the index built.
    An index already in ``state``'s derived cache is returned without a call.

    Returns:
        ``{hi_index_key(state): HiIndex}``.

    Raises:
        LLMError: an LLM call failed after its retries.
    """
    config = HiIndexConfig()
    return {hi_index_key(state, config): hi_index(state, config)}
