"""ArchRAG community-report prompt (``seed-archrag.md`` §1.4).

Our own wording; the output format is the spec's (GraphRAG's community report, which ArchRAG's
code uses): one JSON object ``{"title", "summary", "rating", "rating_explanation",
"findings": [{"summary", "explanation"}, ...]}``. We do not ask for GraphRAG's
``[Data: Entities (ids)]`` grounding references: the report text is embedded as the community
vector and shown to readers, where reference lists are noise, and small models garble them.

The context (:func:`graphstrata.indexing.reports.format_report_context`) is CSV tables headed
``-----Reports-----``, ``-----Entities-----`` and ``-----Relationships-----``.
"""

from __future__ import annotations

COMMUNITY_REPORT_SYSTEM = (
    "You write reports about communities of related entities in a knowledge graph. "
    "You answer with one JSON object and nothing else: no introduction, no code fences, no "
    "comments."
)

#: the worked example's report: a report repeating its title or summary, or naming its entities
#: when the community's data does not, copied the example (:mod:`graphstrata.llm.guards`)
EXAMPLE_REPORT_TITLE = "Acme Corporation and its founders"
EXAMPLE_REPORT_SUMMARY = (
    "The community centres on Acme Corporation, founded by Jane Doe and John Roe in Springfield. ..."
)
EXAMPLE_REPORT_NAMES = ("Acme Corporation", "Jane Doe", "John Roe", "Springfield")

#: user prompt; ``{context}`` is the community's data tables
COMMUNITY_REPORT_PROMPT = """\
Write a report about the community described by the data tables below: the entities that \
belong to it, the relationships between them, and (for a large community) reports about its \
sub-communities. Someone who has not read the source documents should understand from the \
report who or what the community is about, how its members are connected, and why it matters.

Use only facts stated in the data tables. Do not invent names, dates or numbers.

Return one JSON object with exactly these keys:
- "title": a short, specific name for the community that mentions its most important \
entities (at most 10 words);
- "summary": an executive summary of the community in 2 to 4 sentences: its overall \
structure, how its entities relate to each other, and the most important facts about them;
- "rating": a number from 0 to 10 saying how important or impactful the community is \
(0 = trivial, 10 = of the highest importance);
- "rating_explanation": one sentence explaining the rating;
- "findings": a list of 5 to 10 key insights about the community, each an object with \
"summary" (one short sentence) and "explanation" (a few sentences grounded in the data).

Example of the format:
{{"title": "Acme Corporation and its founders",
 "summary": "The community centres on Acme Corporation, founded by Jane Doe and John Roe in \
Springfield. ...",
 "rating": 6.5,
 "rating_explanation": "Acme is a large employer in the region.",
 "findings": [{{"summary": "Jane Doe founded Acme", "explanation": "Jane Doe founded Acme \
Corporation in 1990 together with John Roe. ..."}}]}}

Data tables:
{context}

JSON report:"""
