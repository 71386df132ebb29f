"""The graph a run's triples make, and what can be checked of it without a judge: entities
normalised as a reader can predict (`normalise`), a networkx graph per filing and per run and
its quality (`metrics`), numbers, amounts and dates grounded in the span's text (`grounding`),
and the graph's exports (`export`).

Everything here reads a `TripleTable` (`table`): one Arrow row per triple, with its span, filing
and mode, built by the rooms above from a run's records or its score index.

May import `protocol` and `_util`."""
