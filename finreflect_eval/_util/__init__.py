"""Plumbing every room may use: errors and their one-line messages, hashing, progress bars,
secret redaction, Markdown tables, the package's files and caches, its version.

Imports nothing else of the package."""
