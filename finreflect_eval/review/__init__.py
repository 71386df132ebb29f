"""What the judges leave to people: the review queue of flagged triples and spans, as JSONL and CSV
beside the results.

May import `runs`, `scoring`, `records`, `stats`, `protocol` and `_util`."""
