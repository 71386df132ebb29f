/* finreflect-eval view, the page itself: the tabs (the scores, cost and settings are static HTML), the
 * span browser's screen (its status line, one screen of span cards, the pager) and the wiring of
 * the form, the pager and the URL's fragment. The last part: it starts the page.
 */
(function (R) {
  "use strict";

  var S = R.S, state = R.state;
  var loadIndex = R.loadIndex, loadPage = R.loadPage, forgetPages = R.forgetPages;
  var readHash = R.readHash, writeHash = R.writeHash, taskInfo = R.taskInfo;
  var fillFilters = R.fillFilters, matching = R.matching, spanCard = R.spanCard;

  // --- the tabs: which view shows ---

  function show() {
    document.querySelectorAll(".view").forEach(function (view) {
      view.classList.toggle("active", view.dataset.view.split(" ").indexOf(state.view) >= 0);
    });
    document.querySelectorAll(".tabs a").forEach(function (tab) {
      if (tab.dataset.view === state.view) tab.setAttribute("aria-current", "page");
      else tab.removeAttribute("aria-current");
    });
    if (state.view === "spans" || state.view === "review") render();
    if (state.view === "graph") R.drawGraphs();
    if (state.view === "downstream") R.showQuestions();
  }

  var form = document.getElementById("filters");
  var statusLine = document.getElementById("status");
  var list = document.getElementById("list");
  var pager = document.querySelector(".pager");
  var shownTask = null;
  var ticket = 0;

  function setStatus(text, error) {
    statusLine.textContent = text;
    statusLine.classList.toggle("error", !!error);
  }

  // --- the span browser's screen ---

  function render() {
    var mine = ++ticket;
    R.review = state.view === "review";
    document.getElementById("browser-title").textContent = R.review ? "Review queue" : "Spans";
    document.getElementById("browser-help").textContent = R.review
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
              ? (R.review ? "Queued spans " : "Spans ") +
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

  // --- wiring ---

  form.addEventListener("change", function (event) {
    var name = event.target.name;
    state[name] = event.target.value;
    if (name === "task") {
      state.ticker = state.section = state.crit = state.verdict = "";
      if (!R.review) state.flag = R.SPANS_FLAG;
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
  if (["scores", "settings", "graph", "cost", "downstream"].indexOf(state.view) >= 0) {
    // the first screen is static; the span browser's first page loads meanwhile
    loadIndex(state.task).then(
      function () {
        document.body.dataset.ready = "1";
      },
      function () {}
    );
  }
  R.shownTask = function () {
    return shownTask;
  };
})(window.FRV);
