"""AGRAG triple-extraction prompt (``seed-agrag.md`` §1.3: the OpenIE triple prompt, given the
chunk's statistical entities as hints).

Our own wording, in the spec's output format: one JSON object ``{"triples": [[subject,
relation, object], ...]}``. The query-time fact filter and answer prompts live in
:mod:`graphstrata.llm.prompts.agrag_query`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

TRIPLES_SYSTEM = (
    "You turn a passage into a small knowledge graph: the facts it states, as [subject, relation, object] "
    "triples. You answer with one JSON object and nothing else."
)

_EXAMPLE_PASSAGE = (
    "Ilves Labs is a chemistry company founded by Mara Ilves in 1998. "
    "It is based in Tallinn, the capital of Estonia."
)
_EXAMPLE_ENTITIES = ["Ilves Labs", "Mara Ilves", "Tallinn", "Estonia"]
_EXAMPLE_TRIPLES = [
    ["Ilves Labs", "is a", "chemistry company"],
    ["Mara Ilves", "founded", "Ilves Labs"],
    ["Ilves Labs", "was founded in", "1998"],
    ["Ilves Labs", "is based in", "Tallinn"],
    ["Tallinn", "is the capital of", "Estonia"],
]

#: every name of the worked example (entities and triple ends): a triple naming one that its
#: chunk does not copied the example (:mod:`graphstrata.llm.guards`)
EXAMPLE_ENTITY_NAMES = tuple(dict.fromkeys([*_EXAMPLE_ENTITIES, *(t[i] for t in _EXAMPLE_TRIPLES for i in (0, 2))]))


def _case(passage: str, entities: Sequence[str]) -> str:
    return f"Passage:\n```\n{passage}\n```\n" + json.dumps({"named_entities": list(entities)}, ensure_ascii=False)


def triples_prompt(text: str, entities: Sequence[str]) -> str:
    """The triple-extraction prompt for one chunk (send with :data:`TRIPLES_SYSTEM`, JSON mode).

    Args:
        text: the chunk text.
        entities: the chunk's statistical (TF-IDF) entity names, as hints; may be empty.
    """
    example_out = json.dumps({"triples": _EXAMPLE_TRIPLES}, ensure_ascii=False)
    return f"""List the facts the passage states as triples [subject, relation, object].
- Subject and object are short names: people, places, organisations, works, dates, numbers, concepts.
- When named entities are listed, each triple should contain at least one of them, ideally two.
- The relation is a short verb phrase, such as "was born in", "founded", "is part of".
- Replace pronouns ("it", "she", "they") with the names they stand for.
- Answer with one JSON object: {{"triples": [["subject", "relation", "object"], ...]}}

Example
{_case(_EXAMPLE_PASSAGE, _EXAMPLE_ENTITIES)}
Output:
{example_out}

{_case(text, entities)}
Output:
"""
