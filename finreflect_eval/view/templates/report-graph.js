/* finreflect-eval view, the Graph tab: one filing's graph at a time, drawn as SVG from its data
 * script (data/<task>/graph-<run>-<n>.js, FRV.graph(...); view/graph.py computes the layout, a
 * seeded spring layout, as places 0-1 on each axis). Entities are circles sized by degree and
 * labelled with their most frequent surface form (the best connected ones, as many as the width
 * leaves room for; every one has its title); fragmented entities (written more than one way)
 * get a dashed ring, contradicting edges (opposite relations) are dashed and marked ≠; the
 * legend is in the page, and the filing's fragmented entities and contradictions are listed in
 * words below. The drawing takes the figure's width in CSS pixels, so its text stays readable
 * on a phone. Edges between the same two entities run side by side. The Downstream tab draws a
 * question's gold path and subgraph with the same code (R.graphDrawing): there a link's kind
 * (its last item) marks a gold hop found (solid, green) or missing (dashed, red), and those
 * edges carry their relation. Every text is set with textContent. After report-spans.js.
 */
(function (R) {
  "use strict";

  var el = R.el;
  var legend = document.querySelector(".kg-legend svg"); // (there is a figure to draw in)
  var SVG = legend ? legend.namespaceURI : null; // SVG's namespace, from an inline svg
  var MAX_LABEL = 24; // characters of a label drawn (the title has all of it)
  var drawnWidth = new WeakMap();
  // A link's kind (view/downstream.py): its class, arrow and what its title adds.
  var KINDS = {
    1: ["on-path", "; a gold hop the model's triples hold"],
    2: ["missing", "; a gold hop missing from the model's triples"],
    3: ["missing", "; a gold hop missing from the model's triples (its chunk's triples link the two otherwise)"],
  };

  function svg(tag, attributes, className) {
    var node = document.createElementNS(SVG, tag);
    Object.keys(attributes || {}).forEach(function (name) {
      node.setAttribute(name, String(attributes[name]));
    });
    if (className) node.setAttribute("class", className);
    return node;
  }

  function titled(node, text) {
    var title = document.createElementNS(SVG, "title");
    title.textContent = text;
    node.appendChild(title);
    return node;
  }

  function short(text) {
    return text.length > MAX_LABEL ? text.slice(0, MAX_LABEL - 1) + "…" : text;
  }

  function quoted(forms) {
    return forms
      .map(function (form) {
        return "“" + form + "”";
      })
      .join(" · ");
  }

  // --- the drawing ---

  function geometry(width, data) {
    var height = Math.round(Math.max(240, Math.min(560, width * 0.68, 160 + 45 * data.nodes.length)));
    var margin = { x: Math.min(70, width * 0.14), y: 26 };
    var scale = width < 520 ? 0.8 : 1;
    var labelled = width < 520 ? 10 : width < 900 ? 24 : data.nodes.length;
    return {
      width: width,
      height: height,
      x: function (v) {
        return margin.x + v * (width - 2 * margin.x);
      },
      y: function (v) {
        return margin.y + v * (height - 2 * margin.y - 12);
      },
      radius: function (degree) {
        return scale * Math.min(20, 5 + 3 * Math.sqrt(degree));
      },
      labelled: labelled,
    };
  }

  // Where an edge runs: from its source to the target's rim, moved `shift` px to its side (edges
  // between the same two entities run side by side); `middle`, where its marks go, is its midpoint
  // (for those side by side, spread along it, so that their marks do not overlap).
  function route(from, to, shift) {
    var dx = to.x - from.x, dy = to.y - from.y;
    var length = Math.sqrt(dx * dx + dy * dy) || 1;
    var side = { x: (-dy * shift) / length, y: (dx * shift) / length };
    var rim = to.r + 3, along = 0.5 + 0.02 * shift;
    var end = Math.max(0, length - Math.sqrt(Math.max(0, rim * rim - shift * shift)));
    return {
      x1: from.x + side.x, y1: from.y + side.y,
      x2: from.x + (dx * end) / length + side.x, y2: from.y + (dy * end) / length + side.y,
      middle: { x: from.x + dx * along + side.x, y: from.y + dy * along + side.y },
    };
  }

  function shifts(links) {
    var pairs = {}, seen = {};
    links.forEach(function (link) {
      var pair = Math.min(link[0], link[1]) + ":" + Math.max(link[0], link[1]);
      pairs[pair] = (pairs[pair] || 0) + 1;
    });
    return links.map(function (link) {
      var pair = Math.min(link[0], link[1]) + ":" + Math.max(link[0], link[1]);
      var number = (seen[pair] = (seen[pair] || 0) + 1) - 1;
      var side = link[0] <= link[1] ? 1 : -1; // the same side whichever way an edge points
      return side * 10 * (number - (pairs[pair] - 1) / 2);
    });
  }

  function drawEdges(root, data, at, places) {
    var group = svg("g", {}, "kg-edges");
    var shifted = shifts(data.links);
    data.links.forEach(function (link, number) {
      var from = places[link[0]], to = places[link[1]];
      var source = data.nodes[link[0]][0], target = data.nodes[link[1]][0];
      var kind = KINDS[link[5]] || null;
      var text = source + " — " + link[2] + " → " + target + " (" + link[4] + " triple" +
        (link[4] === 1 ? "" : "s") + ")" + (link[3] ? "; contradicts the opposite relation" : "") +
        (kind ? kind[1] : "");
      if (link[0] === link[1]) return; // an entity related to itself: listed, not drawn
      var way = route(from, to, shifted[number]);
      var suffix = link[3] ? "-contra" : kind ? "-" + kind[0] : "";
      var ends = { x1: way.x1, y1: way.y1, x2: way.x2, y2: way.y2, "marker-end": "url(#" + at.marker + suffix + ")" };
      var edge = svg("line", ends, "kg-edge" + (link[3] ? " contra" : "") + (kind ? " " + kind[0] : ""));
      group.appendChild(titled(edge, text));
      if (link[3] || kind) {
        var middle = { x: way.middle.x, y: way.middle.y + (link[3] ? 4 : -4), "text-anchor": "middle" };
        var mark = svg("text", middle, link[3] ? "kg-mark" : "kg-rel " + kind[0]);
        mark.textContent = link[3] ? "≠" : short(link[2]);
        group.appendChild(titled(mark, text));
      }
    });
    root.appendChild(group);
  }

  function drawNodes(root, data, at, places) {
    var group = svg("g", {}, "kg-nodes");
    data.nodes.forEach(function (node, number) {
      var place = places[number];
      var item = svg("g", {}, "kg-entity" + (node[4] ? " fragmented" : ""));
      var about = node[0] + " — " + node[3] + " distinct triple" + (node[3] === 1 ? "" : "s") +
        "; written as " + quoted(node[5]) + (node[6].length ? "; types " + node[6].join(", ") : "");
      if (node[4]) {
        item.appendChild(svg("circle", { cx: place.x, cy: place.y, r: place.r + 3.5 }, "kg-ring"));
      }
      var circle = { cx: place.x, cy: place.y, r: place.r };
      item.appendChild(svg("circle", circle, "kg-node" + (node[4] ? " fragmented" : "")));
      titled(item, about);
      if (number < at.labelled) {
        var anchor = place.x < at.width * 0.2 ? "start" : place.x > at.width * 0.8 ? "end" : "middle";
        var dx = anchor === "start" ? -place.r : anchor === "end" ? place.r : 0;
        var labelAt = { x: place.x + dx, y: place.y + place.r + 12, "text-anchor": anchor };
        var label = svg("text", labelAt, "kg-label");
        label.textContent = short(node[0]);
        item.appendChild(label);
      }
      group.appendChild(item);
    });
    root.appendChild(group);
  }

  function markers(root, id) {
    var defs = svg("defs");
    var kinds = [["", "kg-arrow"], ["-contra", "kg-arrow contra"], ["-on-path", "kg-arrow on-path"],
      ["-missing", "kg-arrow missing"]];
    kinds.forEach(function (kind) {
      var marker = svg("marker", {
        id: id + kind[0], viewBox: "0 0 10 10", refX: 9, refY: 5, markerWidth: 6, markerHeight: 6,
        orient: "auto-start-reverse",
      });
      marker.appendChild(svg("path", { d: "M0,0 L10,5 L0,10 z" }, kind[1]));
      defs.appendChild(marker);
    });
    root.appendChild(defs);
  }

  var figures = 0;

  // An SVG of a drawing `width` px wide; `holder` (an element) keeps the id of its arrows.
  function drawing(holder, data, width, label) {
    var at = geometry(width, data);
    at.marker = holder.dataset.marker || (holder.dataset.marker = "kg-arrow-" + ++figures);
    var root = svg("svg", { viewBox: "0 0 " + width + " " + at.height, role: "img" });
    root.setAttribute("aria-label", label || "The graph of filing " + data.filing);
    markers(root, at.marker);
    var places = data.nodes.map(function (node) {
      return { x: at.x(node[1]), y: at.y(node[2]), r: at.radius(node[3]) };
    });
    drawEdges(root, data, at, places);
    drawNodes(root, data, at, places);
    return root;
  }

  // --- the caption and the lists ---

  function caption(data) {
    var text = data.filing + ": " + data.entities + " entit" + (data.entities === 1 ? "y" : "ies") +
      ", " + data.edges + " edge" + (data.edges === 1 ? "" : "s") + " (distinct normalised triples), " +
      data.n_fragmented + " fragmented, " + data.n_contradictions + " contradiction" +
      (data.n_contradictions === 1 ? "" : "s") + ".";
    if (data.nodes.length < data.entities || data.links.length < data.edges_among) {
      text += " Showing the " + data.nodes.length + " entities of highest degree (of " + data.entities +
        ") and " + data.links.length + " of the " + data.edges_among + " edges among them.";
    }
    return text + " Hover over an entity or an edge for its surface forms, types and relation.";
  }

  function list(title, items, total, line) {
    var box = el("div", "kg-list");
    box.appendChild(el("h4", null, title + " (" + total + ")"));
    if (!total) {
      box.appendChild(el("p", "muted", "none"));
      return box;
    }
    var ul = el("ul");
    items.forEach(function (item) {
      ul.appendChild(line(item));
    });
    if (total > items.length) ul.appendChild(el("li", "muted", "and " + (total - items.length) + " more"));
    box.appendChild(ul);
    return box;
  }

  function lists(data) {
    var fragmented = list("Fragmented entities", data.fragmented, data.n_fragmented, function (item) {
      var li = el("li", "kg-fragmented");
      li.appendChild(el("span", "kg-entity-name", item[0]));
      li.appendChild(el("span", "kg-forms", " written as " + quoted(item[1])));
      return li;
    });
    var contradictions = list("Contradictions", data.contradictions, data.n_contradictions, function (item) {
      var li = el("li", "kg-contradiction");
      li.appendChild(el("span", "kg-entity-name", item[0]));
      li.appendChild(el("span", "kg-relations", " — " + item[1] + " and " + item[2] + " → "));
      li.appendChild(el("span", "kg-entity-name", item[3]));
      return li;
    });
    if (!data.quality) return [fragmented, contradictions];
    var figures = el("div", "kg-list kg-figures");
    figures.appendChild(el("h4", null, "This filing"));
    var ul = el("ul");
    data.quality.forEach(function (item) {
      var li = el("li");
      li.appendChild(el("span", null, item[0] + " "));
      li.appendChild(el("b", null, item[1]));
      ul.appendChild(li);
    });
    figures.appendChild(ul);
    return [figures, fragmented, contradictions];
  }

  // --- the figures ---

  function draw(figure, force) {
    var canvas = figure.querySelector(".kg-canvas");
    var width = Math.floor(canvas.clientWidth);
    if (!width || (!force && drawnWidth.get(figure) === width)) return;
    var number = figure.querySelector("select").value;
    var ticket = (figure.ticket = (figure.ticket || 0) + 1);
    R.loadGraph(figure.dataset.task, figure.dataset.run, number)
      .then(function (data) {
        if (ticket !== figure.ticket) return;
        canvas.replaceChildren(drawing(figure, data, width));
        figure.querySelector(".kg-caption").textContent = caption(data);
        var below = figure.querySelector(".kg-lists");
        below.replaceChildren.apply(below, lists(data));
        drawnWidth.set(figure, width);
        figure.dataset.drawn = data.filing;
      })
      .catch(function (error) {
        figure.querySelector(".kg-caption").textContent = error.message;
        figure.querySelector(".kg-caption").classList.add("error");
      });
  }

  function drawAll() {
    document.querySelectorAll("figure.kg").forEach(function (figure) {
      draw(figure, false);
    });
  }

  document.querySelectorAll("figure.kg select").forEach(function (select) {
    select.addEventListener("change", function () {
      var figure = select.closest("figure.kg");
      delete figure.dataset.drawn;
      draw(figure, true);
    });
  });
  var resizing = null;
  window.addEventListener("resize", function () {
    clearTimeout(resizing);
    resizing = setTimeout(drawAll, 150);
  });
  R.drawGraphs = drawAll;
  R.graphDrawing = drawing;
})(window.FRV);
