/* finreflect-eval view, the span browser's filters: its state (kept in the URL's fragment, so a
 * filtered screen can be linked), the filter form, and which spans and items pass it. The index's
 * masks (a byte a criterion: a bit per verdict and the review queue's flags) choose the spans
 * without loading them; an item's flags choose what a span shows open. After report-compare.js.
 */
(function (R) {
  "use strict";

  var S = R.S, CRITERIA = R.CRITERIA, TEXT = R.TEXT, option = R.option;
  var SPLIT = R.SPLIT, UNSCORED = R.UNSCORED, NO_MAJORITY = R.NO_MAJORITY;
  var M_UNSCORED = R.M_UNSCORED, M_SPLIT = R.M_SPLIT, M_NO_MAJORITY = R.M_NO_MAJORITY;
  var FLAGS = [
    ["", "all items"],
    ["queue", "in the review queue"],
    ["split", "split"],
    ["nomaj", "no majority"],
    ["unscored", "unscored"],
  ].concat(R.COMPARE_FLAGS);
  var ITEM_FLAG = { queue: SPLIT | UNSCORED | NO_MAJORITY, split: SPLIT, nomaj: NO_MAJORITY, unscored: UNSCORED };
  var MASK_FLAG = {
    queue: M_UNSCORED | M_SPLIT | M_NO_MAJORITY,
    split: M_SPLIT,
    nomaj: M_NO_MAJORITY,
    unscored: M_UNSCORED,
  };

  // --- state, kept in the URL's fragment: #spans?task=...&crit=... ---

  var state = {
    view: "scores",
    task: S.tasks.length ? S.tasks[0].name : "",
    ticker: "",
    section: "",
    crit: "",
    verdict: "",
    flag: "",
    page: 0,
  };
  var KEYS = ["task", "ticker", "section", "crit", "verdict", "flag"];

  function readHash() {
    var raw = location.hash.slice(1);
    var cut = raw.indexOf("?");
    var view = cut < 0 ? raw : raw.slice(0, cut);
    var query = new URLSearchParams(cut < 0 ? "" : raw.slice(cut + 1));
    var views = ["scores", "spans", "review", "settings"];
    if (document.getElementById("graph")) views.push("graph"); // a run with triples
    if (document.getElementById("cost")) views.push("cost"); // results with a cost block
    if (document.getElementById("downstream")) views.push("downstream"); // downstream files
    state.view = views.indexOf(view) >= 0 ? view : "scores";
    KEYS.forEach(function (key) {
      state[key] = query.get(key) || "";
    });
    if (!state.task || !taskInfo(state.task)) state.task = S.tasks.length ? S.tasks[0].name : "";
    if (state.view === "spans" && !query.has("flag")) state.flag = R.SPANS_FLAG;
    state.page = Math.max(0, (parseInt(query.get("page"), 10) || 1) - 1);
  }

  function writeHash() {
    var query = new URLSearchParams();
    KEYS.forEach(function (key) {
      if (state[key] !== "") query.set(key, state[key]);
    });
    if (R.SPANS_FLAG && state.view === "spans" && state.flag === "") query.set("flag", "");
    if (state.page) query.set("page", String(state.page + 1));
    var text = query.toString();
    var hash = "#" + state.view + (text ? "?" + text : "");
    if (location.hash !== hash) {
      try {
        history.replaceState(null, "", hash);
      } catch (error) {
        /* some hosts forbid it: the state just is not in the URL */
      }
    }
  }

  function taskInfo(name) {
    return S.tasks.find(function (t) {
      return t.name === name;
    });
  }

  // --- the filter form ---

  var form = document.getElementById("filters");

  function fillSelect(select, options, value) {
    select.replaceChildren.apply(
      select,
      options.map(function (pair) {
        return option(pair[0], pair[1]);
      })
    );
    var values = options.map(function (pair) {
      return pair[0];
    });
    select.value = values.indexOf(value) >= 0 ? value : "";
    return select.value;
  }

  function fillFilters(task, index) {
    fillSelect(
      form.elements.task,
      S.tasks.map(function (t) {
        return [t.name, t.name + " (" + t.spans + " spans)"];
      }),
      task.name
    );
    state.ticker = fillSelect(
      form.elements.ticker,
      [["", "all"]].concat(
        index.tickers.map(function (ticker, code) {
          var company = index.companies[code];
          return [ticker, company ? ticker + " — " + company : ticker];
        })
      ),
      state.ticker
    );
    state.section = fillSelect(
      form.elements.section,
      [["", "all"]].concat(
        index.sections.map(function (section) {
          return [section, section];
        })
      ),
      state.section
    );
    state.crit = fillSelect(
      form.elements.crit,
      [["", "all"]].concat(
        task.criteria.map(function (name) {
          return [name, name];
        })
      ),
      state.crit
    );
    var codes = [];
    (state.crit ? [state.crit] : task.criteria).forEach(function (name) {
      S.criteria[name].labels.forEach(function (code) {
        if (codes.indexOf(code) < 0) codes.push(code);
      });
    });
    state.verdict = fillSelect(
      form.elements.verdict,
      [["", "any"]]
        .concat(
          codes.map(function (code) {
            return [String(code), TEXT[code]];
          })
        )
        .concat([["u", "unscored"]]),
      state.verdict
    );
    var flags = FLAGS.filter(function (pair) {
      return !R.review || pair[0] !== "queue";
    });
    if (R.review) flags = [["", "every queued item"]].concat(flags.slice(1));
    state.flag = fillSelect(form.elements.flag, flags, state.flag);
  }

  function criterionBytes(mask, crits) {
    return crits.map(function (c) {
      return (mask >>> (8 * c)) & 255;
    });
  }

  /* The index rows of the task's spans that pass the filters, in display order. */
  function matching(task, index) {
    var tick = state.ticker ? index.tickers.indexOf(state.ticker) : null;
    var sec = state.section ? index.sections.indexOf(state.section) : null;
    var crits = (state.crit ? [state.crit] : task.criteria).map(function (name) {
      return CRITERIA.indexOf(name);
    });
    var verdictBit = state.verdict === "" ? 0 : state.verdict === "u" ? M_UNSCORED : 1 << Number(state.verdict);
    var flagBits = MASK_FLAG[state.flag] || 0;
    var diffBits = R.diffBits(state.flag);
    var queueBits = R.review ? MASK_FLAG.queue : 0;
    var out = [];
    var priority = [];
    for (var i = 0; i < index.ids.length; i++) {
      if (tick !== null && index.tick[i] !== tick) continue;
      if (sec !== null && index.sec[i] !== sec) continue;
      if (diffBits && !(index.diff[i] & diffBits)) continue;
      var ok = false;
      var rank = 2;
      var masks = index.mask[i];
      for (var r = 0; r < masks.length; r++) {
        var bytes = criterionBytes(masks[r], crits);
        for (var b = 0; b < bytes.length; b++) {
          var byte = bytes[b];
          if (verdictBit && !(byte & verdictBit)) continue;
          if (flagBits && !(byte & flagBits)) continue;
          if (queueBits && !(byte & queueBits)) continue;
          ok = true;
          if (byte & M_NO_MAJORITY) rank = 0;
          else if (byte & M_SPLIT && rank > 1) rank = 1;
        }
      }
      if (ok) {
        out.push(i);
        priority.push(rank);
      }
    }
    if (R.review) {
      var order = out.map(function (row, at) {
        return [priority[at], row];
      });
      order.sort(function (x, y) {
        return x[0] - y[0] || x[1] - y[1];
      });
      out = order.map(function (pair) {
        return pair[1];
      });
    }
    return out;
  }

  // --- which items of a span pass ---

  /* Whether an item passes the filters (differs: its verdict is another in the other run). */
  function itemMatches(crit, item, differs) {
    if (state.crit && state.crit !== crit) return false;
    if (state.verdict !== "") {
      var wanted = state.verdict === "u" ? -1 : Number(state.verdict);
      if (item[0] !== wanted) return false;
    }
    var bits = ITEM_FLAG[state.flag] || 0;
    if (bits && !(item[1] & bits)) return false;
    if (R.review && !(item[1] & ITEM_FLAG.queue)) return false;
    if (state.flag === "differ" && !differs) return false;
    return true;
  }

  /* Whether the filters choose items: those that pass are marked and shown open. */
  function filtering() {
    return R.review || state.verdict !== "" || (state.flag !== "" && state.flag !== "tdiffer");
  }

  R.state = state;
  R.readHash = readHash;
  R.writeHash = writeHash;
  R.taskInfo = taskInfo;
  R.fillFilters = fillFilters;
  R.matching = matching;
  R.itemMatches = itemMatches;
  R.filtering = filtering;
})(window.FRV);
