"""The model: what every layer above the probes speaks.

``facts`` (and ``facts_active``): what the probes learned, nothing judged. ``findings``: what a check concluded,
with its evidence. ``intents``: what a check says should change, as data. ``report``: the findings and the check
results over one set of facts. ``severity``: the one severity scale, with its rank and its mark.

Nothing here imports a probe, a check, the matrix, the planner or a renderer; importing this package imports
none of its modules.
"""
