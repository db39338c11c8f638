"""HiRAG summary-entity prompt (``seed-hirag.md`` §2.5.1).

Our own wording; the output format is the spec's tuple record
``("entity"<|>NAME<|>TYPE<|>DESCRIPTION)``, records separated by ``##``, ended by
``<|COMPLETE|>`` (the extraction prompts' delimiters, so one parser,
:func:`graphstrata.llm.extraction_parsing.parse_extraction`, reads both). Two deliberate
differences from the paper's prompt:

* we ask for **one** summary entity per cluster (the paper: "at least one"): HiIndex keeps one
  summary node per cluster, and the parser keeps the first entity record when a model writes
  more (the spec's "keep the first record per name");
* we do not ask for the ``("relationship"...)`` records: the paper's Alg. 1 links *every*
  member of the cluster to the summary entity (E_{i−1,i}, spec §2.5), which HiIndex does
  without the model's help.
"""

from __future__ import annotations

#: the meta summary-entity types X (spec §2.9, the reference code's list)
META_TYPES: tuple[str, ...] = (
    "organization",
    "person",
    "location",
    "event",
    "product",
    "technology",
    "industry",
    "mathematics",
    "social sciences",
)

SUMMARY_ENTITY_SYSTEM = (
    "You name the common theme of a group of entities as one higher-level entity. "
    "You answer with the requested record only: no introduction, no explanation."
)

#: user prompt; ``{meta_types}`` a comma-separated type list, ``{entities}`` one
#: ``(name, description)`` line per member entity
SUMMARY_ENTITY_PROMPT = """\
Below is a list of related entities with their descriptions, and a list of meta types.
Find ONE attribute entity that summarises what the listed entities have in common. It must be \
an instance of one of the meta types (if a meta type is "company", the attribute entity could \
be "Amazon" or "Meta"), and it must be directly and clearly related to the listed entities.

Write it as one record:
("entity"<|><entity_name><|><entity_type><|><entity_description>)
- entity_name: the attribute entity's name, capitalized;
- entity_type: one of the meta types, or normal_entity if none fits;
- entity_description: a comprehensive description of the attribute entity and of how the \
listed entities relate to it.
Then write <|COMPLETE|>.

Example
Meta types: company, location
Entities:
("Instagram", "Instagram is a photo-sharing app developed by Meta.")
("Facebook", "Facebook is a social networking platform launched in 2004, owned by Meta.")
("WhatsApp", "WhatsApp Messenger is a messaging app of Meta.")
Output:
("entity"<|>Meta<|>company<|>Meta, formerly Facebook, Inc., is an American technology \
company that owns the social networking service Facebook, the photo-sharing app Instagram \
and the messenger WhatsApp.)
<|COMPLETE|>

Real data
Meta types: {meta_types}
Entities:
{entities}
Output:
"""
