"""A run folder on disk: the store that writes and reads its files (atomically, under a lock),
its score index, upgrading runs written by older versions, and logging a run to the Hub.

May import `scoring`, `tasks`, `data`, `records`, `models` (names only), `protocol` and `_util`."""
