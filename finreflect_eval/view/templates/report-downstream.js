/* finreflect-eval view, the Downstream tab: a task's multi-hop questions a page at a time, from
 * data/<task>/questions-<run>-<n>.js (FRV.questions(...); view/downstream.py). A question shows
 * its text, the gold answer, each condition's answer with its score and votes, its gold hops in
 * words (found, or missing from the model's triples), whether the model's graph connects its
 * start and end, and two drawings by the Graph tab's code (R.graphDrawing): the gold path, its
 * missing hops dashed and red, beside the subgraph the QA model was shown. The measures above
 * are static HTML. Every text is set with textContent. After report-graph.js.
 */
(function (R) {
  "use strict";

  var el = R.el;
  var CONDITIONS = {
    model_graph: ["model's graph", "the subgraph retrieved from the model's triples"],
    gold_path: ["gold path", "the gold path's triples and chunks"],
    hop_chunks: ["hop chunks", "the hop chunks alone, as text"],
  };
  // A hop's state (view/downstream.py): its class and what it says.
  var STATES = {
    1: ["found", "held by the model's triples"],
    2: ["missing", "missing from the model's triples"],
    3: ["missing", "missing from the model's triples (they link its head and tail by another relation)"],
  };
  var drawnWidth = new WeakMap();
  var started = false;

  function plural(n, word, many) {
    return n + " " + (n === 1 ? word : many || word + "s");
  }

  // --- a question ---

  function hopItem(hop) {
    var state = STATES[hop.state] || STATES[2];
    var li = el("li", "qa-hop " + state[0]);
    li.appendChild(el("span", "kg-entity-name", hop.head));
    li.appendChild(el("span", "kg-relations", " — " + hop.relation + " → "));
    li.appendChild(el("span", "kg-entity-name", hop.tail));
    li.appendChild(el("span", "flag " + state[0], state[1]));
    li.appendChild(el("small", "qa-span", hop.span));
    return li;
  }

  function pathLine(question) {
    var path = question.path;
    var line = el("p", "qa-path");
    line.appendChild(el("b", null, "Path: "));
    line.appendChild(el("span", "kg-entity-name", question.start));
    line.appendChild(el("span", null, " to "));
    line.appendChild(el("span", "kg-entity-name", question.end));
    if (path.connected) {
      line.appendChild(el("span", "flag found", "connected in " + plural(path.length, "edge")));
      line.appendChild(el("small", "qa-nodes", path.nodes.join(" → ")));
    } else {
      line.appendChild(el("span", "flag missing", "not connected in the model's graph"));
    }
    return line;
  }

  function score(answer) {
    return answer.score === null ? "—" : answer.score.toFixed(1) + " / 10";
  }

  function how(answer) {
    var cell = el("td", "left qa-votes");
    if (answer.method === "numbers") {
      var expected = answer.expected.length;
      cell.appendChild(el("span", null, "numbers found " + answer.found.length + " of " + expected));
      if (expected) cell.appendChild(el("small", null, "expected " + answer.expected.join(", ")));
      return cell;
    }
    var ul = el("ul", "vote-list");
    answer.votes.forEach(function (vote) {
      var li = el("li", "vote");
      li.appendChild(el("span", "judge", vote[0]));
      li.appendChild(el("span", "badge" + (vote[1] === null ? " abstained" : ""), vote[1] === null ? "abstained" : vote[1] + " / 10"));
      if (vote[2]) li.appendChild(el("span", "reasoning", vote[2]));
      if (vote[3]) li.appendChild(el("span", "warning", vote[3]));
      ul.appendChild(li);
    });
    if (!answer.votes.length) ul.appendChild(el("li", "muted", "no votes"));
    cell.appendChild(ul);
    return cell;
  }

  function answers(question) {
    var table = el("table", "qa-answers");
    var head = el("tr");
    ["condition", "score", "answer", "votes"].forEach(function (name, number) {
      var th = el("th", number === 1 ? null : "left", name);
      th.scope = "col";
      head.appendChild(th);
    });
    table.appendChild(el("thead")).appendChild(head);
    var body = table.appendChild(el("tbody"));
    question.answers.forEach(function (answer) {
      var known = CONDITIONS[answer.condition] || [answer.condition, ""];
      var row = el("tr", "qa-answer");
      row.dataset.condition = answer.condition;
      var th = el("th", null, known[0]);
      th.scope = "row";
      th.appendChild(el("small", null, known[1]));
      row.appendChild(th);
      row.appendChild(el("td", "num qa-score", score(answer)));
      var text = el("td", "left qa-text", answer.answer === null ? "no answer" : answer.answer);
      if (answer.error) text.appendChild(el("small", "warning", answer.error));
      row.appendChild(text);
      row.appendChild(how(answer));
      body.appendChild(row);
    });
    var box = el("div", "scroll");
    box.appendChild(table);
    return box;
  }

  function graphFigure(title, data, label) {
    var figure = el("figure", "qa-graph");
    figure.appendChild(el("h5", null, title));
    figure.appendChild(el("div", "kg-canvas"));
    var about = plural(data.entities, "entity", "entities") + ", " + plural(data.edges, "edge");
    if (data.nodes.length < data.entities || data.links.length < data.edges_among) {
      about += "; showing " + data.nodes.length + " entities and " + data.links.length + " edges";
    }
    figure.appendChild(el("figcaption", "kg-caption", data.edges ? about + "." : "none."));
    figure.drawing = data;
    figure.label = label;
    return figure;
  }

  function card(question, number) {
    var article = el("article", "question");
    article.dataset.question = question.id;
    var header = article.appendChild(el("header"));
    header.appendChild(el("h4", null, "Question " + number));
    var meta = question.kind + " · " + question.filing + " · " + plural(question.hops.length, "hop") + " · " + question.id;
    header.appendChild(el("p", "meta", meta));
    article.appendChild(el("p", "qa-question", question.question));
    var gold = article.appendChild(el("p", "qa-gold"));
    gold.appendChild(el("b", null, "Gold answer: "));
    gold.appendChild(el("span", null, question.answer));
    article.appendChild(answers(question));
    var hops = article.appendChild(el("ol", "qa-hops"));
    question.hops.forEach(function (hop) {
      hops.appendChild(hopItem(hop));
    });
    article.appendChild(pathLine(question));
    var graphs = article.appendChild(el("div", "qa-graphs"));
    graphs.appendChild(graphFigure("Gold path", question.gold, "The gold path of question " + number));
    var shown = "The model's subgraph (" + plural(question.subgraph, "triple") + " shown to the QA model)";
    graphs.appendChild(graphFigure(shown, question.model, "The model's subgraph for question " + number));
    return article;
  }

  // --- drawing and paging ---

  function draw(figure) {
    var canvas = figure.querySelector(".kg-canvas");
    var width = Math.floor(canvas.clientWidth);
    if (!width || drawnWidth.get(figure) === width) return;
    if (figure.drawing.nodes.length) {
      canvas.replaceChildren(R.graphDrawing(figure, figure.drawing, width, figure.label));
    } else {
      canvas.replaceChildren(el("p", "muted", "no triples"));
    }
    drawnWidth.set(figure, width);
  }

  function drawShown() {
    document.querySelectorAll("#downstream figure.qa-graph").forEach(draw);
  }

  function render(box, page) {
    var pages = Number(box.dataset.pages), count = Number(box.dataset.count);
    var size = Number(box.dataset.perPage);
    var status = box.querySelector(".qa-status"), list = box.querySelector(".qa-list");
    var pager = box.querySelector(".qa-pager");
    box.page = page = Math.max(0, Math.min(page, pages - 1));
    pager.querySelector(".where").textContent = "page " + (page + 1) + " of " + Math.max(1, pages);
    pager.querySelector('[data-go="prev"]').disabled = page <= 0;
    pager.querySelector('[data-go="next"]').disabled = page >= pages - 1;
    if (!pages) {
      status.textContent = "No questions.";
      box.dataset.drawn = "0";
      return;
    }
    var ticket = (box.ticket = (box.ticket || 0) + 1);
    R.loadQuestions(box.dataset.task, box.dataset.run, page)
      .then(function (questions) {
        if (ticket !== box.ticket) return;
        var first = page * size;
        list.replaceChildren.apply(list, questions.map(function (question, number) {
          return card(question, first + number + 1);
        }));
        status.textContent = "Questions " + (first + 1) + "–" + (first + questions.length) + " of " + count;
        status.classList.remove("error");
        drawShown();
        box.dataset.drawn = String(page + 1);
      })
      .catch(function (error) {
        status.textContent = error.message;
        status.classList.add("error");
      });
  }

  function show() {
    if (started) return drawShown();
    started = true;
    document.querySelectorAll("#downstream .qa-browser").forEach(function (box) {
      box.querySelector(".qa-pager").addEventListener("click", function (event) {
        var go = event.target.dataset && event.target.dataset.go;
        if (!go) return;
        render(box, box.page + (go === "next" ? 1 : -1));
        box.scrollIntoView();
      });
      render(box, 0);
    });
  }

  var resizing = null;
  window.addEventListener("resize", function () {
    clearTimeout(resizing);
    resizing = setTimeout(drawShown, 150);
  });
  R.showQuestions = show;
})(window.FRV);
