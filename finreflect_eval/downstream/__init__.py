"""The downstream multi-hop QA track: does a better graph answer questions better?

A task with a `downstream` section extracts triples from the chunks of multi-hop questions
(FinReflectKG-MultiHop: each question with its gold answer and KG path); `graph` measures each
question against the graph the triples make (evidence-edge recall, path connectivity) and
retrieves its subgraph, `qa` has a fixed QA model answer from it (and from the gold path and
the raw chunks) and scores the answers. The stage that runs them is `pipeline.downstream`; the
results' block is `scoring.downstream`'s; the correlation with the main scores is the
leaderboard's `validity`.

May import `tasks`, `data`, `records`, `graph`, `models`, `chunking`, `stats`, `protocol` and
`_util`.
"""
