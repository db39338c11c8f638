"""Entity and relationship extraction prompts (LightRAG ``seed-lightrag.md`` §1.4–1.7; HiRAG
``seed-hirag.md`` §2.2–2.4 uses the same record format).

Our own wording, in the spec's output format: one tuple record per entity
``("entity"<|>NAME<|>TYPE<|>DESCRIPTION)`` and per relationship
``("relationship"<|>SOURCE<|>TARGET<|>DESCRIPTION<|>KEYWORDS<|>STRENGTH)``, records ended by
``##``, the answer ended by ``<|COMPLETE|>`` (the reference code's delimiters, spec §8 #8). The
spec's ``content_keywords`` record is not asked for (spec §8 #7: discarded).

The protocol completes one prompt, so a gleaning pass is the whole conversation written out as
one prompt: the extraction prompt, the answers so far (each gleaning answer after the gleaning
instruction that asked for it), then the next instruction (:func:`continued`).
"""

from __future__ import annotations

from collections.abc import Sequence

TUPLE_DELIMITER = "<|>"
RECORD_DELIMITER = "##"
COMPLETION_DELIMITER = "<|COMPLETE|>"

#: the paper's entity types (``seed-lightrag.md`` §1.4, Fig. 4)
DEFAULT_ENTITY_TYPES: tuple[str, ...] = ("organization", "person", "geo", "event")

EXTRACT_SYSTEM = (
    "You build a knowledge graph from text. You read one passage, list the entities it names and the "
    "relationships between them, and write them as records in the exact format you are given. "
    "You write only records: no introduction, no explanation, no markdown."
)

_D = TUPLE_DELIMITER
_R = RECORD_DELIMITER

#: the entity names of the worked example: an answer naming them, when its chunk does not, copied
#: the example (:mod:`graphstrata.llm.guards`)
EXAMPLE_ENTITY_NAMES = ("Mara Ilves", "Tartu University", "Ilves Labs", "Tallinn")

_EXAMPLE = f"""Types: person, organization, geo, event
Text: In 1998 the chemist Mara Ilves left Tartu University to found Ilves Labs in Tallinn.
Output:
("entity"{_D}Mara Ilves{_D}person{_D}Mara Ilves is a chemist who founded Ilves Labs in 1998.){_R}
("entity"{_D}Tartu University{_D}organization{_D}Tartu University is where Mara Ilves worked until 1998.){_R}
("entity"{_D}Ilves Labs{_D}organization{_D}Ilves Labs is a company that Mara Ilves founded in Tallinn in 1998.){_R}
("entity"{_D}Tallinn{_D}geo{_D}Tallinn is the city where Ilves Labs was founded.){_R}
("relationship"{_D}Mara Ilves{_D}Ilves Labs{_D}Mara Ilves founded Ilves Labs in 1998.{_D}founding, ownership{_D}9){_R}
("relationship"{_D}Mara Ilves{_D}Tartu University{_D}Mara Ilves worked there until 1998.{_D}employment{_D}6){_R}
("relationship"{_D}Ilves Labs{_D}Tallinn{_D}Ilves Labs is based in Tallinn.{_D}location{_D}7){_R}
{COMPLETION_DELIMITER}"""

GLEANING_INSTRUCTION = (
    "Some entities and relationships of the text are missing from the records above. "
    "Write the missing ones now, in the same format, one record per line, without repeating a record "
    f"already written. End with {COMPLETION_DELIMITER}."
)

CONTINUE_QUESTION = (
    "Are entities or relationships of the text still missing from the records above? "
    "Answer with one word: YES or NO."
)


#: system prompt of the short prompt for small models (:func:`extract_prompt` with ``examples=False``)
EXTRACT_SYSTEM_SHORT = "You answer questions about a text briefly, using names as the text writes them."

_KIND_WORDS = {"person": "people", "organization": "organizations", "geo": "places", "event": "events"}


def short_extract_prompt(text: str, entity_types: Sequence[str], title: str | None = None) -> str:
    """A short question for small local models (send with :data:`EXTRACT_SYSTEM_SHORT`): they
    copy the names of a few-shot example and do not keep the record format, but answer a plain
    question with a list (``The people in this text are A, B and C.`` or ``- NAME: ...``
    bullets), which :func:`graphstrata.llm.extraction_parsing.parse_extraction` reads as typed entities.
    No relationships are asked for."""
    # people first: the model repeats the list in its answer, whose first kind is the default type
    ordered = sorted(entity_types, key=lambda t: t != "person")
    kinds = [_KIND_WORDS.get(t, f"{t}s") for t in ordered]
    named = kinds[0] if len(kinds) == 1 else ", ".join(kinds[:-1]) + " and " + kinds[-1]
    title_line = f"Document title: {title}\n" if title else ""
    return f"""{title_line}Text: {text}

Who are the {named} named in this text? Say which kind they are, then write one line for each: "- NAME: what the text says about it"."""


def extract_prompt(
    text: str,
    entity_types: Sequence[str],
    language: str = "English",
    title: str | None = None,
    examples: bool = True,
) -> str:
    """The extraction prompt for one chunk (send with :data:`EXTRACT_SYSTEM`).

    Args:
        text: the chunk text.
        entity_types: the types the model may use (lower-case words).
        language: language of the descriptions (names stay as written in the text).
        title: the chunk's document title, shown as context (``None``: no title line).
        examples: include the worked example (``False``: :func:`short_extract_prompt`, for
            small local models; send it with :data:`EXTRACT_SYSTEM_SHORT`).
    """
    if not examples:
        return short_extract_prompt(text, entity_types, title)
    types = ", ".join(entity_types)
    title_line = f"Document title: {title}\n" if title else ""
    return f"""Task: list the entities of the text below and the relationships between them.

1. Entities. Find every entity of one of these types: {types}. Write one record for each:
("entity"{_D}NAME{_D}TYPE{_D}DESCRIPTION){_R}
- NAME: the entity's name as the text writes it (its full name).
- TYPE: one of the types above, in lower case.
- DESCRIPTION: one or two sentences in {language} about the entity, with facts from the text only.

2. Relationships. For every pair of your entities that the text clearly relates, write one record:
("relationship"{_D}SOURCE{_D}TARGET{_D}DESCRIPTION{_D}KEYWORDS{_D}STRENGTH){_R}
- SOURCE, TARGET: two NAMEs from your entity records.
- DESCRIPTION: one sentence in {language} saying how the text relates them.
- KEYWORDS: a few comma-separated words for the kind of relationship (themes, not details).
- STRENGTH: a whole number from 1 (weak) to 10 (very strong).

Rules: one record per line, ended by {_R}. Separate fields with {_D} only. Write nothing but records.
After the last record write {COMPLETION_DELIMITER}.

Example
{_EXAMPLE}

Now the real text.
Types: {types}
{title_line}Text: {text}
Output:
"""


def continued(
    prompt: str, answers: Sequence[str], instruction: str, gleaning_instruction: str = GLEANING_INSTRUCTION
) -> str:
    """The conversation so far as one prompt, ending with ``instruction``.

    Args:
        prompt: the first prompt (:func:`extract_prompt`, or a HiRAG stage's first prompt).
        answers: the model's answers so far: the extraction answer, then one per gleaning pass.
        instruction: :data:`GLEANING_INSTRUCTION` (ask for more) or :data:`CONTINUE_QUESTION`
            (ask whether to go on), or a HiRAG stage's own.
        gleaning_instruction: the instruction written before each earlier gleaning answer
            (:data:`GLEANING_INSTRUCTION`; HiRAG's stages pass theirs).
    """
    parts = [prompt.rstrip("\n"), "\n", answers[0].strip() if answers else ""]
    for answer in answers[1:]:
        parts += ["\n\n", gleaning_instruction, "\n", answer.strip()]
    parts += ["\n\n", instruction, "\n"]
    return "".join(parts)


SUMMARY_SYSTEM = "You merge descriptions into one concise, factual description. You write only the description."


def summary_prompt(name: str, descriptions: Sequence[str], max_words: int, language: str = "English") -> str:
    """Prompt to merge the descriptions of one entity or relationship (spec §1.7, "summarise if
    the description reaches 500 tokens"); send with :data:`SUMMARY_SYSTEM`.

    Args:
        name: the entity name, or ``"A and B"`` for a relationship.
        descriptions: the descriptions collected from different chunks.
        max_words: the longest answer wanted, in words.
        language: language of the answer.
    """
    items = "\n".join(f"- {d}" for d in descriptions)
    return f"""The descriptions below of "{name}" come from different passages.
Write one description in {language}, in the third person, that keeps every fact they state and names "{name}".
Where they contradict each other, say so briefly. Use at most {max_words} words. Write only the description.

Descriptions:
{items}

Description:
"""
