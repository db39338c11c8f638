"""graphstrata's knowledge-graph extraction as a LlamaIndex transformation.

:class:`GraphStrataExtractor` runs the core's offline ``StatisticalExtractor`` (or, given an
``llm``, its ``LLMExtractor``) and writes ``metadata["nodes"]`` (``EntityNode``) and
``metadata["relations"]`` (``Relation``), the ``KG_NODES_KEY`` / ``KG_RELATIONS_KEY`` contract
of ``PropertyGraphIndex``'s extractors, so it plugs into
``PropertyGraphIndex(kg_extractors=[...])``, an ``IngestionPipeline`` and any property graph
store. It lived in ``llama-index-node-parser-graphstrata`` before; LlamaHub keeps extractors in
``llama-index-extractors-*``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from llama_index.core.bridge.pydantic import Field
from llama_index.core.graph_stores.types import (
    KG_NODES_KEY,
    KG_RELATIONS_KEY,
    EntityNode,
    Relation,
)
from llama_index.core.schema import BaseNode, MetadataMode, TransformComponent
from llama_index.core.utils import get_tqdm_iterable


class GraphStrataExtractor(TransformComponent):
    """Knowledge-graph extraction: offline (graphstrata's ``NLPExtractor``, or its
    ``StatisticalExtractor`` with ``extractor="statistical"``) or, with ``llm``, by an LLM
    (graphstrata's ``LLMExtractor``).

    With ``extractor="nlp"`` (graphstrata.nlp: the packaged spaCy pipeline
    ``en_core_web_sm`` 3.8.0): entities are typed named entities (``EntityNode.label``
    ``person``, ``organization``, ``place``, ``date``, ``work``, ...) and noun-phrase concepts
    (``concept``), plus (optionally) the document title; relations join two entities of one
    sentence and are labelled with what the sentence says between them (``directed``,
    ``born in``, ``member of``), ``relation_label`` where it says nothing; descriptions are
    the sentences. ``extractor="statistical"`` (the default): capitalised name spans and top TF-IDF
    1–3-grams of each node, relations are co-occurrences (``relation_label``). The TF-IDF
    model is fitted on the nodes of one call, so pass a whole corpus (or large batches) at
    once; ``PropertyGraphIndex`` and ``IngestionPipeline`` (with ``num_workers`` unset) do.

    For each node the extractor appends, like LlamaIndex's own extractors, to
    ``node.metadata[KG_NODES_KEY]`` (``"nodes"``) a list of ``EntityNode`` and to
    ``node.metadata[KG_RELATIONS_KEY]`` (``"relations"``) a list of ``Relation`` whose
    ``source_id`` / ``target_id`` are ``EntityNode.id`` of entities listed for the same node.

    * ``EntityNode(name=<most frequent surface form>, label=entity_label)``, properties:
      the node's metadata (when ``include_metadata``), ``description`` (the sentences that
      mention it, corpus-wide), ``weight`` (mention count), ``entity_id`` (canonical key).
    * ``Relation(label=relation_label, source_id, target_id)``, properties: the node's
      metadata (when ``include_metadata``), ``description`` (the sentences where both occur),
      ``weight`` (number of such sentences). Statistical relations are undirected
      co-occurrences; ``source`` sorts before ``target`` by canonical key.

    With ``llm`` (LightRAG's extraction, ``seed-lightrag.md`` §1.4-1.7: one call per node plus
    ``gleaning`` passes, at most ``llm_concurrency`` in flight): an ``EntityNode``'s label is
    the entity type the LLM gave (``"person"``, ``"organization"``, ``"geo"``, ``"event"``;
    ``entity_label`` when it gave none) and its ``description`` the LLM's; a ``Relation``'s
    label is its first LLM keyword (``relation_label`` when none), with ``description``,
    ``keywords`` and ``weight`` (summed strength) in its properties. The TF-IDF options do
    not apply. The calls and tokens of the last call: :attr:`last_usage`.

    Args:
        extractor: ``"statistical"`` (default) or ``"nlp"`` (offline only).
        top_n: TF-IDF terms kept per node (≥ 0; statistical).
        ngram_range: TF-IDF n-gram lengths.
        min_df: minimum document frequency of a TF-IDF term (lowered to 1 under 20 nodes).
        max_description_sentences: sentences kept per description.
        use_titles: make ``metadata[title_key]`` of each source document an entity.
        title_key: metadata key of the title.
        entity_label, relation_label: labels written on entities / relations.
        max_entities_per_node, max_relations_per_node: keep only the heaviest (``None``: all).
        include_metadata: copy the node's metadata into the properties (as
            ``SimpleLLMPathExtractor`` does).
        llm: a LlamaIndex ``LLM`` (wrapped in ``LlamaIndexLLM``), a graphstrata ``LLM`` /
            ``LLMClient`` or a plain callable: extract with it. ``None``: offline.
        gleaning: extra extraction passes per node with ``llm`` (≥ 0).
        llm_concurrency: LLM calls in flight at once with ``llm`` (≥ 1).

    Raises:
        ValueError: negative ``top_n`` / ``gleaning``, non-positive caps or
            ``llm_concurrency`` (at construction).
    """

    extractor: str = "statistical"
    top_n: int = 8
    ngram_range: tuple[int, int] = (1, 3)
    min_df: int = 2
    max_description_sentences: int = 4
    use_titles: bool = True
    title_key: str = "title"
    entity_label: str = "entity"
    relation_label: str = "CO_OCCURS_WITH"
    max_entities_per_node: int | None = None
    max_relations_per_node: int | None = None
    include_metadata: bool = True
    llm: Any = Field(default=None, exclude=True, description="LLM to extract with (None: offline).")
    gleaning: int = 1
    llm_concurrency: int = 4
    last_usage: dict[str, Any] = Field(
        default_factory=dict, exclude=True, description="LLM calls and tokens of the last call."
    )

    def __init__(self, **data: Any) -> None:
        super().__init__(**data)
        if self.extractor not in ("nlp", "statistical"):
            raise ValueError(f"extractor must be 'nlp' or 'statistical', got {self.extractor!r}")
        if self.top_n < 0:
            raise ValueError(f"top_n must be >= 0, got {self.top_n}")
        if self.gleaning < 0:
            raise ValueError(f"gleaning must be >= 0, got {self.gleaning}")
        if self.llm_concurrency < 1:
            raise ValueError(f"llm_concurrency must be >= 1, got {self.llm_concurrency}")
        for name in ("max_entities_per_node", "max_relations_per_node"):
            value = getattr(self, name)
            if value is not None and value <= 0:
                raise ValueError(f"{name} must be None or > 0, got {value}")

    @classmethod
    def class_name(cls) -> str:
        """Serialisation name of the component."""
        return "GraphStrataExtractor"

    def _core_extractor(self) -> Any:
        if self.llm is not None:
            from llama_index.retrievers.graphstrata.llm import to_graphstrata_llm

            from graphstrata.indexing import LLMExtractor
            from graphstrata.llm import LLMClient

            llm = to_graphstrata_llm(self.llm)
            client = llm if isinstance(llm, LLMClient) else LLMClient(llm, concurrency=self.llm_concurrency)
            return LLMExtractor(client, gleaning=self.gleaning)
        if self.extractor == "nlp":
            from graphstrata.extraction.nlp import NLPExtractor

            return NLPExtractor(use_titles=self.use_titles, max_description_sentences=self.max_description_sentences)
        from graphstrata.extraction import StatisticalExtractor

        return StatisticalExtractor(
            top_n=self.top_n,
            ngram_range=tuple(self.ngram_range),
            min_df=self.min_df,
            max_description_sentences=self.max_description_sentences,
            use_titles=self.use_titles,
        )

    def __call__(
        self, nodes: Sequence[BaseNode], show_progress: bool = False, **kwargs: Any
    ) -> Sequence[BaseNode]:
        """Extract entities and relations from ``nodes`` (in place) and return them."""
        nodes = list(nodes)
        if not nodes:
            return nodes
        chunks, titles = self._chunks(nodes)
        extractor = self._core_extractor()
        entities, relations = extractor.extract(chunks, titles=titles or None)
        client = getattr(extractor, "client", None)
        self.last_usage = client.ledger.to_dict() if client is not None else {}
        ents_by_chunk, rels_by_chunk = _by_chunk(entities), _by_chunk(relations)
        entity_by_id = {ent.id: ent for ent in entities}
        for node in get_tqdm_iterable(nodes, show_progress, "Extracting graphstrata KG"):
            self._annotate(
                node, ents_by_chunk.get(node.node_id, []), rels_by_chunk.get(node.node_id, []), entity_by_id
            )
        return nodes

    def _chunks(self, nodes: Sequence[BaseNode]) -> tuple[list[Any], dict[str, str]]:
        """The nodes as core chunks (whitespace tokens as ``n_tokens``) and ``{document id:
        title}`` of those whose metadata has a title (with ``use_titles``)."""
        from graphstrata import Chunk

        chunks = []
        titles: dict[str, str] = {}
        for i, node in enumerate(nodes):
            text = node.get_content(metadata_mode=MetadataMode.NONE)
            doc_id = node.ref_doc_id or node.node_id
            chunks.append(
                Chunk(
                    id=node.node_id,
                    document_id=doc_id,
                    index=i,
                    text=text,
                    start=0,
                    end=len(text),
                    n_tokens=len(text.split()),
                )
            )
            title = (node.metadata or {}).get(self.title_key)
            if self.use_titles and isinstance(title, str) and title.strip():
                titles.setdefault(doc_id, title)
        return chunks, titles

    def _annotate(
        self, node: BaseNode, ents: list[Any], rels: list[Any], entity_by_id: dict[str, Any]
    ) -> None:
        """Add the node's strongest entities and relations (capped; a relation's endpoints
        always included) to its ``KG_NODES_KEY`` / ``KG_RELATIONS_KEY`` metadata."""
        existing_nodes = node.metadata.pop(KG_NODES_KEY, [])
        existing_relations = node.metadata.pop(KG_RELATIONS_KEY, [])
        base_props = dict(node.metadata) if self.include_metadata else {}

        rels = sorted(rels, key=_by_weight)
        if self.max_relations_per_node is not None:
            rels = rels[: self.max_relations_per_node]
        ents = sorted(ents, key=_by_weight)
        if self.max_entities_per_node is not None:
            ents = ents[: self.max_entities_per_node]
        chosen: dict[str, Any] = {ent.id: ent for ent in ents}
        for rel in rels:  # relation endpoints must exist as nodes
            for key in (rel.source, rel.target):
                if key not in chosen and key in entity_by_id:
                    chosen[key] = entity_by_id[key]

        entity_nodes: dict[str, EntityNode] = {}
        for key, ent in chosen.items():
            entity_nodes[key] = EntityNode(
                name=ent.name,
                label=getattr(ent, "type", "") or self.entity_label,
                properties={
                    **base_props,
                    "description": ent.description,
                    "weight": float(ent.weight),
                    "entity_id": ent.id,
                },
            )
        kg_relations = [
            Relation(
                label=_relation_label(rel, self.relation_label),
                source_id=entity_nodes[rel.source].id,
                target_id=entity_nodes[rel.target].id,
                properties={
                    **base_props,
                    "description": rel.description,
                    "weight": float(rel.weight),
                    **({"keywords": rel.keywords} if getattr(rel, "keywords", "") else {}),
                },
            )
            for rel in rels
            if rel.source in entity_nodes and rel.target in entity_nodes
        ]
        existing_nodes.extend(entity_nodes.values())
        existing_relations.extend(kg_relations)
        node.metadata[KG_NODES_KEY] = existing_nodes
        node.metadata[KG_RELATIONS_KEY] = existing_relations

    async def acall(
        self, nodes: Sequence[BaseNode], show_progress: bool = False, **kwargs: Any
    ) -> Sequence[BaseNode]:
        """``__call__``: inline when offline (CPU-bound and fast), in a worker thread with an
        ``llm`` (the event loop keeps running; no loop is started)."""
        if self.llm is None:
            return self.__call__(nodes, show_progress=show_progress, **kwargs)
        import asyncio

        return await asyncio.to_thread(self.__call__, nodes, show_progress, **kwargs)


def _by_chunk(records: Sequence[Any]) -> dict[str, list[Any]]:
    """``{chunk_id: [records naming it]}``, records in input order."""
    out: dict[str, list[Any]] = {}
    for r in records:
        for cid in r.chunk_ids:
            out.setdefault(cid, []).append(r)
    return out


def _relation_label(rel: Any, default: str) -> str:
    """The first of a relation's keywords (an LLM's, or the NLP extractor's label), else
    ``default`` (also for a co-occurrence label)."""
    from graphstrata.extraction import UNSPECIFIC_LABELS

    keywords = getattr(rel, "keywords", "") or ""
    first = keywords.split(",")[0].strip()
    return default if not first or first in UNSPECIFIC_LABELS else first


def _by_weight(record: Any) -> tuple[float, str]:
    key = getattr(record, "id", "")
    return (-float(record.weight), str(key))
