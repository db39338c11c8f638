"""Pictures of the hierarchy (graphstrata.viz): the PNG sunburst and the self-contained HTML page.

One small index (HashEmbedder, config small enough for two community layers) serves every
test; one of its documents carries a ``</script>`` payload to prove the page's data block
cannot be broken out of.
"""

from __future__ import annotations

import io
import json
import re
import sys
from html.parser import HTMLParser

import pytest
from graphstrata import Document, GraphStrata
from graphstrata.viz import UNCLUSTERED, render_html, render_png

pytest.importorskip("matplotlib")
Image = pytest.importorskip("PIL.Image")
ImageChops = pytest.importorskip("PIL.ImageChops")

PAYLOAD = "</script><script>alert(1)</script><!-- x"

DOCS = [
    Document("bank", "Bank of America was founded by Amadeo Giannini in San Francisco in 1904. "
             "Amadeo Giannini was born in San Jose.", {"title": "Bank of America"}),
    Document("giannini", "Amadeo Giannini was an Italian-American banker. Giannini grew up in San "
             "Jose, California.", {"title": "Amadeo Giannini"}),
    Document("sanjose", "San Jose is a city in Santa Clara County, California. San Jose is the "
             "largest city in Northern California.", {"title": "San Jose"}),
    Document("everest", "Mount Everest is the highest mountain above sea level. Tenzing Norgay and "
             "Edmund Hillary climbed Mount Everest in 1953.", {"title": "Mount Everest"}),
    Document("hillary", "Edmund Hillary was a mountaineer from New Zealand. Edmund Hillary was born "
             "in Auckland.", {"title": "Edmund Hillary"}),
    Document("auckland", "Auckland is the largest city in New Zealand. Auckland lies on the North "
             "Island.", {"title": "Auckland"}),
    Document("xss", f"Evil Corp wrote {PAYLOAD} into Mallory Script. Mallory Script met Evil Corp "
             "in Auckland.", {"title": f"Evil {PAYLOAD}"}),
]
CONFIG = {"min_communities": 2, "max_community_size": 4, "chunk_size": 40, "chunk_overlap": 8}
QUERY = "Who climbed Mount Everest with Tenzing Norgay?"


@pytest.fixture(scope="module")
def gs(embedder):
    g = GraphStrata.build(DOCS, embedder=embedder, config=CONFIG)
    assert len(g.state.communities) >= 2, "the test corpus must give a two-layer hierarchy"
    return g


@pytest.fixture(scope="module")
def flat(embedder):
    """Entities but no communities: the default config on a corpus this small."""
    g = GraphStrata.build(DOCS[:3], embedder=embedder)
    assert not g.state.communities and g.state.kg.entities
    return g


PNG = {"dpi": 40, "size_inches": 6.0}  # small and fast


def _pixels(path):
    im = Image.open(path)
    im.load()
    return im.convert("RGB")


# ---- PNG ----------------------------------------------------------------------------------


def test_png_is_a_nonblank_multicolour_picture_of_the_requested_size(gs, tmp_path):
    out = render_png(gs, tmp_path / "h.png", **PNG)
    assert out == tmp_path / "h.png"
    im = _pixels(out)
    assert im.size == (240, 264)  # size_inches * dpi wide, 10% taller for title and footer
    colours = im.getcolors(maxcolors=1 << 16)
    assert colours is not None and len(colours) > 20, "a sunburst has many colours"
    white = sum(n for n, c in colours if c == (255, 255, 255))
    assert white < 0.8 * im.size[0] * im.size[1], "mostly blank"
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_png_is_deterministic_and_the_highlighted_version_differs(gs, tmp_path):
    a = render_png(gs, tmp_path / "a.png", **PNG).read_bytes()
    b = render_png(gs.state, tmp_path / "b.png", **PNG).read_bytes()
    assert a == b
    hits = gs.retrieve(QUERY, k=3)
    q = render_png(gs, tmp_path / "q.png", query_hits=hits, query=QUERY, **PNG)
    assert q.read_bytes() != a
    plain, lit = _pixels(tmp_path / "a.png"), _pixels(q)
    changed = ImageChops.difference(plain, lit).convert("L").point(lambda v: 255 if v else 0)
    diff = changed.histogram()[255]
    assert diff > 0.05 * plain.size[0] * plain.size[1], "highlighting must visibly fade / outline wedges"
    # the same hits as dicts (Hit.to_dict(), e.g. the CLI's --json) give the same picture
    d = render_png(gs, tmp_path / "d.png", query_hits=[h.to_dict() for h in hits], query=QUERY, **PNG)
    assert d.read_bytes() == q.read_bytes()


def test_png_leaves_the_callers_matplotlib_backend_alone(gs, tmp_path):
    import matplotlib

    before = dict.__getitem__(matplotlib.rcParams, "backend")
    had_pyplot = "matplotlib.pyplot" in sys.modules
    render_png(gs, tmp_path / "h.png", **PNG)
    assert dict.__getitem__(matplotlib.rcParams, "backend") == before
    assert ("matplotlib.pyplot" in sys.modules) == had_pyplot


def test_png_of_an_index_without_communities_draws_its_entities(flat, tmp_path):
    im = _pixels(render_png(flat, tmp_path / "flat.png", **PNG))
    assert len(im.getcolors(maxcolors=1 << 16)) > 5


def test_png_caps_merge_the_rest_into_more_wedges(gs, tmp_path):
    capped = render_png(gs, tmp_path / "c.png", max_communities=1, max_entities=2, **PNG)
    full = render_png(gs, tmp_path / "f.png", **PNG)
    assert capped.read_bytes() != full.read_bytes()
    none = render_png(gs, tmp_path / "n.png", max_entities=0, entity_labels=0, **PNG)
    assert none.read_bytes() != full.read_bytes()


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"path": "missing-dir/out.png"}, "does not exist"),
        ({"path": "out.jpg"}, "must end with .png"),
        ({"path": "dir.png"}, "is a directory"),
        ({"max_communities": 0}, "max_communities"),
        ({"dpi": 5}, "dpi"),
        ({"query_hits": ["nope"]}, r"query_hits\[0\]"),
        ({"query_hits": "chunk"}, "sequence of hits"),
    ],
)
def test_png_bad_input_is_one_clear_value_error(gs, tmp_path, kwargs, match):
    kwargs = dict(kwargs)
    (tmp_path / "dir.png").mkdir()
    path = tmp_path / kwargs.pop("path", "ok.png")
    with pytest.raises(ValueError, match=match):
        render_png(gs, path, **kwargs)


def test_bad_sources_are_value_errors(gs, tmp_path):
    with pytest.raises(ValueError, match="GraphStrata or an EngineState"):
        render_png({"not": "an index"}, tmp_path / "x.png")
    with pytest.raises(ValueError, match="needs a GraphStrata"):
        render_html(gs.state, tmp_path / "x.html", query=QUERY)
    with pytest.raises(ValueError, match="non-empty str"):
        render_html(gs, tmp_path / "x.html", query="  ")


def test_an_index_without_entities_is_refused(embedder, tmp_path):
    empty = GraphStrata.build([Document("d", "and the of it is, was; to by - 123 4.5")], embedder=embedder)
    if empty.state.kg.entities:  # pragma: no cover - depends on the extractor's stop list
        pytest.skip("the extractor found entities in the stop-word document")
    with pytest.raises(ValueError, match="no entities"):
        render_png(empty, tmp_path / "e.png")
    with pytest.raises(ValueError, match="no entities"):
        render_html(empty, tmp_path / "e.html")


# ---- HTML ---------------------------------------------------------------------------------


class _Scan(HTMLParser):
    """Elements and attributes of a page, and the text of each script."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict]] = []
        self.scripts: list[tuple[dict, str]] = []
        self._in_script: dict | None = None
        self._buf: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag == "script":
            self._in_script, self._buf = dict(attrs), []

    def handle_data(self, data):
        if self._in_script is not None:
            self._buf.append(data)

    def handle_endtag(self, tag):
        if tag == "script" and self._in_script is not None:
            self.scripts.append((self._in_script, "".join(self._buf)))
            self._in_script = None


def _scan(path):
    text = path.read_text(encoding="utf-8")
    s = _Scan()
    s.feed(text)
    s.close()
    return text, s


def _data(scan):
    blocks = [body for attrs, body in scan.scripts if attrs.get("type") == "application/json"]
    assert len(blocks) == 1
    return json.loads(blocks[0])


def test_html_is_self_contained_and_holds_every_top_layer_community(gs, tmp_path):
    out = render_html(gs, tmp_path / "h.html")
    text, scan = _scan(out)
    assert text.startswith("<!DOCTYPE html>")
    # exactly the data block and one inline script; nothing loaded from anywhere
    assert [a.get("type") for a, _ in scan.scripts] == ["application/json", None]
    for tag, attrs in scan.tags:
        assert "src" not in attrs and tag not in ("link", "iframe", "img", "object", "embed"), (tag, attrs)
        assert not any(str(v).startswith(("http:", "https:", "//")) for v in attrs.values() if v), (tag, attrs)
    page_without_data = text.replace(scan.scripts[0][1], "")
    assert not re.search(r"https?://|@import|url\(", page_without_data)
    data = _data(scan)
    top = [c.id for c in gs.state.communities[-1]]
    assert set(top) <= set(data["roots"]) and set(top) <= set(data["nodes"])
    for cid in top:
        assert data["nodes"][cid]["t"] == " ".join(gs.state.communities[-1][top.index(cid)].title.split())
    # every community and every entity of a small index is in the file, under its parent
    assert set(data["nodes"]) == {c.id for layer in gs.state.communities for c in layer}
    assert set(data["ents"]) == set(gs.state.kg.entities)
    for layer1 in gs.state.communities[0]:
        assert set(data["nodes"][layer1.id].get("e", [])) == set(layer1.members)
    some = next(iter(data["ents"].values()))
    assert some["c"] and all(c in data["chunks"] for c in some["c"])
    assert data["query"] is None
    assert data["meta"]["entities"] == len(gs.state.kg.entities)


def test_html_data_cannot_break_out_of_its_script_element(gs, tmp_path):
    out = render_html(gs, tmp_path / "h.html", title=f"T {PAYLOAD}")
    text, scan = _scan(out)
    assert "alert(1)</script>" not in text and "<script>alert" not in text
    assert len(scan.scripts) == 2, "the payload must not open or close a script element"
    assert "<!--" not in scan.scripts[0][1]
    data = _data(scan)
    xss = [c for c in data["chunks"].values() if c["d"] == "xss"]
    assert xss and PAYLOAD in xss[0]["t"], "the text itself round-trips unchanged"
    assert PAYLOAD in data["docs"]["xss"]
    assert "<title>T &lt;/script&gt;" in text


def test_html_marks_query_hits_layer_by_layer(gs, tmp_path):
    hits = gs.retrieve(QUERY, method="archrag", k=3)
    out = render_html(gs, tmp_path / "q.html", query=QUERY, query_hits=hits, method="archrag")
    data = _data(_scan(out)[1])
    q = data["query"]
    assert q["q"] == QUERY and q["method"] == "archrag"
    assert [h["id"] for h in q["hits"]] == [h.id for h in hits]
    retrieved = {k for k, v in q["mark"].items() if v == 2}
    expected = {h.id for h in hits if h.kind in ("community", "entity")}
    assert expected and expected <= retrieved
    for h in hits:
        if h.kind == "community":  # its parent is marked as containing a hit
            parent = data["nodes"][h.id].get("p")
            assert parent is None or q["mark"].get(parent, 0) >= 1
        if h.kind == "chunk":
            assert h.id in data["chunks"]
    # a GraphStrata retrieves by itself when given only the query
    alone = _data(_scan(render_html(gs, tmp_path / "a.html", query=QUERY))[1])
    assert [h["id"] for h in alone["query"]["hits"]] == [h.id for h in gs.retrieve(QUERY)]


def test_hits_from_json_with_odd_fields_do_not_break_either_picture(gs, tmp_path):
    odd = [
        {"kind": "path", "id": "p1", "metadata": {"entities": [["x"], 3, None, "edmund hillary"]},
         "score": "nan", "chunk_ids": 5, "layer": "2", "text": None},
        {"kind": "community", "id": "hirag:C9", "metadata": {"members": "not a list"}},
        {"kind": "weird", "id": "w", "metadata": [1, 2]},
    ]
    render_png(gs, tmp_path / "odd.png", query_hits=odd, **PNG)
    data = _data(_scan(render_html(gs, tmp_path / "odd.html", query_hits=odd))[1])
    assert [h["s"] for h in data["query"]["hits"]] == [0.0, 0.0, 0.0]
    assert data["query"]["outside"] == 2
    if "edmund hillary" in gs.state.kg.entities:
        assert data["query"]["mark"]["edmund hillary"] == 2


def test_html_caps_bound_the_file_and_say_what_was_left_out(gs, tmp_path):
    full = render_html(gs, tmp_path / "full.html")
    small = render_html(gs, tmp_path / "small.html", max_entities_per_community=1,
                        max_chunks_per_entity=1, max_chunks=2, max_chunk_chars=20, max_text_chars=20)
    assert small.stat().st_size < full.stat().st_size
    data = _data(_scan(small)[1])
    assert all(len(c["t"]) <= 20 for c in data["chunks"].values())
    assert len(data["chunks"]) <= 2
    assert all(len(e["d"]) <= 20 for e in data["ents"].values())
    assert all(len(n.get("e", [])) <= 1 for n in data["nodes"].values())
    assert any(n.get("me") for n in data["nodes"].values()), "a 'N more entities' note"
    assert data["meta"]["omitted"]["entities"] > 0
    assert data["meta"]["caps"]["max_chunk_chars"] == 20
    top = _data(_scan(render_html(gs, tmp_path / "top.html", max_communities=1))[1])
    assert len([n for n in top["nodes"] if n != UNCLUSTERED]) == 1
    assert any(n.get("mc") for n in top["nodes"].values()), "a 'N more sub-communities' note"
    assert top["meta"]["omitted"]["communities"] > 0 and top["meta"]["omitted"]["roots"] > 0


def test_html_of_an_index_without_communities_lists_entities_unclustered(flat, tmp_path):
    data = _data(_scan(render_html(flat, tmp_path / "flat.html"))[1])
    assert data["roots"] == [UNCLUSTERED]
    assert set(data["nodes"][UNCLUSTERED]["e"]) == set(flat.state.kg.entities)


@pytest.mark.parametrize(
    "kwargs, match",
    [
        ({"path": "nowhere/x.html"}, "does not exist"),
        ({"path": "x.png"}, r"must end with \.html"),
        ({"max_chunk_chars": 3}, "max_chunk_chars"),
        ({"max_entities_per_community": 0}, "max_entities_per_community"),
        ({"query_hits": [{"kind": "chunk"}]}, r"query_hits\[0\]"),
    ],
)
def test_html_bad_input_is_one_clear_value_error(gs, tmp_path, kwargs, match):
    kwargs = dict(kwargs)
    path = tmp_path / kwargs.pop("path", "ok.html")
    with pytest.raises(ValueError, match=match):
        render_html(gs, path, **kwargs)


def test_png_bytes_open_with_pillow_from_memory(gs, tmp_path):
    raw = render_png(gs, tmp_path / "m.png", **PNG).read_bytes()
    assert Image.open(io.BytesIO(raw)).format == "PNG"


def test_html_colours_entities_by_type_with_a_legend(embedder, tmp_path):
    pytest.importorskip("spacy")
    typed = GraphStrata.build(DOCS[:6], embedder=embedder, config={**CONFIG, "extractor": "nlp"})
    text, scan = _scan(render_html(typed, tmp_path / "t.html"))
    data = _data(scan)
    types = {rec.get("ty") for rec in data["ents"].values()} - {None}
    assert {"person", "place"} <= types
    assert set(data["types"]) == types and all(re.fullmatch(r"#[0-9a-f]{6}", c) for c in data["types"].values())
    assert data["types"]["person"] != data["types"]["place"]
    assert 'id="legend"' in text
    # an untyped (statistical) index has no legend entries
    assert _data(_scan(render_html(GraphStrata.build(DOCS[:6], embedder=embedder, config=CONFIG),
                                   tmp_path / "s.html"))[1])["types"] == {}
