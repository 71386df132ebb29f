"""What the judges leave to people, and what people say back: the review queue (JSONL and CSV
beside the results), the random audit, Label Studio's tasks and labeling config (and its API),
people's labels read back from its export into the run folder, and how many items to label.

May import `runs`, `scoring`, `records`, `stats`, `protocol` and `_util`."""
