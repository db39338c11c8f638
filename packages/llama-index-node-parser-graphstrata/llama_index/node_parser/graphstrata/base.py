"""graphstrata's chunking as a LlamaIndex node parser.

:class:`GraphStrataNodeParser` cuts documents into the same token windows as the core
(``graphstrata.chunking.chunk_documents``), with the core's chunk ids; it works in an
``IngestionPipeline``. The knowledge-graph extractor moved to
``llama_index.extractors.graphstrata`` (package ``llama-index-extractors-graphstrata``);
``GraphStrataExtractor`` imported from here still works and warns (``DeprecationWarning``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from llama_index.core.bridge.pydantic import Field
from llama_index.core.node_parser.interface import NodeParser
from llama_index.core.node_parser.node_utils import default_id_func
from llama_index.core.schema import (
    BaseNode,
    MetadataMode,
    NodeRelationship,
    TextNode,
)
from llama_index.core.utils import get_tqdm_iterable

if TYPE_CHECKING:
    from graphstrata.models import Embedder


def _core_chunk_defaults() -> tuple[int, int]:
    """The core's default chunk size and overlap (``GraphStrataConfig``), in tokens of the
    embedder's tokenizer."""
    from graphstrata import GraphStrataConfig

    cfg = GraphStrataConfig()
    return int(cfg.chunk_size), int(cfg.chunk_overlap)


# --------------------------------------------------------------------------------------------
# node parser
# --------------------------------------------------------------------------------------------
class GraphStrataNodeParser(NodeParser):
    """Split documents into token windows (or windows of whole sentences) exactly as the
    graphstrata core does.

    Each output ``TextNode`` is a substring of its source (``start_char_idx`` /
    ``end_char_idx`` are character offsets into the source text), links to it with
    ``NodeRelationship.SOURCE`` (plus PREVIOUS / NEXT), inherits its metadata, and, with the
    default ``id_func``, carries the core chunk id ``"<source node id>#<n>"``, so a node of
    this parser and a chunk hit of ``GraphStrataRetriever`` for the same document share ids.

    Args:
        chunk_size: tokens per window (> 0); default: the core's default.
        chunk_overlap: tokens shared by consecutive windows (0 ≤ overlap < chunk_size);
            default: the core's default, or ``chunk_size // 4`` when that does not fit.
        tokenizer: ``"default"``: the tokenizer of the core's offline default embedder
            (what ``GraphStrata.build`` uses when given no embedder; loads the model once);
            ``"words"``: the core's regex word tokenizer (what the core uses with a
            LlamaIndex embedding, via ``CallableEmbedder``; no model); or a graphstrata
            ``Embedder`` whose ``token_spans`` counts tokens.
        chunking: ``"tokens"`` (token windows cut anywhere, the core's default) or
            ``"sentence"``: windows of whole sentences within the same budget, as the core
            cuts them with ``GraphStrataConfig(chunking="sentence")``
            (``graphstrata.chunking.sentence_chunk_text``).

    Raises:
        ValueError: bad ``chunk_size`` / ``chunk_overlap`` / ``tokenizer`` / ``chunking`` (at
            construction).
    """

    chunk_size: int = Field(default=0, description="Tokens per chunk (0: the core default).")
    chunk_overlap: int = Field(default=-1, description="Overlap in tokens (-1: core default).")
    tokenizer: Any = Field(
        default="default",
        description='"default" (core embedder tokenizer), "words", or a graphstrata Embedder.',
        exclude=True,
    )
    chunking: str = Field(
        default="tokens", description='"tokens" (cut anywhere) or "sentence" (whole sentences).'
    )

    def __init__(
        self,
        chunk_size: int | None = None,
        chunk_overlap: int | None = None,
        tokenizer: str | Embedder = "default",
        chunking: str = "tokens",
        **kwargs: Any,
    ) -> None:
        from graphstrata.chunking import check_chunking, validate_chunking

        default_size, default_overlap = _core_chunk_defaults()
        size = default_size if chunk_size is None else chunk_size
        if chunk_overlap is not None:
            overlap = chunk_overlap
        elif isinstance(size, int) and default_overlap >= size:
            overlap = size // 4  # the default overlap does not fit a small window
        else:
            overlap = default_overlap
        validate_chunking(size, overlap)
        check_chunking(chunking)
        if isinstance(tokenizer, str):
            if tokenizer not in ("default", "words"):
                raise ValueError(
                    f'tokenizer must be "default", "words" or a graphstrata Embedder, got {tokenizer!r}'
                )
        elif not callable(getattr(tokenizer, "token_spans", None)):
            raise ValueError(
                "tokenizer must be \"default\", \"words\" or an object with token_spans(text), "
                f"got {type(tokenizer).__name__}"
            )
        super().__init__(
            chunk_size=int(size), chunk_overlap=int(overlap), tokenizer=tokenizer, chunking=chunking,
            **kwargs,
        )

    @classmethod
    def class_name(cls) -> str:
        """Serialisation name of the component."""
        return "GraphStrataNodeParser"

    def _embedder(self) -> Any:
        if self.tokenizer == "words":
            return None
        if self.tokenizer == "default":
            from graphstrata.models import default_embedder

            return default_embedder()
        return self.tokenizer

    def _parse_nodes(
        self, nodes: Sequence[BaseNode], show_progress: bool = False, **kwargs: Any
    ) -> list[BaseNode]:
        from graphstrata import Document as GSDocument
        from graphstrata.chunking import chunk_documents

        embedder = self._embedder()
        out: list[BaseNode] = []
        for node in get_tqdm_iterable(nodes, show_progress, "Chunking like graphstrata"):
            text = node.get_content(metadata_mode=MetadataMode.NONE)
            chunks = chunk_documents(
                [GSDocument(id=node.node_id, text=text)],
                chunk_size=self.chunk_size,
                chunk_overlap=self.chunk_overlap,
                embedder=embedder,
                chunking=self.chunking,
            )
            source = {NodeRelationship.SOURCE: node.as_related_node_info()}
            for i, chunk in enumerate(chunks):
                node_id = chunk.id if self.id_func is default_id_func else self.id_func(i, node)
                out.append(
                    TextNode(
                        id_=node_id,
                        text=chunk.text,
                        start_char_idx=chunk.start,
                        end_char_idx=chunk.end,
                        excluded_embed_metadata_keys=list(node.excluded_embed_metadata_keys),
                        excluded_llm_metadata_keys=list(node.excluded_llm_metadata_keys),
                        metadata_separator=node.metadata_separator,
                        metadata_template=node.metadata_template,
                        text_template=getattr(node, "text_template", TextNode().text_template),
                        relationships=dict(source),
                    )
                )
        return out


def __getattr__(name: str) -> Any:
    """``GraphStrataExtractor``, imported from its old home: the moved class, with a
    ``DeprecationWarning`` naming the new import.

    Raises:
        AttributeError: any other unknown name.
    """
    if name == "GraphStrataExtractor":
        return deprecated_extractor()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def deprecated_extractor() -> type:
    """``llama_index.extractors.graphstrata.GraphStrataExtractor``, after a
    ``DeprecationWarning`` that says to import it from there."""
    import warnings

    from llama_index.extractors.graphstrata import GraphStrataExtractor

    warnings.warn(
        "GraphStrataExtractor moved to the llama-index-extractors-graphstrata package: import "
        "it with `from llama_index.extractors.graphstrata import GraphStrataExtractor`; the "
        "llama_index.node_parser.graphstrata import will be removed in a future release",
        DeprecationWarning,
        stacklevel=3,
    )
    return GraphStrataExtractor
