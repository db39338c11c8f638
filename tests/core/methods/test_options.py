"""Per-query method options are type- and range-checked once, in ``Method.options`` (issue 15,
finding 9): one ValueError naming the option and the method."""

from __future__ import annotations

import math

import numpy as np
import pytest
from graphstrata import GraphStrata
from graphstrata.methods import METHODS
from graphstrata.methods.base import Method, OptionSpec

Q = "Who founded Bank of America?"


@pytest.fixture()
def gs(corpus, embedder, small_config):
    return GraphStrata.build(corpus, config=small_config, embedder=embedder)


@pytest.mark.parametrize(
    ("method", "option", "value"),
    [
        ("archrag", "propagate", "no"),
        ("archrag", "propagate", 1),
        ("archrag", "decompose", None),
        ("archrag", "alpha", 2.0),
        ("archrag", "alpha", -0.1),
        ("archrag", "alpha", math.nan),
        ("archrag", "alpha", "0.5"),
        ("archrag", "alpha", True),
        ("archrag", "k_per_layer", 0),
        ("archrag", "k_per_layer", -1),
        ("archrag", "k_per_layer", 1.5),
        ("archrag", "k_per_layer", 2.0),
        ("archrag", "k_per_layer", True),
        ("archrag", "k_entities", 0),
        ("archrag", "ef_search", 0),
        ("archrag", "damping", 1.0),
        ("archrag", "seed_power", 0),
        ("archrag", "candidates", -5),
        ("archrag", "community_weight", -1.0),
        ("hybrid", "alpha", 1.01),
        ("hybrid", "candidates", "100"),
        ("lightrag", "mode", "everything"),
        ("lightrag", "keywords_fn", "llm"),
        ("lightrag", "max_source_tokens", -1),
        ("lightrag", "min_similarity", 1.5),
        ("hirag", "weighted_paths", "yes"),
        ("hirag", "index_config", {"max_layers": 2}),
        ("hirag", "top_n", 2.5),
        ("agrag", "compat", "other"),
        ("agrag", "passage_score_factor", -1.0),
        ("agrag", "ppr_tol", 0.0),
    ],
)
def test_bad_option_raises_one_value_error_naming_option_and_method(method, option, value):
    with pytest.raises(ValueError, match=rf"option '{option}' of method '{method}' must be"):
        METHODS[method]().options({option: value})


@pytest.mark.parametrize(
    ("option", "value", "expect"),
    [("propagate", "no", "a bool"), ("alpha", 2.0, r"<= 1"), ("k_per_layer", 1.5, "an integer")],
)
def test_retrieve_reports_bad_options(gs, option, value, expect):
    with pytest.raises(ValueError, match=rf"'{option}'.*'archrag'.*{expect}.*got {value!r}"):
        gs.retrieve(Q, method="archrag", k=2, **{option: value})


@pytest.mark.parametrize(
    ("method", "options"),
    [
        ("archrag", {"propagate": False, "decompose": np.bool_(False), "alpha": 1,
                     "k_per_layer": np.int64(2), "ef_search": 16, "damping": 0.0}),
        ("archrag", {"ef_search": None, "alpha": np.float32(0.25), "entity_weight": 0}),
        ("hybrid", {"alpha": 0.0, "candidates": 1}),
        ("lightrag", {"mode": "local", "max_source_tokens": None, "min_similarity": -0.5,
                      "keywords_fn": lambda q: ([], [])}),
        ("hirag", {"mode": "local", "weighted_paths": True, "max_report_tokens": None}),
        ("agrag", {"compat": "agrag_code_2025", "passage_score_factor": 2, "fact_filter": None}),
    ],
)
def test_valid_options_still_work(gs, method, options):
    hits = gs.retrieve(Q, method=method, k=2, **options)
    assert [h.kind for h in hits[:2]] == ["chunk", "chunk"]


def test_unknown_option_still_lists_the_known_ones():
    with pytest.raises(ValueError, match=r"unknown option\(s\) \['alpah'\].*'alpha'"):
        METHODS["hybrid"]().options({"alpha": 0.5, "alpah": 0.5})


@pytest.mark.parametrize("name", sorted(METHODS))
def test_every_default_passes_its_own_check(name):
    cls = METHODS[name]
    for option, default in cls.defaults.items():
        assert cls.option_spec(option).accepts(default), (name, option, default)
    assert set(cls.option_specs) <= set(cls.defaults), "a spec for an option that does not exist"


def test_specs_are_inferred_from_defaults_and_refined_per_method():
    class Toy(Method):
        name = "toy"
        defaults = {"flag": False, "count": 3, "weight": 0.5, "mode": "a", "hook": None}
        option_specs = {"count": OptionSpec(ge=1, le=9), "mode": OptionSpec(choices=("a", "b"))}

    toy = Toy()
    assert toy.options({"flag": True, "count": 9, "weight": 7, "mode": "b", "hook": object()})
    for bad in ({"flag": 0}, {"count": 10}, {"count": 0}, {"weight": -1e-9},
                {"weight": math.inf}, {"mode": "c"}):
        with pytest.raises(ValueError, match=rf"option '{next(iter(bad))}' of method 'toy'"):
            toy.options(bad)
    assert Toy.option_spec("count").describe() == "an integer >= 1 and <= 9"
    assert Toy.option_spec("weight").describe() == "a finite number >= 0"
    assert Toy.option_spec("hook").describe() == "any value or None"
