"""`GraphStrataTransformer`: knowledge-graph extraction as a LangChain document transformer.

For users who keep their own vector store: run it over your (already split) Documents and each
Document comes back with the entities and relations found in it, ready for metadata filters or
graph-aware post-processing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from langchain_core.documents import BaseDocumentTransformer, Document


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
      supporting sentences, when ``include_descriptions``), by descending weight.

    Both lists are empty (never missing) for a Document with nothing extracted. Some vector
    stores accept only flat primitive metadata; pass the result through their own filter
    (e.g. ``langchain_community.vectorstores.utils.filter_complex_metadata``) if so.

    Args:
        extractor: object with ``extract(chunks) -> (entities, relations)`` taking
            ``graphstrata.Chunk`` records and returning ``graphstrata.Entity`` /
            ``graphstrata.Relation`` records; ``None`` uses the offline
            ``graphstrata.extraction.StatisticalExtractor()``. An LLM extractor is planned
            (graphstrata issue 13, "Bring your own LLM") and not part of graphstrata yet; until
            then, wrap your own LLM call in an object with this ``extract`` method.
        entities_key: metadata key for the entity list.
        relations_key: metadata key for the relation list.
        max_entities: keep at most this many entities per Document (``None``: all).
        max_relations: keep at most this many relations per Document (``None``: all).
        include_descriptions: include each relation's description text.
        title_key: metadata key of a Document's title; a title becomes an entity of that
            Document (when the extractor supports titles). ``None`` disables it.

    Raises:
        ValueError: empty or equal metadata keys, or a negative ``max_*`` (at construction).
        TypeError: an input item is not a LangChain ``Document`` (in ``transform_documents``).
    """

    def __init__(
        self,
        extractor: Any = None,
        *,
        entities_key: str = "entities",
        relations_key: str = "relations",
        max_entities: int | None = None,
        max_relations: int | None = None,
        include_descriptions: bool = False,
        title_key: str | None = "title",
    ) -> None:
        if not entities_key or not relations_key:
            raise ValueError("entities_key and relations_key must be non-empty strings")
        if entities_key == relations_key:
            raise ValueError("entities_key and relations_key must differ")
        for label, value in (("max_entities", max_entities), ("max_relations", max_relations)):
            if value is not None and (isinstance(value, bool) or value < 0):
                raise ValueError(f"{label} must be None or >= 0, got {value!r}")
        if extractor is not None and not callable(getattr(extractor, "extract", None)):
            raise TypeError("extractor must have an extract(chunks) method")
        self.extractor = extractor
        self.entities_key = entities_key
        self.relations_key = relations_key
        self.max_entities = max_entities
        self.max_relations = max_relations
        self.include_descriptions = include_descriptions
        self.title_key = title_key

    def _extractor(self) -> Any:
        if self.extractor is None:
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
        per_doc_entities: list[list[tuple[float, str]]] = [[] for _ in docs]
        for e in entities:
            for cid in dict.fromkeys(e.chunk_ids):
                per_doc_entities[_position(cid)].append((float(e.weight), e.name))
        per_doc_relations: list[list[tuple[float, dict[str, Any]]]] = [[] for _ in docs]
        for r in relations:
            rec: dict[str, Any] = {
                "source": names.get(r.source, r.source),
                "target": names.get(r.target, r.target),
                "weight": float(r.weight),
            }
            if self.include_descriptions:
                rec["description"] = r.description
            for cid in dict.fromkeys(r.chunk_ids):
                per_doc_relations[_position(cid)].append((float(r.weight), rec))

        out: list[Document] = []
        for doc, ents, rels in zip(docs, per_doc_entities, per_doc_relations, strict=True):
            ents.sort(key=lambda t: (-t[0], t[1]))
            rels.sort(key=lambda t: (-t[0], t[1]["source"], t[1]["target"]))
            ent_names = [name for _, name in ents][: self.max_entities]
            rel_recs = [dict(rec) for _, rec in rels][: self.max_relations]
            metadata = {**doc.metadata, self.entities_key: ent_names, self.relations_key: rel_recs}
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
