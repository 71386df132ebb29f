"""The stages of a run and their orchestration: the run's configuration, the spans it reads,
extraction, its manifest, judging (and its grounding cascade), the downstream QA stage, scoring
a run folder, sharding, the machine's environment, the Markdown summary, and the judge audit.

May import every room below it: `review`, `runs`, `scoring`, `downstream`, `tasks`, `data`,
`models`, `graph`, `records`, `stats`, `protocol`, `_util`."""
