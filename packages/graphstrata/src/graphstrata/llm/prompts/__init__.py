"""Our prompts, one module per paper's prompt family, each in its spec's output format.

The specs (``seed-*.md``) quote the papers' prompts for reference; these are written for
graphstrata, keep the same output formats, and say in words what small local models most often
get wrong (one record per line, no chatter).
"""
