"""Tasks as data: the YAML task configs (lm-eval's fields: dataset, metric list, generation
kwargs, groups and tags) and the index that finds them.

May import `records`, `models` (the request a task's settings make), `protocol` and `_util`."""
