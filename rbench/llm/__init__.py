"""The LLM layer: configured backends (OpenAI-compatible servers, vLLM, transformers), a
content-addressed call cache in the store, prompt files, permissive output parsers and
per-run accounting. Nothing here imports Prefect, so it also runs in a vLLM environment."""
