/* finreflect-eval view: the span browser and review queue of a static report.
 *
 * Data comes as scripts beside the page (data/<task>/index.js, data/<task>/<n>.js) that call
 * FRV.index(...) and FRV.page(...): a page opened from disk may load scripts but not fetch()
 * files. Only one task's index and the pages of the spans on screen are loaded; one screen of
 * spans is in the DOM at a time. Every text from the run is set with textContent (never as
 * HTML), so a span holding "<script>" shows it as text.
 */
(function () {
  "use strict";

  var S = JSON.parse(document.getElementById("summary").textContent);
  var CRITERIA = Object.keys(S.criteria); // as the index's masks number them
  var SPLIT = 1, UNSCORED = 2, NO_MAJORITY = 4; // an item's flags
  var M_UNSCORED = 32, M_SPLIT = 64, M_NO_MAJORITY = 128; // a span's mask, per criterion byte
  var VERDICTS_DIFFER = 1, TRIPLES_DIFFER = 2;
  var KEEP_PAGES = 12; // pages of spans kept in memory
  var TEXT = { "-1": "unscored", 0: "no", 1: "yes", 2: "poor", 3: "partial", 4: "good" };
  var FLAGS = [
    ["", "all items"],
    ["queue", "in the review queue"],
    ["split", "split"],
    ["nomaj", "no majority"],
    ["unscored", "unscored"],
  ];
  if (S.compare) {
    FLAGS.push(["differ", "verdicts differ (A vs B)"], ["tdiffer", "triples differ (A vs B)"]);
  }
  var ITEM_FLAG = { queue: SPLIT | UNSCORED | NO_MAJORITY, split: SPLIT, nomaj: NO_MAJORITY, unscored: UNSCORED };
  var MASK_FLAG = {
    queue: M_UNSCORED | M_SPLIT | M_NO_MAJORITY,
    split: M_SPLIT,
    nomaj: M_NO_MAJORITY,
    unscored: M_UNSCORED,
  };

  // --- loading data scripts ---

  var loaded = new Map();
  var pending = new Map();
  var pageUse = []; // page keys, least recently used first

  window.FRV = {
    index: function (task, data) {
      loaded.set("i:" + task, data);
    },
    page: function (task, number, spans) {
      loaded.set("p:" + task + ":" + number, spans);
    },
  };

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
    state.view = ["scores", "spans", "review", "settings"].indexOf(view) >= 0 ? view : "scores";
    KEYS.forEach(function (key) {
      state[key] = query.get(key) || "";
    });
    if (!state.task || !taskInfo(state.task)) state.task = S.tasks.length ? S.tasks[0].name : "";
    if (S.compare && state.view === "spans" && !query.has("flag")) state.flag = "differ";
    state.page = Math.max(0, (parseInt(query.get("page"), 10) || 1) - 1);
  }

  function writeHash() {
    var query = new URLSearchParams();
    KEYS.forEach(function (key) {
      if (state[key] !== "") query.set(key, state[key]);
    });
    if (S.compare && state.view === "spans" && state.flag === "") query.set("flag", "");
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

  // --- views ---

  function show() {
    document.querySelectorAll(".view").forEach(function (view) {
      view.classList.toggle("active", view.dataset.view.split(" ").indexOf(state.view) >= 0);
    });
    document.querySelectorAll(".tabs a").forEach(function (tab) {
      if (tab.dataset.view === state.view) tab.setAttribute("aria-current", "page");
      else tab.removeAttribute("aria-current");
    });
    if (state.view === "spans" || state.view === "review") render();
  }

  var form = document.getElementById("filters");
  var statusLine = document.getElementById("status");
  var list = document.getElementById("list");
  var pager = document.querySelector(".pager");
  var shownTask = null;
  var ticket = 0;
  var review = false;

  function setStatus(text, error) {
    statusLine.textContent = text;
    statusLine.classList.toggle("error", !!error);
  }

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
      return !review || pair[0] !== "queue";
    });
    if (review) flags = [["", "every queued item"]].concat(flags.slice(1));
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
    var diffBits = !S.compare ? 0 : state.flag === "differ" ? VERDICTS_DIFFER : state.flag === "tdiffer" ? TRIPLES_DIFFER : 0;
    var queueBits = review ? MASK_FLAG.queue : 0;
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
    if (review) {
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

  function render() {
    var mine = ++ticket;
    review = state.view === "review";
    document.getElementById("browser-title").textContent = review ? "Review queue" : "Spans";
    document.getElementById("browser-help").textContent = review
      ? "Items the judges split on, had no majority for, or left unscored (fewer than two valid votes): " +
        "spans with an item without a majority first, then those with a split one. Each item shows every judge's vote."
      : "Each span's text with its extracted triples (subjects and objects marked in the text), the panel's verdict " +
        "on each triple per criterion (open one for every judge's vote, reasoning and warning), CheckRules failures, " +
        "and the reference triples.";
    var task = taskInfo(state.task);
    if (!task) {
      setStatus("This run has no tasks to show.");
      return;
    }
    setStatus("Loading the spans of " + task.name + "…");
    loadIndex(task.name)
      .then(function (index) {
        if (mine !== ticket) return null;
        fillFilters(task, index);
        shownTask = task.name;
        var rows = matching(task, index);
        var screens = Math.max(1, Math.ceil(rows.length / S.screen));
        state.page = Math.min(state.page, screens - 1);
        var shown = rows.slice(state.page * S.screen, (state.page + 1) * S.screen);
        var numbers = [];
        shown.forEach(function (row) {
          if (numbers.indexOf(index.page[row]) < 0) numbers.push(index.page[row]);
        });
        writeHash();
        return Promise.all(
          numbers.map(function (n) {
            return loadPage(task.name, n);
          })
        ).then(function (pages) {
          if (mine !== ticket) return;
          var byRow = new Map();
          pages.forEach(function (spans) {
            spans.forEach(function (span) {
              byRow.set(span.i, span);
            });
          });
          list.replaceChildren.apply(
            list,
            shown.map(function (row) {
              return spanCard(task, index, row, byRow.get(row));
            })
          );
          var among = " (" + index.ids.length.toLocaleString("en") + " in " + task.name + ")";
          setStatus(
            rows.length
              ? (review ? "Queued spans " : "Spans ") +
                  (state.page * S.screen + 1) + "–" + (state.page * S.screen + shown.length) +
                  " of " + rows.length.toLocaleString("en") + " matching" + among
              : "No span matches these filters" + among
          );
          pager.querySelector(".where").textContent = "page " + (state.page + 1) + " of " + screens;
          pager.dataset.screens = String(screens);
          pager.querySelectorAll("button").forEach(function (button) {
            var go = button.dataset.go;
            button.disabled = go === "first" || go === "prev" ? state.page === 0 : state.page >= screens - 1;
          });
          forgetPages(
            new Set(
              numbers.map(function (n) {
                return "p:" + task.name + ":" + n;
              })
            )
          );
          document.body.dataset.rendered = String(shown.length);
          document.body.dataset.ready = "1";
        });
      })
      .catch(function (error) {
        if (mine === ticket) setStatus(error.message, true);
      });
  }

  // --- a span ---

  function itemMatches(crit, item, differs) {
    if (state.crit && state.crit !== crit) return false;
    if (state.verdict !== "") {
      var wanted = state.verdict === "u" ? -1 : Number(state.verdict);
      if (item[0] !== wanted) return false;
    }
    var bits = ITEM_FLAG[state.flag] || 0;
    if (bits && !(item[1] & bits)) return false;
    if (review && !(item[1] & ITEM_FLAG.queue)) return false;
    if (state.flag === "differ" && !differs) return false;
    return true;
  }

  function filtering() {
    return review || state.verdict !== "" || (state.flag !== "" && state.flag !== "tdiffer");
  }

  function spanCard(task, index, row, span) {
    var card = el("article", "span");
    if (!span) {
      card.append(el("p", "error", "span " + index.ids[row] + " is missing from its page"));
      return card;
    }
    card.dataset.span = span.id;
    var head = el("header");
    head.append(el("h3", null, span.id));
    var meta = [span.ticker, span.company, span.year ? "FY" + span.year : null, span.section, "doc " + span.doc];
    head.append(
      el(
        "p",
        "meta",
        meta
          .filter(function (part) {
            return part !== null && part !== "";
          })
          .join(" · ")
      )
    );
    if (S.compare) {
      var diff = index.diff[row];
      if (diff & VERDICTS_DIFFER) head.append(el("span", "flag differs", "verdicts differ"));
      if (diff & TRIPLES_DIFFER) head.append(el("span", "flag tdiffers", "triples differ"));
    }
    card.append(head);
    card.append(spanText(span));
    var columns = el("div", "columns" + (span.runs.length > 1 ? " two" : ""));
    span.runs.forEach(function (part, r) {
      columns.append(partBlock(task, span, part, r));
    });
    columns.append(referenceBlock(span));
    card.append(columns);
    return card;
  }

  function spanText(span) {
    var terms = new Map();
    span.runs.forEach(function (part) {
      part.t.forEach(function (triple) {
        [
          [triple[0], "subj"],
          [triple[3], "obj"],
        ].forEach(function (pair) {
          var term = String(pair[0] || "").trim();
          var key = term.toLowerCase();
          if (term.length >= 2 && (!terms.has(key) || pair[1] === "subj")) terms.set(key, [term, pair[1]]);
        });
      });
    });
    var text = span.text;
    var ranges = [];
    terms.forEach(function (value) {
      var pattern = new RegExp(value[0].replace(/[.*+?^${}()|[\]\\]/g, "\\$&"), "giu");
      var match;
      var count = 0;
      while ((match = pattern.exec(text)) !== null && count < 500) {
        ranges.push([match.index, match.index + match[0].length, value[1]]);
        count += 1;
      }
    });
    ranges.sort(function (x, y) {
      return x[0] - y[0] || y[1] - y[0] - (x[1] - x[0]);
    });
    var box = el("div", "text");
    var at = 0;
    ranges.forEach(function (range) {
      if (range[0] < at) return;
      if (range[0] > at) box.append(document.createTextNode(text.slice(at, range[0])));
      var mark = el("mark", range[2], text.slice(range[0], range[1]));
      mark.title = range[2] === "subj" ? "a triple's subject" : "a triple's object";
      box.append(mark);
      at = range[1];
    });
    if (at < text.length) box.append(document.createTextNode(text.slice(at)));
    return box;
  }

  function tripleLine(triple) {
    var line = el("span", "triple-text");
    line.append(el("span", "ent subj", triple[0]), el("span", "type", triple[1]));
    line.append(el("span", "rel", triple[2]));
    line.append(el("span", "ent obj", triple[3]), el("span", "type", triple[4]));
    return line;
  }

  function differsAt(span, crit, r, k) {
    var d = span.d && span.d[crit];
    return !!(d && d[r].indexOf(k) >= 0);
  }

  function partBlock(task, span, part, r) {
    var box = el("section", "part run-" + "ab"[r]);
    var title = S.compare ? "AB"[r] + ": " + S.runs[r].model + " · " + S.runs[r].panel : "Extracted triples";
    box.append(el("h4", null, title));
    var judges = S.runs[r].judges;
    if (part.failed) box.append(el("p", "warning", "Extraction failed: " + part.failed.join("; ")));
    var any = false;
    task.criteria.forEach(function (crit) {
      if (S.criteria[crit].per !== "span" || !part.v[crit] || !part.v[crit].length) return;
      var item = part.v[crit][0];
      var differs = differsAt(span, crit, r, 0);
      if (review && !itemMatches(crit, item, differs)) return;
      var holder = el("div", "span-item");
      holder.append(el("span", "what", crit + " of the span"));
      holder.append(verdictButton(holder, crit, item, part, judges, differs, filtering() && itemMatches(crit, item, differs)));
      box.append(holder);
      any = true;
    });
    var ol = el("ol", "triples");
    var hidden = 0;
    part.t.forEach(function (triple, k) {
      var li = el("li", "triple");
      li.value = k + 1;
      var line = el("div", "line");
      line.append(tripleLine(triple));
      var failed = part.r[k] || [];
      if (failed.length) {
        var rules = el("span", "flag rules", "CheckRules: " + failed.join(", "));
        rules.title = failed
          .map(function (rule) {
            return S.rules[rule] || rule;
          })
          .join("; ");
        line.append(rules);
      }
      li.append(line);
      var verdicts = el("div", "verdicts");
      var matched = false;
      task.criteria.forEach(function (crit) {
        if (S.criteria[crit].per !== "triple" || !part.v[crit]) return;
        var item = part.v[crit][k];
        if (!item) return;
        var differs = differsAt(span, crit, r, k);
        var hit = filtering() && itemMatches(crit, item, differs);
        if (review && !hit) return;
        matched = matched || hit;
        verdicts.append(verdictButton(li, crit, item, part, judges, differs, hit));
      });
      if (review && !matched) {
        hidden += 1;
        return;
      }
      if (matched) li.classList.add("match");
      line.append(verdicts);
      ol.append(li);
      any = true;
    });
    if (ol.childElementCount) box.append(ol);
    box.querySelectorAll("button[data-open]").forEach(function (button) {
      button.click();
    });
    if (hidden) box.append(el("p", "muted", hidden + " triple(s) with nothing queued not shown"));
    if (!any && !part.t.length) box.append(el("p", "muted", "No triples."));
    return box;
  }

  function verdictButton(holder, crit, item, part, judges, differs, open) {
    var button = el("button", "verdict l" + item[0]);
    button.type = "button";
    button.append(el("abbr", null, S.criteria[crit].letter));
    button.lastChild.title = crit;
    button.append(document.createTextNode(" " + TEXT[item[0]]));
    if (item[1] & SPLIT) button.append(el("span", "mark split", "split"));
    if (item[1] & NO_MAJORITY) button.append(el("span", "mark nomaj", "no majority"));
    if (differs) button.append(el("span", "mark differs", "≠"));
    button.setAttribute("aria-expanded", "false");
    button.dataset.criterion = crit;
    var panel = null;
    function toggle() {
      if (panel) {
        panel.remove();
        panel = null;
        button.setAttribute("aria-expanded", "false");
        return;
      }
      panel = votesPanel(crit, item, part, judges);
      holder.append(panel);
      button.setAttribute("aria-expanded", "true");
    }
    button.addEventListener("click", toggle);
    if (open) button.dataset.open = "1"; // opened once it is in place (see partBlock)
    return button;
  }

  function votesPanel(crit, item, part, judges) {
    var panel = el("div", "votes");
    panel.dataset.criterion = crit;
    var outcome = el("p", "outcome");
    outcome.append(el("b", null, crit + ": "), badge(item[0]));
    var reasons = [];
    if (item[1] & SPLIT) reasons.push("the judges split");
    if (item[1] & NO_MAJORITY) reasons.push("no majority: the most conservative label taken");
    if (item[1] & UNSCORED) reasons.push("fewer than two valid votes: unscored");
    if (!reasons.length) reasons.push("unanimous");
    outcome.append(document.createTextNode(" " + reasons.join("; ")));
    panel.append(outcome);
    var votes = el("ul", "vote-list");
    item[2].forEach(function (vote, j) {
      var li = el("li", "vote");
      li.append(el("span", "judge", judges[j] || "judge " + (j + 1)));
      li.append(vote[0] < 0 ? el("span", "badge abstained", "abstained") : badge(vote[0]));
      var reasoning = part.s[vote[1]];
      if (reasoning) li.append(el("span", "reasoning", reasoning));
      var warning = part.s[vote[2]];
      if (warning) li.append(el("span", "warning", "⚠ " + warning));
      if (vote[3]) li.append(el("span", "muted", "(by rule)"));
      votes.append(li);
    });
    panel.append(votes);
    return panel;
  }

  function tripleKey(triple) {
    function normal(text) {
      return String(text)
        .toLowerCase()
        .replace(/[^\p{L}\p{N}_$%.]+/gu, " ")
        .replace(/^[ .]+|[ .]+$/g, "");
    }
    return normal(triple[0]) + "\u0000" + String(triple[2]).toLowerCase() + "\u0000" + normal(triple[3]);
  }

  function referenceBlock(span) {
    var box = el("section", "part reference");
    box.append(el("h4", null, "Reference triples"));
    if (!span.ref.length) {
      box.append(el("p", "muted", "None in the dataset."));
      return box;
    }
    var extracted = new Set();
    span.runs.forEach(function (part) {
      part.t.forEach(function (triple) {
        extracted.add(tripleKey(triple));
      });
    });
    var ol = el("ol", "triples");
    span.ref.forEach(function (triple) {
      var li = el("li", "triple");
      li.append(tripleLine(triple));
      if (extracted.has(tripleKey(triple))) li.append(el("span", "flag found", "extracted"));
      ol.append(li);
    });
    box.append(ol);
    return box;
  }

  // --- wiring ---

  form.addEventListener("change", function (event) {
    var name = event.target.name;
    state[name] = event.target.value;
    if (name === "task") {
      state.ticker = state.section = state.crit = state.verdict = "";
      if (!review) state.flag = S.compare ? "differ" : "";
    }
    if (name === "crit") state.verdict = "";
    state.page = 0;
    render();
  });
  pager.addEventListener("click", function (event) {
    var go = event.target.dataset && event.target.dataset.go;
    if (!go) return;
    var screens = Number(pager.dataset.screens || 1);
    state.page = { first: 0, prev: state.page - 1, next: state.page + 1, last: screens - 1 }[go];
    state.page = Math.max(0, Math.min(state.page, screens - 1));
    render();
    document.getElementById("browser").scrollIntoView();
  });
  window.addEventListener("hashchange", function () {
    readHash();
    show();
  });
  readHash();
  show();
  if (state.view === "scores" || state.view === "settings") {
    // the first screen is static; the span browser's first page loads meanwhile
    loadIndex(state.task).then(
      function () {
        document.body.dataset.ready = "1";
      },
      function () {}
    );
  }
  window.FRV.state = state;
  window.FRV.shownTask = function () {
    return shownTask;
  };
})();
