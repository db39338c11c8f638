"""`GraphStrataTransformer`: knowledge-graph extraction as a LangChain document transformer.

For users who keep their own vector store: run it over your (already split) Documents and each
Document comes back with the entities and relations found in it, ready for metadata filters or
graph-aware post-processing. Offline by default (statistical extraction); give it a chat model
(``llm=``) for LLM extraction: typed entities, described relations with keywords.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from langchain_core.documents import BaseDocumentTransformer, Document

if TYPE_CHECKING:
    from graphstrata.llm.base import LLMInput
    from graphstrata.types import Chunk, Entity, Relation
    from langchain_core.language_models import BaseLanguageModel


@runtime_checkable
class ChunkExtractor(Protocol):
    """What :class:`GraphStrataTransformer` needs of an ``extractor=``: the core's extractors
    (``graphstrata.extraction.StatisticalExtractor``, the LLM extractors) have this method."""

    def extract(
        self, chunks: Sequence[Chunk], titles: Mapping[str, str] | None = None
    ) -> tuple[list[Entity], list[Relation]]:
        """Entities and relations of ``chunks`` (``titles``: document id -> title)."""
        ...


class GraphStrataTransformer(BaseDocumentTransformer):
    """Add extracted entities and relations to each Document's metadata.

    Each Document is treated as one chunk (split long documents first, e.g. with a LangChain
    text splitter). The extractor sees the whole batch at once: the offline
    ``StatisticalExtractor`` fits its TF-IDF on the Documents given to one
    ``transform_documents`` call, so transform a corpus (or a representative batch) together
    rather than one Document at a time.

    Output, per Document (a new ``Document`` with the same ``page_content`` and ``id``; the
    input is not modified):

    * ``metadata[entities_key]``: ``list[str]``, the entity names found in this Document, by
      descending corpus weight (occurrence count);
    * ``metadata[relations_key]``: ``list[dict]``, one ``{"source": name, "target": name,
      "weight": float}`` per relation found in this Document (plus ``"description"``, the
      supporting sentences or the LLM's description, when ``include_descriptions``; plus
      ``"keywords"``, the LLM's relation keywords, when the extractor gave any), by
      descending weight;
    * ``metadata[entity_types_key]``: ``dict[str, str]``, entity name -> type (``"person"``,
      ``"organization"``, ...) for this Document's typed entities; written only when the
      extractor types entities (the LLM extractor does, the statistical one does not).

    Both lists are empty (never missing) for a Document with nothing extracted. Some vector
    stores accept only flat primitive metadata; pass the result through their own filter
    (e.g. ``langchain_community.vectorstores.utils.filter_complex_metadata``) if so.

    Args:
        extractor: object with ``extract(chunks) -> (entities, relations)`` taking
            ``graphstrata.Chunk`` records and returning ``graphstrata.Entity`` /
            ``graphstrata.Relation`` records; ``None`` uses the offline
            ``graphstrata.extraction.StatisticalExtractor()``, or, with ``llm``,
            ``graphstrata.indexing.LLMExtractor``.
        llm: a LangChain chat model (wrapped in ``ChatModelLLM``; a ``graphstrata.llm.LLM``
            is taken as is): extract with ``graphstrata.indexing.LLMExtractor`` (LightRAG's
            entity and relationship records: typed entities with descriptions, relations with
            descriptions, keywords and strength; one call per Document plus ``gleaning``
            passes). Give ``extractor`` or ``llm``, not both.
        gleaning: extra extraction passes per Document with ``llm`` (≥ 0; default 1).
        entities_key: metadata key for the entity list.
        relations_key: metadata key for the relation list.
        max_entities: keep at most this many entities per Document (``None``: all).
        max_relations: keep at most this many relations per Document (``None``: all).
        include_descriptions: include each relation's description text.
        title_key: metadata key of a Document's title; a title becomes an entity of that
            Document (when the extractor supports titles; the LLM extractor shows it to the
            model as context). ``None`` disables it.
        entity_types_key: metadata key for the entity types.

    Raises:
        ValueError: empty or equal metadata keys, a negative ``max_*`` or ``gleaning``, or
            both ``extractor`` and ``llm`` (at construction).
        TypeError: an input item is not a LangChain ``Document`` (in ``transform_documents``).
    """

    def __init__(
        self,
        extractor: ChunkExtractor | None = None,
        *,
        entities_key: str = "entities",
        relations_key: str = "relations",
        max_entities: int | None = None,
        max_relations: int | None = None,
        include_descriptions: bool = False,
        title_key: str | None = "title",
        llm: BaseLanguageModel | LLMInput | None = None,
        gleaning: int = 1,
        entity_types_key: str = "entity_types",
    ) -> None:
        if not entities_key or not relations_key or not entity_types_key:
            raise ValueError("entities_key, relations_key and entity_types_key must be non-empty strings")
        if len({entities_key, relations_key, entity_types_key}) < 3:
            raise ValueError("entities_key, relations_key and entity_types_key must differ")
        if extractor is not None and llm is not None:
            raise ValueError("give either extractor= or llm= (an LLM extractor is built from llm), not both")
        if isinstance(gleaning, bool) or not isinstance(gleaning, int) or gleaning < 0:
            raise ValueError(f"gleaning must be an integer >= 0, got {gleaning!r}")
        for label, value in (("max_entities", max_entities), ("max_relations", max_relations)):
            if value is not None and (isinstance(value, bool) or value < 0):
                raise ValueError(f"{label} must be None or >= 0, got {value!r}")
        if extractor is not None and not callable(getattr(extractor, "extract", None)):
            raise TypeError("extractor must have an extract(chunks) method")
        self.extractor = extractor
        self.llm = llm
        self.gleaning = gleaning
        self.entity_types_key = entity_types_key
        self.entities_key = entities_key
        self.relations_key = relations_key
        self.max_entities = max_entities
        self.max_relations = max_relations
        self.include_descriptions = include_descriptions
        self.title_key = title_key

    def _extractor(self) -> Any:
        if self.extractor is None:
            if self.llm is not None:
                from graphstrata.indexing import LLMExtractor

                from langchain_graphstrata.llms import to_graphstrata_llm

                self.extractor = LLMExtractor(to_graphstrata_llm(self.llm), gleaning=self.gleaning)
            else:
                from graphstrata.extraction import StatisticalExtractor

                self.extractor = StatisticalExtractor()
        return self.extractor

    def transform_documents(
        self, documents: Sequence[Document], **kwargs: Any
    ) -> Sequence[Document]:
        """Return new Documents with entities and relations added to their metadata.

        Args:
            documents: LangChain Documents (one chunk each).
            **kwargs: ignored (accepted for interface compatibility).

        Returns:
            ``list[Document]`` of the same length and order as ``documents``.
        """
        from graphstrata import Chunk

        docs = list(documents)
        for i, doc in enumerate(docs):
            if not isinstance(doc, Document):
                raise TypeError(f"documents[{i}] is a {type(doc).__name__}, not a Document")
        if not docs:
            return []
        # Internal ids are positions, so duplicate or missing Document ids do not matter.
        chunks = [
            Chunk(
                id=f"{i}#0",
                document_id=str(i),
                index=0,
                text=doc.page_content,
                start=0,
                end=len(doc.page_content),
                n_tokens=len(doc.page_content.split()),
            )
            for i, doc in enumerate(docs)
        ]
        extractor = self._extractor()
        titles = {
            str(i): str(doc.metadata[self.title_key])
            for i, doc in enumerate(docs)
            if self.title_key and doc.metadata.get(self.title_key)
        }
        if titles and _accepts_titles(extractor):
            entities, relations = extractor.extract(chunks, titles=titles)
        else:
            entities, relations = extractor.extract(chunks)

        names = {e.id: e.name for e in entities}
        typed = any(getattr(e, "type", "") for e in entities)
        per_doc_entities: list[list[tuple[float, str]]] = [[] for _ in docs]
        per_doc_types: list[dict[str, str]] = [{} for _ in docs]
        for e in entities:
            for cid in dict.fromkeys(e.chunk_ids):
                per_doc_entities[_position(cid)].append((float(e.weight), e.name))
                if getattr(e, "type", ""):
                    per_doc_types[_position(cid)][e.name] = e.type
        per_doc_relations: list[list[tuple[float, dict[str, Any]]]] = [[] for _ in docs]
        for r in relations:
            rec: dict[str, Any] = {
                "source": names.get(r.source, r.source),
                "target": names.get(r.target, r.target),
                "weight": float(r.weight),
            }
            if self.include_descriptions:
                rec["description"] = r.description
            if getattr(r, "keywords", ""):
                rec["keywords"] = r.keywords
            for cid in dict.fromkeys(r.chunk_ids):
                per_doc_relations[_position(cid)].append((float(r.weight), rec))

        out: list[Document] = []
        for doc, ents, rels, types in zip(docs, per_doc_entities, per_doc_relations, per_doc_types, strict=True):
            ents.sort(key=lambda t: (-t[0], t[1]))
            rels.sort(key=lambda t: (-t[0], t[1]["source"], t[1]["target"]))
            ent_names = [name for _, name in ents][: self.max_entities]
            rel_recs = [dict(rec) for _, rec in rels][: self.max_relations]
            metadata = {**doc.metadata, self.entities_key: ent_names, self.relations_key: rel_recs}
            if typed:
                metadata[self.entity_types_key] = {n: types[n] for n in ent_names if n in types}
            out.append(Document(page_content=doc.page_content, metadata=metadata, id=doc.id))
        return out


def _accepts_titles(extractor: Any) -> bool:
    import inspect

    try:
        return "titles" in inspect.signature(extractor.extract).parameters
    except (TypeError, ValueError):  # pragma: no cover - builtins without signatures
        return False


def _position(chunk_id: str) -> int:
    return int(chunk_id.split("#", 1)[0])


__all__ = ["GraphStrataTransformer"]
