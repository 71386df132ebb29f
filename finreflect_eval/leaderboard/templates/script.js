(function () {
  // Sort a table by a column when its header is clicked; an entry's detail row moves with it.
  document.querySelectorAll("table.sortable").forEach(function (table) {
    var tbody = table.tBodies[0];
    table.querySelectorAll("thead button").forEach(function (button) {
      button.addEventListener("click", function () {
        var th = button.parentElement;
        var descending = th.getAttribute("aria-sort") !== "descending";
        table.querySelectorAll("thead th[aria-sort]").forEach(function (h) {
          h.setAttribute("aria-sort", "none");
        });
        th.setAttribute("aria-sort", descending ? "descending" : "ascending");
        var key = button.dataset.key;
        var entries = Array.prototype.filter.call(tbody.rows, function (row) {
          return row.classList.contains("entry");
        });
        function value(row) {
          var cell = row.querySelector(':scope > td[data-key="' + key + '"]');
          var text = cell ? cell.dataset.value : "";
          return text === "" ? -Infinity : parseFloat(text);
        }
        entries.sort(function (a, b) {
          return descending ? value(b) - value(a) : value(a) - value(b);
        });
        entries.forEach(function (row) {
          var toggle = row.querySelector("button.toggle");
          var detail = toggle && document.getElementById(toggle.getAttribute("aria-controls"));
          tbody.appendChild(row);
          if (detail) tbody.appendChild(detail);
        });
      });
    });
  });
  // Per-criterion detail on demand.
  document.querySelectorAll("button.toggle").forEach(function (button) {
    button.addEventListener("click", function () {
      var detail = document.getElementById(button.getAttribute("aria-controls"));
      var open = button.getAttribute("aria-expanded") === "true";
      button.setAttribute("aria-expanded", open ? "false" : "true");
      detail.hidden = open;
    });
  });
})();
