"""Second-hop (entity bridge) evidence used by LightRAG's chunk ranking."""

from graphstrata import GraphStrata
from graphstrata.methods.base import bridge_evidence


def test_bridge_reaches_the_document_about_an_entity_the_seed_mentions(corpus, embedder, small_config):
    gs = GraphStrata.build(corpus, config=small_config, embedder=embedder)
    seed = gs.chunk_row["everest#0"]  # mentions Edmund Hillary, whose own page is "hillary"
    evidence = bridge_evidence(gs, [(seed, 1.0)], max_df=10)
    docs = {gs.chunks[r].document_id for r in evidence}
    assert "hillary" in docs
    assert "everest" not in docs  # never the seed's own document
    assert "bank" not in docs  # nothing shared with the seed
    # hub entities above max_df do not bridge
    assert bridge_evidence(gs, [(seed, 1.0)], max_df=1) == {}
    assert bridge_evidence(gs, [(seed, 0.0)], max_df=10) == {}
