"""Pictures of the community hierarchy: a PNG sunburst and one self-contained HTML explorer.

Two renderers read one :class:`~graphstrata.state.EngineState` (or a
:class:`~graphstrata.GraphStrata`, whose current state is used):

- :func:`render_png` draws the hierarchy as a sunburst with matplotlib (Agg, no display and
  no change to the caller's pyplot backend): the innermost ring is the top layer, each ring
  outwards one layer lower, layer 1 next to the outer ring of entities. A wedge's angle is the
  number of entities under it, so children nest exactly inside their parent. Titles are
  printed where they fit. Given a query's hits, what was retrieved is outlined at full colour
  on its own ring (communities on their layer's ring, entities on the entity ring), what
  contains or mentions it keeps its colour, and everything else fades.
- :func:`render_html` writes one HTML file with the data, CSS and JavaScript inline (no
  network, no CDN): a sunburst overview, a collapsible tree from the top layer down to
  communities' entities, and a detail panel with a community's summary or an entity's
  description, neighbours and source chunks. Given a query, retrieved items are badged layer
  by layer and a panel lists the hits; clicking one reveals it in the tree.

Both accept the hits of :meth:`GraphStrata.retrieve` (``Hit`` objects or their
``to_dict()`` form). How hits map onto the picture:

- ``community`` hits whose id is a community of the hierarchy, ``entity`` hits, both ends of
  ``relation`` hits and the entities of ``path`` hits (``metadata["entities"]``, ``"nodes"``,
  ``"key_entities"``, ``"anchors"``) are *retrieved*;
- the communities above a retrieved item ("contains a hit"), the entities of retrieved chunks
  and the members of communities that are not part of this hierarchy (HiRAG's GMM summary
  communities, ids ``"hirag:C<i>"``) are *context* ("mentioned in a hit").

An index with entities but no communities (a corpus too small to cluster) still renders: its
entities hang under one grey "not in a community" node, as do entities that no layer-1
community claims. An index without entities has nothing to draw and raises ``ValueError``.
"""

from .html import render_html
from .model import CONTEXT as CONTEXT
from .model import RETRIEVED as RETRIEVED
from .model import UNCLUSTERED as UNCLUSTERED
from .png import render_png

__all__ = ["render_png", "render_html"]
