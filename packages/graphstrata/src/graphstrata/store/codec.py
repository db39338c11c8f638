"""The state codec: an :class:`~graphstrata.state.EngineState` as the payload files of one index
version (:func:`save_state`) and back (:func:`load_state`).

A version holds the records (``graphstrata.sqlite``, :mod:`graphstrata.store.sqlite`), the
row → node id labels (``labels.npz``; schema ≤ 4: ``vectors.npz``), both C-HNSW files, the BM25
arrays (``bm25.npz``) and the derived structures (``derived.npz``,
:func:`graphstrata.structures.registry.encode`). The directory, its versions and its lock are
:mod:`graphstrata.store.versions`.
"""

from __future__ import annotations

import dataclasses
import os
import zlib
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..heap import release_free_memory
from ..llm.records import LLMAnswers, LLMRecord
from ..state import ChunkRecords, FrozenStats
from ..types import Chunk, Community, DocumentChunk
from .sqlite import read_sqlite, write_sqlite
from .versions import (
    BM25,
    CHUNKS,
    DERIVED,
    LABELS,
    LABELS_PREFIX,
    LAYERS,
    SCHEMA_VERSION,
    SQLITE,
    VECTORS,
    IndexDirectory,
    checkpoint,
    open_version,
)

if TYPE_CHECKING:  # pragma: no cover
    from ..config import GraphStrataConfig
    from ..graph import KnowledgeGraph
    from ..bm25 import BM25Index
    from ..index import ChunkIndex, LayeredIndex
    from ..models import Embedder
    from ..state import EngineState


def _write_npz(path: Path, arrays: dict[str, np.ndarray]) -> None:
    """Write numeric arrays uncompressed (no pickled objects: a loader refuses them).

    Raises:
        ValueError: an array of Python objects (named).
    """
    for name, arr in arrays.items():
        if np.asarray(arr).dtype.hasobject:
            raise ValueError(f"cannot persist array {name!r}: it holds Python objects")
    with open(path, "wb") as f:
        np.savez(f, **arrays)


def _read_npz(vdir: Path, name: str, where: Path) -> dict[str, np.ndarray]:
    """Every array of the npz payload file ``name``, read whole.

    Raises:
        ValueError: an unreadable file (named), or one holding pickled objects.
    """
    try:
        with np.load(vdir / name, allow_pickle=False) as npz:
            return {k: np.asarray(npz[k]) for k in npz.files}
    except Exception as exc:  # zip errors of every kind, pickled objects
        raise ValueError(f"corrupt index {where}: {name} unreadable ({exc})") from exc



def save_state(state: EngineState, target: str | os.PathLike | IndexDirectory) -> Path:
    """Persist one :class:`~graphstrata.state.EngineState` as the next version of ``target``.

    Writes the records (SQLite), the row labels, both C-HNSW files, the BM25 arrays and the
    derived structures present in the state's cache (:func:`graphstrata.structures.registry.encode`; the
    facade prepares them first, :func:`graphstrata.structures.registry.prepare`).

    Args:
        state: the state to write.
        target: the index directory; an :class:`~graphstrata.store.versions.IndexDirectory`
            records the version written as its ``base``.

    Returns:
        The resolved index directory.

    Raises:
        FileExistsError: see :func:`~graphstrata.store.versions.write_version`.
        ValueError: a record SQLite cannot store (named), a derived structure whose codec
            gives Python objects.
        OSError: the disk write failed. In every failure case the previous version stays
            current and loadable.
    """
    index = target if isinstance(target, IndexDirectory) else IndexDirectory(target)
    return index.write(lambda tmp: _write_payload(state, tmp))


def _write_payload(state: EngineState, tmp: Path) -> dict[str, Any]:
    """Write ``state``'s payload files into the version directory being made, ``tmp``;
    returns the manifest's ``embedder`` / ``counts`` / ``generation`` / ``llm`` /
    ``build_seconds`` fields."""
    from ..structures import registry as derived

    emb = state.embedder
    meta = {
        "schema_version": SCHEMA_VERSION,
        "embedder_id": emb.id,
        "embedder_dim": int(emb.dim),
        "config": state.config.model_dump(),
        "generation": state.generation,
        "build_seconds": dict(state.build_seconds),
        "build_usage": dict(state.build_usage),
        "llm_id": state.llm_id,
        "drift": dict(state.drift),
    }
    write_sqlite(
        tmp / SQLITE,
        meta,
        list(state.documents.values()),
        list(state.chunks),
        [state.kg.entities[e] for e in state.kg.entity_ids],
        list(state.kg.relations.values()),
        [c for layer in state.communities for c in layer],
        chunk_records=state.records,
        frozen=state.frozen,
        llm_answers=state.llm_answers,
    )
    checkpoint("sqlite written")
    labels = {LABELS_PREFIX + "chunks": state.chunk_index.labels}
    if state.layered is not None:
        names = ["entities"] + [f"layer_{i}" for i in range(1, state.layered.num_layers)]
        labels.update({LABELS_PREFIX + n: lab for n, lab in zip(names, state.layered.labels, strict=True)})
    # the vectors themselves are stored once, in the .chnsw files (schema 5)
    _write_npz(tmp / LABELS, labels)
    checkpoint("labels written")
    if state.layered is not None:
        state.layered.save(tmp / LAYERS)
        checkpoint("layers written")
    state.chunk_index.save(tmp / CHUNKS)
    checkpoint("chunks written")
    _write_npz(tmp / BM25, state.bm25.to_arrays())
    checkpoint("bm25 written")
    arrays = derived.encode(state)
    if arrays:
        _write_npz(tmp / DERIVED, arrays)
        checkpoint("derived written")
    return {
        "embedder": {"id": emb.id, "dim": int(emb.dim)},
        "counts": state.stats(),
        "generation": state.generation,
        "llm": {"id": state.llm_id, "usage": dict(state.build_usage)} if state.llm_id else None,
        "build_seconds": {k: float(v) for k, v in state.build_seconds.items()},
    }


def as_persisted(state: EngineState, previous: EngineState | None = None) -> EngineState:
    """``state`` as the facade publishes it (after a build, insert / upsert / delete or
    rebuild, before it is persisted), in the form a load gives back: extraction records and
    frozen statistics compressed (:class:`~graphstrata.state.ChunkRecords`,
    :class:`~graphstrata.state.FrozenStats`: only updates read them), chunk texts read from
    their documents (:class:`~graphstrata.types.DocumentChunk`), and, after a build
    (``previous`` is ``None``), every eager derived structure in its cache
    (:func:`graphstrata.structures.registry.prepare`), so the store persists them and the first query
    after a load builds nothing.

    After an update (``previous`` given) only the structures an update hook carries over from
    ``previous``'s are prepared; the others are built by the first query that reads them, as
    before they were persisted: rebuilding them all made a one-document insert cost seconds
    (HiRAG's GMM layers 3.3 s, AGRAG's graph 1.8 s on HotpotQA against 0.3 s for the insert).
    :meth:`GraphStrata.load` builds what an index persisted after an update lacks, so the first
    query after a load still builds nothing.
    """
    from ..structures import registry as derived

    records, frozen, docs = state.records, state.frozen, state.documents
    compact_records = records is None or isinstance(records, ChunkRecords)
    chunks = state.chunks
    if not all(isinstance(c, DocumentChunk) for c in chunks):
        chunks = DocumentChunk.of_documents(chunks, docs)
    if not compact_records or not isinstance(frozen, FrozenStats) or chunks is not state.chunks:
        state = dataclasses.replace(
            state,
            chunks=chunks,
            records=records if compact_records else ChunkRecords.from_records(records),
            frozen=FrozenStats.from_models(frozen),
            derived_seed=state.derived_snapshot(),
        )
    derived.prepare(state, previous=previous, carried_only=previous is not None)
    return state


def registered_derived(state: EngineState) -> dict[str, Any]:
    """The registered derived structures in ``state``'s cache (functions of its records alone,
    :mod:`graphstrata.structures.registry`: what a version persists), to seed a state that differs only
    in its LLM."""
    from ..structures import registry as derived

    keys = {spec.key for spec in derived.registered()}
    return {k: v for k, v in state.derived_snapshot().items() if k in keys}


def load_state(
    directory: str | os.PathLike | IndexDirectory,
    embedder_for: Callable[[dict[str, Any]], Embedder],
    config_of: Callable[[Any], GraphStrataConfig],
    llm: Any = None,
) -> EngineState:
    """Load the current version of an index as one :class:`~graphstrata.state.EngineState`.

    What only updates read stays compact: the extraction records and frozen TF-IDF models are
    kept compressed (:class:`~graphstrata.state.ChunkRecords`,
    :class:`~graphstrata.state.FrozenStats`). Vectors are memory-mapped from the C-HNSW files
    where they can be (:func:`graphstrata.index.mapped_vectors`), BM25 is read as arrays
    (schema 6; rebuilt from the chunk texts for older ones), and the persisted derived
    structures are handed to the state as its ``derived_seed`` (schema 6; older indexes build
    them on first use).

    Args:
        directory: an index directory (either schema); an
            :class:`~graphstrata.store.versions.IndexDirectory` records the version read as
            its ``base``.
        embedder_for: ``embedder_for(manifest["embedder"]) -> Embedder``; raises
            ``ValueError`` when the caller's embedder does not match.
        config_of: turns the stored config dict into a config (``ValueError`` if invalid).
        llm: the :class:`~graphstrata.llm.LLMClient` to attach to the state (or ``None``).

    Returns:
        The state, after :func:`~graphstrata.state.check_integrity`.

    Raises:
        FileNotFoundError: the directory does not exist.
        ValueError: not an index, an invalid manifest, a corrupt or truncated file (named), an
            embedder mismatch, broken references between records, vectors of the wrong shape
            or with NaN / infinite values, BM25 arrays or derived structures that do not fit
            the index (the file named).
    """
    from ..structures import registry as derived  # importing structures registers every structure

    index = directory if isinstance(directory, IndexDirectory) else None
    path = index.named if index is not None else Path(directory)

    def read(vdir: Path, manifest: dict[str, Any]) -> EngineState:
        return _read_state(vdir, manifest, path, embedder_for(manifest["embedder"]), config_of, llm)

    state = index.read(read) if index is not None else open_version(path, read)
    release_free_memory()  # the SQLite rows, JSON texts and temporaries a load freed (~90 MB at 44k chunks)
    return state


def matching_embedder(
    where: str | os.PathLike, embedder: Embedder | None, reload: bool = False,
    default: Callable[[], Embedder] | None = None,
) -> Callable[[dict[str, Any]], Embedder]:
    """The ``embedder_for`` of :func:`load_state` for a caller holding ``embedder``: it gives
    ``embedder`` when that has the index's embedder id and dimension; for ``embedder=None``
    the packaged preset of the index's id, made once however often the load starts over.
    ``reload``: the mismatch message of an instance reloading its own directory; ``where``:
    the index as messages name it; ``default``: what makes the default preset's embedder
    (``None``: :func:`graphstrata.models.default_embedder`).

    Raises (when called):
        graphstrata.models.EmbedderMismatchError: another id or dimension, or no embedder
            given for an index built with one the core cannot load by itself.
    """
    from ..models import EmbedderMismatchError, default_embedder, preset_for_id, resolve_embedder

    chosen: list[Embedder] = []  # the default embedder loads once, even across retries

    def embedder_for(info: dict[str, Any]) -> Embedder:
        emb = embedder
        if emb is None:
            preset = preset_for_id(info["id"])  # "default", "fast", or None
            if preset is None:
                raise EmbedderMismatchError(
                    f"index {where} was built with embedder {info['id']!r}; pass "
                    "embedder=... with that id to load it",
                    str(info["id"]),
                    None,
                )
            if not chosen:
                chosen.append((default or default_embedder)() if preset == "default" else resolve_embedder(preset))
            emb = chosen[0]
        if emb.id != info["id"] or int(emb.dim) != int(info["dim"]):
            raise EmbedderMismatchError(
                f"embedder mismatch: index {where} is now built with {info['id']!r} "
                f"(dim {info['dim']}), this instance embeds with {emb.id!r}"
                if reload else
                f"embedder mismatch: index {where} was built with {info['id']!r} "
                f"(dim {info['dim']}), got {emb.id!r} (dim {emb.dim})",
                str(info["id"]),
                str(emb.id),
            )
        return emb

    return embedder_for


def _read_state(
    vdir: Path,
    manifest: dict[str, Any],
    path: Path,
    embedder: Embedder,
    config_of: Callable[[Any], GraphStrataConfig],
    llm: Any,
) -> EngineState:
    """One version's files (``vdir``, its validated ``manifest``) as a state; errors name the
    index as ``path``. Raises as :func:`load_state`."""
    from ..structures import registry as derived
    from ..index import layer_vectors
    from ..state import EngineState, check_integrity

    data = read_sqlite(vdir / SQLITE)
    meta = data["meta"]
    config = config_of(meta.get("config"))
    rows_file, vectors, labels = _read_rows(vdir, manifest, path)
    tables = _records(data, path)
    chunks = data["chunks"]
    indexes = _read_indexes(vdir, manifest, path, rows_file, chunks, tables, vectors, labels)
    native_vectors = rows_file == LABELS  # schema ≥ 5: the one stored copy is the index's
    if native_vectors:
        vectors = {
            "chunks": indexes["chunk_index"].vectors,
            **layer_vectors(indexes["layered"], embedder.dim, vdir / LAYERS),
        }
    bm25 = _read_bm25(vdir, manifest, path, chunks, tables["documents"], config.use_titles)
    seed = None
    if DERIVED in manifest["files"]:
        try:
            seed = derived.decode(_read_npz(vdir, DERIVED, path))
        except ValueError as exc:
            raise ValueError(f"corrupt index {path}: {DERIVED} unusable ({exc})") from exc
    state = EngineState(
        config=config, embedder=embedder, chunks=chunks, chunk_row={c.id: i for i, c in enumerate(chunks)},
        **tables, **indexes, bm25=bm25, vectors=vectors, generation=int(manifest.get("generation", 0)),
        build_seconds=dict(meta.get("build_seconds") or {}), build_usage=dict(meta.get("build_usage") or {}),
        llm_id=meta.get("llm_id"), llm=llm, drift=dict(meta.get("drift") or {}), derived_seed=seed,
        records=_chunk_records(data["chunk_records"], chunks, path),
        llm_answers=_llm_answers(
            data["llm_records"], data["llm_summaries"], chunks, data["llm_answers"], data["llm_answer_owners"]
        ),
        frozen=_frozen(data["frozen"], path),
    )
    # vectors read from a .chnsw file were checked finite by its loader
    check_integrity(state, where=f"index {path}", finite_checked=native_vectors)
    return state


def _read_rows(
    vdir: Path, manifest: dict[str, Any], path: Path
) -> tuple[str, dict[str, np.ndarray], dict[str, np.ndarray]]:
    """``(rows file, vectors, labels)``: the row → node id labels of ``labels.npz`` (schema ≥ 5;
    no vectors), or the vectors (and labels, schema 4) of ``vectors.npz`` (schema ≤ 4).

    Raises:
        ValueError: the file is unreadable, or ``labels.npz`` holds arrays that are not labels.
    """
    rows_file = LABELS if LABELS in manifest["files"] else VECTORS
    try:
        with np.load(vdir / rows_file, allow_pickle=False) as npz:
            vectors = {
                k: np.array(npz[k], dtype=np.float32, order="C")
                for k in npz.files
                if not k.startswith(LABELS_PREFIX)
            }
            labels = {
                k[len(LABELS_PREFIX):]: np.array(npz[k], dtype=np.int64)
                for k in npz.files
                if k.startswith(LABELS_PREFIX)
            }
    except Exception as exc:  # zip errors of every kind
        raise ValueError(f"corrupt index {path}: {rows_file} unreadable ({exc})") from exc
    if rows_file == LABELS and vectors:
        raise ValueError(f"corrupt index {path}: {LABELS} holds arrays that are not labels")
    return rows_file, vectors, labels


def _records(data: dict[str, Any], path: Path) -> dict[str, Any]:
    """``{"documents", "kg", "communities"}`` of the rows :func:`read_sqlite` read.

    Raises:
        ValueError: duplicate document or entity ids, dangling relations, community layers
            that are not ``1..L``.
    """
    from ..graph import KnowledgeGraph

    documents = {d.id: d for d in data["documents"]}
    if len(documents) != len(data["documents"]):
        raise ValueError(f"corrupt index {path}: duplicate document ids")
    kg = KnowledgeGraph(data["entities"], data["relations"])
    if len(kg.entities) != len(data["entities"]) or len(kg.relations) != len(data["relations"]):
        raise ValueError(f"corrupt index {path}: duplicate entities or dangling relations")
    by_layer: dict[int, list[Community]] = {}
    for c in data["communities"]:
        by_layer.setdefault(c.layer, []).append(c)
    if sorted(by_layer) != list(range(1, len(by_layer) + 1)):
        raise ValueError(f"corrupt index {path}: community layers {sorted(by_layer)} are not 1..L")
    return {"documents": documents, "kg": kg, "communities": [by_layer[i] for i in sorted(by_layer)]}


def _read_indexes(
    vdir: Path,
    manifest: dict[str, Any],
    path: Path,
    rows_file: str,
    chunks: list[Chunk],
    tables: dict[str, Any],
    vectors: dict[str, np.ndarray],
    labels: dict[str, np.ndarray],
) -> dict[str, ChunkIndex | LayeredIndex | None]:
    """``{"chunk_index", "layered"}``: the two C-HNSW files (``layered`` is ``None`` for an
    index without entities); ``tables`` is what :func:`_records` gave.

    Raises:
        ValueError: labels or vectors that do not match the chunks or the layers, a missing
            ``layers.chnsw``, or what the C-HNSW loaders raise.
    """
    from ..index import ChunkIndex, LayeredIndex

    kg: KnowledgeGraph = tables["kg"]
    if rows_file == LABELS:
        if "chunks" not in labels or len(labels["chunks"]) != len(chunks):
            raise ValueError(f"corrupt index {path}: chunk labels do not match the chunks")
    elif vectors.get("chunks") is None or len(vectors["chunks"]) != len(chunks):
        raise ValueError(f"corrupt index {path}: chunk vectors do not match the chunks")
    chunk_index = ChunkIndex.load(vdir / CHUNKS, vectors.get("chunks"), labels.get("chunks"))
    layered = None
    if len(kg):
        if LAYERS not in manifest["files"]:
            raise ValueError(f"corrupt index {path}: {LAYERS} is missing")
        sizes = [len(kg)] + [len(layer) for layer in tables["communities"]]
        names = ["entities"] + [f"layer_{i}" for i in range(1, len(sizes))]
        layer_labels = [labels[n] for n in names] if all(n in labels for n in names) else None
        if rows_file == LABELS and layer_labels is None:
            raise ValueError(f"corrupt index {path}: {LABELS} lacks the labels of the layers")
        layered = LayeredIndex.load(vdir / LAYERS, sizes, layer_labels)
    return {"chunk_index": chunk_index, "layered": layered}


def _read_bm25(
    vdir: Path, manifest: dict[str, Any], path: Path, chunks: list[Chunk], documents: dict[str, Any], use_titles: bool
) -> BM25Index:
    """The BM25 index: read as arrays (schema 6), else rebuilt from the chunk texts (schema ≤ 5).

    Raises:
        ValueError: BM25 arrays that do not fit the chunks (the file named).
    """
    from ..bm25 import BM25Index, lexical_texts

    if BM25 not in manifest["files"]:  # schema ≤ 5: BM25 was rebuilt from the texts at every load
        return BM25Index(lexical_texts(chunks, documents, use_titles))
    try:
        return BM25Index.from_arrays(_read_npz(vdir, BM25, path), n=len(chunks))
    except ValueError as exc:
        raise ValueError(f"corrupt index {path}: {BM25} unusable ({exc})") from exc


def _chunk_records(raw: dict[str, str | bytes], chunks: list[Chunk], path: Path) -> ChunkRecords | None:
    """The persisted extraction records, one per chunk, kept compressed
    (:class:`~graphstrata.state.ChunkRecords`; decoded when an update reads them), or ``None``
    when the index has none (an LLM-extracted graph, or schema ≤ 3: the first update derives
    them). Schema 4 stored them as JSON text: compressed here.

    Raises:
        ValueError: records that do not match the chunks, or a record that is not zlib data
            (named; a record damaged further in is named when an update reads it).
    """
    if not raw:
        return None
    if len(raw) != len(chunks) or any(c.id not in raw for c in chunks):
        raise ValueError(f"corrupt index {path}: extraction records do not match the chunks")
    ids = [c.id for c in chunks]  # the chunks' own id strings, in row order
    blobs = [
        v if isinstance(v, bytes) else zlib.compress(str(v).encode("utf-8"), 1) for v in (raw[i] for i in ids)
    ]
    try:
        return ChunkRecords(ids, blobs)
    except ValueError as exc:
        raise ValueError(f"corrupt index {path}: {exc}") from None


def _llm_answers(
    rows: list[tuple[Any, Any, Any]],
    summaries: dict[Any, Any],
    chunks: list[Chunk],
    stage_rows: Sequence[tuple[Any, Any]] = (),
    owner_rows: Sequence[tuple[Any, Any]] = (),
) -> LLMAnswers | None:
    """The persisted LLM answers (:class:`~graphstrata.llm.records.LLMAnswers`), records in
    chunk order, or ``None`` when the index has none (statistical extraction, or an LLM index
    persisted before them: its next update asks through the response cache).

    Args:
        rows: ``(chunk_id, key, answers)`` of table ``llm_records``.
        summaries: ``{key: summary}`` of table ``llm_summaries``.
        chunks: the index's chunks (records are kept in their order).
        stage_rows: ``(key, answer)`` of table ``llm_answers`` (absent in an index written
            before it: empty).
        owner_rows: ``(community_id, key)`` of table ``llm_answer_owners``.

    Lenient by design: a row of a chunk the index does not hold, or not of the stored types,
    is left out, and its chunk (or prompt) is asked again by the next update (a missing record
    costs a call; it never loses an entity or a report).
    """
    if not rows and not summaries and not stage_rows:
        return None
    by_id = {
        cid: LLMRecord(key, bytes(blob))
        for cid, key, blob in rows
        if isinstance(cid, str) and isinstance(key, str) and isinstance(blob, (bytes, memoryview))
    }
    records = {c.id: by_id[c.id] for c in chunks if c.id in by_id}
    kept = {k: v for k, v in summaries.items() if isinstance(k, str) and isinstance(v, str)}
    stages = {
        k: LLMRecord(k, bytes(blob))
        for k, blob in stage_rows
        if isinstance(k, str) and isinstance(blob, (bytes, memoryview))
    }
    owners = {o: k for o, k in owner_rows if isinstance(o, str) and isinstance(k, str) and k in stages}
    return LLMAnswers(records, kept, stages, owners)


def _frozen(raw: dict[str, str], path: Path) -> FrozenStats:
    """The frozen TF-IDF statistics, kept compressed (:class:`~graphstrata.state.FrozenStats`,
    decoded when an update reads them).

    Raises:
        ValueError: a value that is not a JSON object (named).
    """
    for name, text in raw.items():
        if not isinstance(text, str) or not text.lstrip().startswith("{"):
            raise ValueError(f"corrupt index {path}: frozen statistics {name!r} are not a JSON object")
    return FrozenStats.from_models(raw)
