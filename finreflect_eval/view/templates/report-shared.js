/* finreflect-eval view: the span browser and review queue of a static report, in plain scripts
 * that the page loads in this order (report.py, SCRIPTS):
 *
 *   report-shared.js   the summary, the codes the data use, loading data scripts, DOM helpers
 *   report-compare.js  two runs side by side: what differs between run A and run B
 *   report-filters.js  the state in the URL, the filter form, and which spans pass it
 *   report-spans.js    a span: its text, each run's triples and verdicts, every judge's vote
 *   report-graph.js    the Graph tab: a filing's graph, drawn from its data script
 *   report-downstream.js  the Downstream tab: a task's questions, a page at a time
 *   report-main.js     the tabs, the span browser's screen (status, list, pager), the wiring
 *
 * Not ES modules: a page opened from disk (file://) may not load module scripts. The parts share
 * one global, FRV (each part adds its names to it), which the data scripts call too.
 *
 * Data comes as scripts beside the page (data/<task>/index.js, data/<task>/<n>.js, and a
 * filing's graph, data/<task>/graph-<run>-<n>.js, and a page of questions,
 * data/<task>/questions-<run>-<n>.js) that call FRV.index(...), FRV.page(...), FRV.graph(...)
 * and FRV.questions(...): a page opened from disk may load scripts but not fetch() files. Only one
 * task's index and the pages of the spans on screen are loaded; one screen of
 * spans is in the DOM at a time. Every text from the run is set with textContent (never as
 * HTML), so a span holding "<script>" shows it as text.
 */
(function () {
  "use strict";

  var S = JSON.parse(document.getElementById("summary").textContent);
  var TEXT = { "-1": "unscored", 0: "no", 1: "yes", 2: "poor", 3: "partial", 4: "good" };
  var KEEP_PAGES = 12; // pages of spans kept in memory

  // --- loading data scripts ---

  var loaded = new Map();
  var pending = new Map();
  var pageUse = []; // page keys, least recently used first

  var R = (window.FRV = {
    index: function (task, data) {
      loaded.set("i:" + task, data);
    },
    page: function (task, number, spans) {
      loaded.set("p:" + task + ":" + number, spans);
    },
    graph: function (task, run, number, drawing) {
      loaded.set("g:" + task + ":" + run + ":" + number, drawing);
    },
    questions: function (task, run, number, questions) {
      loaded.set("q:" + task + ":" + run + ":" + number, questions);
    },
  });

  function load(key, src) {
    if (loaded.has(key)) return Promise.resolve(loaded.get(key));
    if (pending.has(key)) return pending.get(key);
    var promise = new Promise(function (resolve, reject) {
      var script = document.createElement("script");
      script.src = src;
      script.onload = function () {
        pending.delete(key);
        script.remove();
        if (loaded.has(key)) resolve(loaded.get(key));
        else reject(new Error(src + " does not hold the data it should"));
      };
      script.onerror = function () {
        pending.delete(key);
        script.remove();
        reject(new Error("cannot load " + src + " (is the report's data/ folder beside it?)"));
      };
      document.head.appendChild(script);
    });
    pending.set(key, promise);
    return promise;
  }

  function folder(task) {
    return "data/" + encodeURIComponent(task) + "/";
  }

  function loadIndex(task) {
    return load("i:" + task, folder(task) + "index.js");
  }

  function loadPage(task, number) {
    var key = "p:" + task + ":" + number;
    pageUse = pageUse.filter(function (k) {
      return k !== key;
    });
    pageUse.push(key);
    return load(key, folder(task) + number + ".js");
  }

  function loadGraph(task, run, number) {
    var key = "g:" + task + ":" + run + ":" + number;
    return load(key, folder(task) + "graph-" + run + "-" + number + ".js");
  }

  function loadQuestions(task, run, number) {
    var key = "q:" + task + ":" + run + ":" + number;
    return load(key, folder(task) + "questions-" + run + "-" + number + ".js");
  }

  function forgetPages(keep) {
    while (pageUse.length > Math.max(KEEP_PAGES, keep.size)) {
      var old = pageUse.find(function (k) {
        return !keep.has(k);
      });
      if (old === undefined) break;
      pageUse = pageUse.filter(function (k) {
        return k !== old;
      });
      loaded.delete(old);
    }
  }

  // --- DOM helpers (text only) ---

  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  function option(value, text) {
    var node = el("option", null, text);
    node.value = value;
    return node;
  }

  function badge(code, extra) {
    return el("span", "badge l" + code + (extra ? " " + extra : ""), TEXT[code]);
  }

  R.S = S; // the page's summary: runs, tasks, criteria, rules, spans a screen
  R.CRITERIA = Object.keys(S.criteria); // as the index's masks number them
  R.SPLIT = 1; // an item's flags (view/spans.py)
  R.UNSCORED = 2;
  R.NO_MAJORITY = 4;
  R.M_UNSCORED = 32; // a span's mask, per criterion byte
  R.M_SPLIT = 64;
  R.M_NO_MAJORITY = 128;
  R.TEXT = TEXT;
  R.review = false; // whether the span browser shows the review queue (set by render)
  R.loadIndex = loadIndex;
  R.loadPage = loadPage;
  R.loadGraph = loadGraph; // a filing's drawing (data/<task>/graph-<run>-<n>.js)
  R.loadQuestions = loadQuestions; // a page of questions (data/<task>/questions-<run>-<n>.js)
  R.forgetPages = forgetPages;
  R.el = el;
  R.option = option;
  R.badge = badge;
})();
