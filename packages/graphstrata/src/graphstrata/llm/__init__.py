"""The LLM path: one protocol, a response cache, token accounting, forgiving parsers, and our
prompts (DESIGN.md, "Where the core goes next").

* :class:`LLM` / :class:`CallableLLM` / :func:`as_llm` — the protocol and the plain-callable
  adapter (framework adapters live in the framework packages);
* :class:`LLMClient` — cache, retries (tenacity), bounded concurrency, :class:`Ledger`;
* :class:`ResponseCache` — content-hash cache, ``DIR/llm-cache.sqlite`` in an index;
* :mod:`graphstrata.llm.parsing` — forgiving JSON / record parsing;
* :mod:`graphstrata.llm.extraction_parsing`, :mod:`graphstrata.llm.report_parsing` — the
  extraction answers (entity / relationship records, triples) and the index-time summaries
  (community reports, summary entities), read forgivingly;
* :mod:`graphstrata.llm.prompts` — one module per paper's prompt family.

The stages that send these prompts (LLM extraction, community reports, HiRAG summary
entities) are indexing stages: :mod:`graphstrata.indexing`.
"""

from .base import (
    LLM,
    CallableLLM,
    LLMRequest,
    LLMResponse,
    Usage,
    as_llm,
    context_window,
    count_prompt_tokens,
    estimate_tokens,
    generation_settings,
    has_async_api,
    run_blocking,
    settings_from_attributes,
)
from .cache import CACHE_FILE, ResponseCache
from .client import (
    DEFAULT_CONCURRENCY,
    DryRunLLM,
    Ledger,
    LLMClient,
    LLMError,
    PromptTooLongError,
    StageUsage,
    TransientLLMError,
    is_transient,
    run_in_worker_thread,
    stream_in_thread,
    usage_scope,
)
from .guards import LLMOutputError

__all__ = [
    "CACHE_FILE",
    "DEFAULT_CONCURRENCY",
    "LLM",
    "CallableLLM",
    "DryRunLLM",
    "LLMClient",
    "LLMError",
    "LLMOutputError",
    "LLMRequest",
    "LLMResponse",
    "PromptTooLongError",
    "Ledger",
    "ResponseCache",
    "StageUsage",
    "TransientLLMError",
    "Usage",
    "as_llm",
    "context_window",
    "count_prompt_tokens",
    "estimate_tokens",
    "generation_settings",
    "has_async_api",
    "is_transient",
    "run_blocking",
    "run_in_worker_thread",
    "settings_from_attributes",
    "stream_in_thread",
    "usage_scope",
]
