/* finreflect-eval view, a span as the span browser draws it: its text (the triples' subjects and
 * objects marked), each run's triples with their CheckRules failures and the panel's verdict per
 * criterion (a verdict opens every judge's vote, reasoning and warning, and people's labels where
 * the item has any: view/people.py), and the reference triples. In the review queue a span shows
 * only its queued items. After report-filters.js.
 */
(function (R) {
  "use strict";

  var S = R.S, TEXT = R.TEXT, el = R.el, badge = R.badge;
  var SPLIT = R.SPLIT, UNSCORED = R.UNSCORED, NO_MAJORITY = R.NO_MAJORITY;
  var itemMatches = R.itemMatches, filtering = R.filtering, differsAt = R.differsAt;

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
    R.markDifferences(head, index, row);
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

  function partBlock(task, span, part, r) {
    var box = el("section", "part run-" + "ab"[r]);
    var title = S.compare ? "AB"[r] + ": " + S.runs[r].model + " · " + S.runs[r].panel : "Extracted triples";
    box.append(el("h4", null, title));
    var judges = S.runs[r].judges;
    if (part.failed) box.append(el("p", "warning", "Extraction failed: " + part.failed.join("; ")));
    (part.k || []).forEach(function (thought) {
      var details = el("details", "thinking");
      details.append(el("summary", null, "Thinking (" + thought[0] + ")"), el("pre", null, thought[1]));
      box.append(details);
    });
    var any = false;
    task.criteria.forEach(function (crit) {
      if (S.criteria[crit].per !== "span" || !part.v[crit] || !part.v[crit].length) return;
      var item = part.v[crit][0];
      var differs = differsAt(span, crit, r, 0);
      if (R.review && !itemMatches(crit, item, differs)) return;
      var holder = el("div", "span-item");
      holder.append(el("span", "what", crit + " of the span"));
      var open = filtering() && itemMatches(crit, item, differs);
      holder.append(verdictButton(holder, crit, item, part, judges, differs, open, peopleOf(part, crit, 0)));
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
        if (R.review && !hit) return;
        matched = matched || hit;
        verdicts.append(verdictButton(li, crit, item, part, judges, differs, hit, peopleOf(part, crit, k)));
      });
      if (R.review && !matched) {
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

  // People's labels of an item: [majority code (null: tied), audit (1/0), [[annotator, code]...]].
  function peopleOf(part, crit, k) {
    return (part.h && part.h[crit] && part.h[crit][String(k)]) || null;
  }

  function verdictButton(holder, crit, item, part, judges, differs, open, people) {
    var button = el("button", "verdict l" + item[0]);
    button.type = "button";
    button.append(el("abbr", null, S.criteria[crit].letter));
    button.lastChild.title = crit;
    button.append(document.createTextNode(" " + TEXT[item[0]]));
    if (item[1] & SPLIT) button.append(el("span", "mark split", "split"));
    if (item[1] & NO_MAJORITY) button.append(el("span", "mark nomaj", "no majority"));
    if (differs) button.append(el("span", "mark differs", "≠"));
    if (people) {
      var said = people[0] === null ? "tied" : TEXT[people[0]];
      var mark = el("span", "mark people", "people: " + said);
      mark.title = "people's label (" + (people[1] ? "random audit" : "flagged item") + ")";
      button.append(mark);
    }
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
      if (people) panel.append(peopleBlock(people, part));
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

  function peopleBlock(people, part) {
    var box = el("div", "people");
    var head = el("p", "outcome");
    head.append(el("b", null, "People: "));
    head.append(people[0] === null ? el("span", "badge abstained", "tied") : badge(people[0]));
    var how = people[0] === null ? "the annotators tie: unresolved, left out of the check" : "";
    if (!how) how = people[2].length > 1 ? "the annotators' majority" : "one annotator";
    how += people[1] ? "; an item of the random audit" : "; an item the judges were flagged on";
    head.append(document.createTextNode(" " + how));
    box.append(head);
    var list = el("ul", "vote-list");
    people[2].forEach(function (pair) {
      var li = el("li", "person");
      li.append(el("span", "annotator", part.s[pair[0]]), badge(pair[1]));
      list.append(li);
    });
    box.append(list);
    return box;
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

  R.spanCard = spanCard;
})(window.FRV);
