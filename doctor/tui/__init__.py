"""The Textual TUI: a thin view over the engine (facts → diagnose → report).

Only ``app``, ``screens`` and ``widgets`` import Textual. ``model``, ``fixes``, ``active`` and
``live`` are plain Python: what the screens show is computed there and tested without a terminal.
Nothing here judges facts: every verdict comes from :func:`doctor.pipeline.diagnose`.
"""
