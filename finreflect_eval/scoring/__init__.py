"""From judged samples to results: the typed tables a run's samples make (per-span facts, each
panel's votes) and the steps that turn them into the blocks of a results file.

`compute.compute_results` lists the steps; each block's step lives with its kind: `judged` (the
panel's scores, bootstrapped together, and the blocks made of them alone), `task_blocks` (one
entry per task), `groups` (the groups' rows), `run_info` (the settings, model and panel),
`graph` (the graph the triples make), `human` (the panel against people's labels, checked by
`label_checks`). `failures` holds the policy on failed calls.

May import `records`, `graph`, `stats`, `protocol` and `_util`."""
