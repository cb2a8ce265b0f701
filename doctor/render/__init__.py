"""Renderers: they only read a Report; no rule is decided here."""
