"""The model: what every layer above the probes speaks.

``facts`` (and ``facts_active``): what the probes learned, nothing judged. ``findings``: what a check concluded,
with its evidence. ``remedy``: the one remedy vocabulary, each kind one class, from what a check says should
change (an intent; ``intents`` is the part a check may attach) to what the plan does (an action). ``plan``: the
ordered steps of actions every renderer reads. ``report``: the findings and the check results over one set of facts.
``severity``: the one severity scale, with its rank and its mark. ``records``: the ``dataclass`` decorator the
frozen classes here and beside them use, the standard one made faster to define (every command's start-up).

Nothing here imports a probe, a check, the matrix, the planner or a renderer; importing this package imports
none of its modules.
"""
