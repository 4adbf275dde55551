"""Translations of vLLM's own unit tests, run against the lab's components (see ``adapters.py``)."""
