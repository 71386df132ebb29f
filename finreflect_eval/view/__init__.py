"""`finreflect-eval view`: a scored run as a static report to look at, or two runs side by side.

The report is a folder (`index.html`, its scripts `report-*.js`, `report.css`, `data/`, and a
README.md that makes it a Hugging Face static Space): the run's settings, its scores per task and
criterion with their intervals, the judges' agreement, the check against people where the run
has their labels, a browser of every span with its triples and every judge's vote (and
people's labels; filterable; the review queue is one view of it), and the graph the triples make
(the results' graph block, and a drawing of one filing's graph at a time), what the run cost
(the results' cost block), and the downstream track where the run has it (the results'
downstream measures, and each multi-hop question with its answers, its gold path and the
model's subgraph). It needs no server and no network; large runs are paged (see
`report`). Modules by job: `source` (reading a run), `spans` (a span as the pages hold it),
`people` (people's labels: the results' check against them, and each item's), `graph` (the
Graph tab: the block and each filing's drawing), `cost` (the Cost tab), `downstream` (the
Downstream tab: its measures and questions), `report` (the folder and the page, with
`templates/`).

May import `runs`, `scoring`, `downstream`, `records`, `graph`, `chunking`, `stats`, `protocol` and
`_util`.
"""

from finreflect_eval.view.report import push_report, write_report
from finreflect_eval.view.source import ViewRun, open_run

__all__ = ["ViewRun", "open_run", "push_report", "write_report"]
