/* finreflect-eval view, two runs side by side: what differs between run A and run B on the same
 * spans. The index marks each span whose verdicts or triples differ (its diff bits), a span marks
 * its items whose verdict differs (span.d); the span browser of two runs opens on the spans whose
 * verdicts differ. On a one-run report nothing here draws anything. After report-shared.js.
 */
(function (R) {
  "use strict";

  var S = R.S;
  var VERDICTS_DIFFER = 1, TRIPLES_DIFFER = 2; // a span's bits in the index's diff (view/spans.py)

  /* The choices of the "items" filter that two runs add. */
  R.COMPARE_FLAGS = S.compare
    ? [
        ["differ", "verdicts differ (A vs B)"],
        ["tdiffer", "triples differ (A vs B)"],
      ]
    : [];

  /* The "items" filter the span browser opens with (and keeps when no flag is in the URL). */
  R.SPANS_FLAG = S.compare ? "differ" : "";

  /* The diff bits a span must have to pass the "items" filter `flag` (0: any span). */
  R.diffBits = function (flag) {
    if (!S.compare) return 0;
    return flag === "differ" ? VERDICTS_DIFFER : flag === "tdiffer" ? TRIPLES_DIFFER : 0;
  };

  /* Whether run r's item k of criterion `crit` has another verdict in the other run. */
  R.differsAt = function (span, crit, r, k) {
    var d = span.d && span.d[crit];
    return !!(d && d[r].indexOf(k) >= 0);
  };

  /* A span card's header flags: what differs between the runs on this span. */
  R.markDifferences = function (head, index, row) {
    if (!S.compare) return;
    var diff = index.diff[row];
    if (diff & VERDICTS_DIFFER) head.append(R.el("span", "flag differs", "verdicts differ"));
    if (diff & TRIPLES_DIFFER) head.append(R.el("span", "flag tdiffers", "triples differ"));
  };
})(window.FRV);
