"""Scripted responders for data-parallel tests, run inside Ray actors (named in model args as
`support.replica_responders:<function>`). What a request does is written in its prompt, a JSON
object, so a test can make a replica die or hang on a chosen request while the others answer."""

import json
import os
import time
from pathlib import Path

SECONDS_PER_CALL = 0.2


def slow(request):
    """Answers after 0.2 s, as a model would (the speed-up test)."""
    time.sleep(SECONDS_PER_CALL)
    return json.dumps({"length": len(request.plain_prompt())})


def faulty(request):
    """Answers `{"id": ...}` and logs the id to the prompt's `log` file (so a test counts what
    was generated, in any process), except where the prompt says:
    - `invalid_first`: the first attempt is not JSON (a retry samples: temperature > 0);
    - `die_once` (a flag file): the first replica to see it while the flag is there deletes it
      and dies; `die_once_on_retry`: the same, on a retry;
    - `die` (a file): every replica that sees it while the file is there dies;
    - `hang_once` (a flag file): as `die_once`, but the replica hangs for an hour; `hang`:
      every replica that sees it hangs."""
    prompt = json.loads(request.plain_prompt())
    retry = request.temperature > 0
    if _flag(prompt.get("die_once")) or (retry and _flag(prompt.get("die_once_on_retry"))):
        os._exit(1)
    if prompt.get("die") and Path(prompt["die"]).exists():
        os._exit(1)
    if prompt.get("hang") or _flag(prompt.get("hang_once")):
        time.sleep(3600)
    with Path(prompt["log"]).open("a") as log:
        log.write(f"{prompt['id']}\n")
    if prompt.get("invalid_first") and not retry:
        return "not JSON"
    return json.dumps({"id": prompt["id"]})


def _flag(path):
    """True once: when the flag file is there (it is taken away)."""
    if not path or not Path(path).exists():
        return False
    Path(path).unlink()
    return True


EXTRACTION_SECONDS = 3.0


def extraction_3s(request):
    """An extraction call of 3 s, as a small model's would be: the span's reference triples from
    the bundled sample (`scripted_judges.reference_triples`), answered 3 s after the call began
    (the replica benchmark, `benchmarks/replicas.py`)."""
    from support.scripted_judges import reference_triples

    started = time.monotonic()
    answer = reference_triples(request)
    time.sleep(max(0.0, EXTRACTION_SECONDS - (time.monotonic() - started)))
    return answer
