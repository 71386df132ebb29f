"""What defines the benchmark: the knowledge-graph schema (entity and relation types, the rule
checks), the extraction modes, and the judging criteria with their labels and aggregations.

May import `_util` only."""
