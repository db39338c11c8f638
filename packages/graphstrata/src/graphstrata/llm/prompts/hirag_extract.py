"""HiRAG's two-stage extraction prompts (``seed-hirag.md`` §2.2–2.3): entities first, then the
relationships among the entities found.

Our own wording, in the spec's output formats and the extraction prompts' delimiters
(:mod:`.lightrag_extract`), so one parser
(:func:`graphstrata.llm.extraction_parsing.parse_extraction`) reads both stages:

* stage 1, :func:`entity_prompt` (send with :data:`ENTITY_SYSTEM`): one
  ``("entity"<|>NAME<|>TYPE<|>DESCRIPTION)`` record per entity, types from the meta set X
  (:data:`~.hirag.META_TYPES`, spec §2.9) or ``normal_entity``;
* stage 2, :func:`relation_prompt` (send with :data:`RELATION_SYSTEM`): given the names stage 1
  kept for the chunk, one ``("relationship"<|>SOURCE<|>TARGET<|>DESCRIPTION<|>STRENGTH)`` record
  per related pair: HiRAG's five fields, no keywords (spec §2.3).

Records end with ``##``, the answer with ``<|COMPLETE|>``. A gleaning pass is the conversation
written out as one prompt
(:func:`~graphstrata.llm.prompts.lightrag_extract.continued`, given the stage's gleaning
instruction), as for LightRAG; each stage has its own gleaning
instruction and "still missing?" question. The two worked examples share one passage and its
names (:data:`EXAMPLE_ENTITY_NAMES`), which the echo guard looks for
(:mod:`graphstrata.llm.guards`).
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from .hirag import META_TYPES
from .lightrag_extract import COMPLETION_DELIMITER, RECORD_DELIMITER, TUPLE_DELIMITER

#: the type of an entity that fits none of the offered types (the spec's ``normal_entity``)
NORMAL_ENTITY = "normal_entity"
#: the entity types stage 1 offers: the meta set X (spec §2.2: ``entity_types`` = X)
DEFAULT_ENTITY_TYPES: tuple[str, ...] = META_TYPES

ENTITY_SYSTEM = (
    "You find the entities a passage names, for a knowledge graph. You write them as records in "
    "the exact format you are given, and nothing else: no introduction, no explanation, no markdown."
)
RELATION_SYSTEM = (
    "You find how given entities of a passage are related, for a knowledge graph. You write the "
    "relationships as records in the exact format you are given, and nothing else: no "
    "introduction, no explanation, no markdown."
)

_D = TUPLE_DELIMITER
_R = RECORD_DELIMITER

#: the entity names of the worked examples: an answer naming them, when its chunk does not,
#: copied the example (:mod:`graphstrata.llm.guards`)
EXAMPLE_ENTITY_NAMES = ("Oskar Lind", "Vatten Bridge", "Norrholm County", "Lind & Berg")

_EXAMPLE_TEXT = (
    "The Vatten Bridge, designed by the engineer Oskar Lind of the firm Lind & Berg, was opened by "
    "Norrholm County in 1931 and carried the first electric tram across the estuary."
)
_EXAMPLE_TYPES = "person, organization, location, technology, event"

_ENTITY_EXAMPLE = f"""Types: {_EXAMPLE_TYPES}
Text: {_EXAMPLE_TEXT}
Output:
("entity"{_D}Oskar Lind{_D}person{_D}Oskar Lind is the engineer of Lind & Berg who designed the Vatten Bridge.){_R}
("entity"{_D}Lind & Berg{_D}organization{_D}Lind & Berg is the engineering firm of Oskar Lind.){_R}
("entity"{_D}Vatten Bridge{_D}technology{_D}The Vatten Bridge crosses the estuary; it opened in 1931 and carried the first electric tram.){_R}
("entity"{_D}Norrholm County{_D}location{_D}Norrholm County opened the Vatten Bridge in 1931.){_R}
{COMPLETION_DELIMITER}"""

_RELATION_EXAMPLE = f"""Entities: {json.dumps(list(EXAMPLE_ENTITY_NAMES))}
Text: {_EXAMPLE_TEXT}
Output:
("relationship"{_D}Oskar Lind{_D}Vatten Bridge{_D}Oskar Lind designed the Vatten Bridge.{_D}9){_R}
("relationship"{_D}Oskar Lind{_D}Lind & Berg{_D}Oskar Lind is an engineer of the firm Lind & Berg.{_D}7){_R}
("relationship"{_D}Norrholm County{_D}Vatten Bridge{_D}Norrholm County opened the Vatten Bridge in 1931.{_D}8){_R}
{COMPLETION_DELIMITER}"""

ENTITY_GLEANING_INSTRUCTION = (
    "Many entities of the text are missing from the records above. Write the missing ones now, in "
    f"the same format, one record per line, without repeating a record already written. End with {COMPLETION_DELIMITER}."
)
ENTITY_CONTINUE_QUESTION = (
    "Are entities of the text still missing from the records above? Answer with one word: YES or NO."
)
RELATION_GLEANING_INSTRUCTION = (
    "Some relationships among the listed entities are missing from the records above. Write the "
    "missing ones now, in the same format, one record per line, without repeating a record already "
    f"written. End with {COMPLETION_DELIMITER}."
)
RELATION_CONTINUE_QUESTION = (
    "Are relationships among the listed entities still missing from the records above? Answer with "
    "one word: YES or NO."
)


def _title_line(title: str | None) -> str:
    return f"Document title: {title}\n" if title else ""


def entity_prompt(
    text: str,
    entity_types: Sequence[str] = DEFAULT_ENTITY_TYPES,
    language: str = "English",
    title: str | None = None,
) -> str:
    """Stage 1 (spec §2.2): the entities of one chunk (send with :data:`ENTITY_SYSTEM`).

    Args:
        text: the chunk text.
        entity_types: the types offered (lower-case); :data:`NORMAL_ENTITY` is always allowed.
        language: language of the descriptions (names stay as written in the text).
        title: the chunk's document title, shown as context (``None``: no title line).
    """
    types = ", ".join(entity_types)
    return f"""Task: list the entities that the text below names.

Find every entity of one of these types: {types}. Write one record for each:
("entity"{_D}NAME{_D}TYPE{_D}DESCRIPTION){_R}
- NAME: the entity's name as the text writes it (its full name).
- TYPE: one of the types above, in lower case, or {NORMAL_ENTITY} when none of them fits.
- DESCRIPTION: one or two sentences in {language} about the entity's attributes and what it \
does, with facts from the text only.

Rules: entities only, no relationships. One record per line, ended by {_R}. Separate fields \
with {_D} only. Write nothing but records. After the last record write {COMPLETION_DELIMITER}.

Example
{_ENTITY_EXAMPLE}

Now the real text.
Types: {types}
{_title_line(title)}Text: {text}
Output:
"""


def relation_prompt(text: str, entities: Sequence[str], language: str = "English", title: str | None = None) -> str:
    """Stage 2 (spec §2.3): the relationships among ``entities``, the names stage 1 kept for
    this chunk (send with :data:`RELATION_SYSTEM`).

    Args:
        text: the chunk text.
        entities: the chunk's entity names from stage 1, listed as a JSON array.
        language: language of the descriptions.
        title: the chunk's document title, shown as context (``None``: no title line).
    """
    listed = json.dumps(list(entities), ensure_ascii=False)
    return f"""Task: the entities listed below were found in the text below. Find which pairs of them \
the text clearly relates.

For each related pair, write one record:
("relationship"{_D}SOURCE{_D}TARGET{_D}DESCRIPTION{_D}STRENGTH){_R}
- SOURCE, TARGET: two names from the entity list, written exactly as listed.
- DESCRIPTION: one sentence in {language} saying how the text relates them.
- STRENGTH: a whole number from 1 (weak) to 10 (very strong).

Rules: use only names from the list; skip pairs the text does not relate. One record per line, \
ended by {_R}. Separate fields with {_D} only. Write nothing but records. After the last record \
(or at once, when no pair is related) write {COMPLETION_DELIMITER}.

Example
{_RELATION_EXAMPLE}

Now the real text.
Entities: {listed}
{_title_line(title)}Text: {text}
Output:
"""
