"""Temporal linking: dates of documents, days a question names, before/after clauses, and how
ArchRAG uses them (day-named documents seed the walk; each clause is scored on its own)."""

import datetime as dt

import pytest
from graphstrata import Document, GraphStrata
from graphstrata.methods.propagation import named_chunks
from graphstrata.structures.passages import date_index
from graphstrata.methods.temporal import order_clauses
from graphstrata.structures.passages import DateIndex, document_date, mentioned_dates


def test_mentioned_dates_reads_the_common_written_forms():
    text = ("Logs of 20260708_1400 and 2025-3-6; on January 6th, Jan. 3, 2024 and "
            "the 9th of March 2023 or 21 Dec")
    assert mentioned_dates(text) == {
        (2026, 7, 8), (2025, 3, 6), (None, 1, 6), (2024, 1, 3), (2023, 3, 9), (None, 12, 21)}


def test_mentioned_dates_rejects_impossible_days_and_non_dates():
    assert mentioned_dates("February 30 and 20261301 and 20260230 and 2026-13-01") == set()
    assert mentioned_dates("you may 5 times; call 1202607081 or 120260708") == set()
    assert mentioned_dates("15 Marchers on Sept 31 walked") == set()
    assert mentioned_dates("February 29") == {(None, 2, 29)}  # a day of some year


def test_document_date_prefers_metadata_then_title_then_header():
    header = "Time: 20260105_11:00\nLiHua: see you on 20260108!"
    assert document_date(header) == dt.date(2026, 1, 5)  # the header, not the later mention
    assert document_date(header, {"title": "week2/20260112_0900"}) == dt.date(2026, 1, 12)
    assert document_date(header, {"date": "2026-02-01"}) == dt.date(2026, 2, 1)
    assert document_date(header, {"date": dt.datetime(2025, 5, 4, 10)}) == dt.date(2025, 5, 4)
    assert document_date(header, {"date": 20250504}) == dt.date(2025, 5, 4)
    assert document_date("x" * 200 + " 20260105") is None  # deep in the text: a mention
    assert document_date("From 20260105 to 20260107 we met.") is None  # two dates: ambiguous
    assert document_date("On January 6th we met.") is None  # no year: not a full date


def test_date_index_links_a_day_in_any_spelling_and_any_year_when_none_given():
    index = DateIndex({"a": dt.date(2026, 1, 6), "b": dt.date(2026, 7, 8),
                       "c": dt.date(2025, 1, 6)})
    assert len(index) == 3
    assert index.find("What did Li Hua report on 20260708?") == {"b"}
    assert index.find("What happened on January 6th, 2026?") == {"a"}
    assert index.find("What happened on January 6th?") == {"a", "c"}
    assert index.find("What happened on March 3rd?") == set()
    assert DateIndex({}).find("on 20260708") == set()
    busy = DateIndex({f"n{i}": dt.date(2026, 7, 8) for i in range(30)})
    assert busy.find("on 20260708") == set()  # 30 documents that day: no precise link
    assert len(busy.find("on 20260708", max_per_day=30)) == 30


def test_order_clauses_splits_event_clauses_only():
    q = ("Did Li Hua ask Yuriko to play music together before Wolfgang proposed to pause "
         "playing musical instruments?")
    assert order_clauses(q) == ["Did Li Hua ask Yuriko to play music together",
                                "Wolfgang proposed to pause playing musical instruments"]
    assert order_clauses("What does Jake drink after a match?") == []  # "a match": no event
    assert order_clauses("Who directed the film Big Eye?") == []
    with_after = order_clauses("Did Adam fix the heater after Li Hua reported the broken tap?")
    assert with_after == ["Did Adam fix the heater", "Li Hua reported the broken tap"]


@pytest.fixture()
def chats(embedder):
    lines = {
        "d0106": "Time: 20260106_13:00\nLiHua: Adam, the water tap is broken.\n"
                 "AdamSmith: I will send someone.",
        "d0107": "Time: 20260107_09:00\nLiHua: Adam, thanks for the quick visit!\n"
                 "AdamSmith: Anytime, glad the plumber came.",
        "d0210": "Time: 20260210_18:00\nLiHua: Adam, the report about the heater.\n"
                 "AdamSmith: Report received, thanks.",
        "d0301": "Time: 20260301_10:00\nLiHua: Adam, rent transferred.\nAdamSmith: Got it.",
        "d0415": "Time: 20260415_20:00\nYuriko: Li Hua, shall we play music together?\n"
                 "LiHua: Sure, guitar and piano!",
        "d0420": "Time: 20260420_19:00\nWolfgang: Li Hua, music tonight? Playing instruments "
                 "is fun.\nLiHua: Music with Wolfgang, always.",
        "d0502": "Time: 20260502_21:00\nWolfgang: I proposed that we pause for a while.\n"
                 "LiHua: Fine by me.",
        "gym": "Time: 20260511_08:00\nJennifer: squats and lunges today.\nLiHua: my legs are sore.",
        "soc": "Time: 20260512_17:00\nJake: soccer practice at the park.\nLiHua: I will bring water.",
    }
    return GraphStrata.build([Document(i, t) for i, t in lines.items()], embedder=embedder)


def _ranked(gs, q, k, **options):
    return {h.document_ids[0]: h.score
            for h in gs.retrieve(q, method="archrag", k=k, kinds=["chunk"], **options)}


def test_a_day_the_question_names_seeds_the_documents_of_that_day(chats):
    assert len(date_index(chats)) == 9
    q = "What did Li Hua tell Adam on January 6th?"
    rows = named_chunks(chats, q)
    assert {chats.chunks[r].document_id for r in rows} == {"d0106"}
    assert named_chunks(chats, q, dates=False) == []
    assert "d0106" in _ranked(chats, q, 2)
    assert "d0106" not in _ranked(chats, q, 3, date_links=False)  # every chat names Adam


def test_each_clause_of_a_before_question_is_scored_on_its_own(chats):
    q = ("Did Yuriko ask Li Hua to play music together before Wolfgang proposed to pause "
         "playing instruments?")
    on, off = _ranked(chats, q, 3), _ranked(chats, q, 3, decompose=False)
    assert set(on) == set(off) == {"d0415", "d0420", "d0502"}
    # the whole question is mostly about music; the second session only matches its clause
    assert on["d0502"] > 3 * off["d0502"]
