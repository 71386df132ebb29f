"""Structure-aware chunking of 10-K filings into spans (DESIGN.md §3.4).

`read_filing` turns an EDGAR HTML, markdown or plain-text filing into a flat list of `Block`s;
`chunk_filing` groups the blocks into Item sections and packs them into `Chunk`s of at most
`max_tokens` tokens. Both are pure functions of their input (no randomness, no clock), so
rebuilding the data set from the same files gives byte-identical spans.

Chunking rules:
- A chunk never crosses a section boundary. Text before the first Item is "Front matter".
- A section's first chunk starts with its heading lines: the "Part ..." heading directly before
  it (if any), then the Item heading with its title on one line ("Item 1. Business").
- Every table is a chunk of its own (content_type "table"), kept whole even when it is longer
  than `max_tokens`: half a financial table is worse for extraction than a long span.
- Text paragraphs are packed greedily, in order, up to `max_tokens` and joined with a blank
  line. A paragraph is split only when it alone exceeds `max_tokens`: at sentence ends, and a
  sentence that is still too long at spaces.

May import `_util` only.
"""

from finreflect_eval.chunking.blocks import FRONT_MATTER, Block, Chunk
from finreflect_eval.chunking.metadata import infer_filing_metadata
from finreflect_eval.chunking.packing import chunk_filing
from finreflect_eval.chunking.readers import read_filing, read_text
from finreflect_eval.chunking.tokens import TokenCounter, token_counter

__all__ = [
    "FRONT_MATTER",
    "Block",
    "Chunk",
    "TokenCounter",
    "chunk_filing",
    "infer_filing_metadata",
    "read_filing",
    "read_text",
    "token_counter",
]
