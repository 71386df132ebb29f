"""Plumbing every room may use: errors and their one-line messages, hashing, progress bars,
secret redaction, Markdown tables, the package's files and caches, its version, and what a
command may replace in a folder the user names (`output_folder`).

Imports nothing else of the package."""
