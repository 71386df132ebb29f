(function () {
  document.querySelectorAll("table.sortable").forEach(function (table) {
  var tbody = table.tBodies[0];
  table.querySelectorAll("thead button").forEach(function (button) {
    button.addEventListener("click", function () {
      var th = button.parentElement;
      var descending = th.getAttribute("aria-sort") !== "descending";
      table.querySelectorAll("thead th").forEach(function (h) {
        if (h.hasAttribute("aria-sort")) h.setAttribute("aria-sort", "none");
      });
      th.setAttribute("aria-sort", descending ? "descending" : "ascending");
      var key = button.dataset.key;
      var rows = Array.prototype.slice.call(tbody.rows);
      function value(row) {
        var cell = row.querySelector('td[data-key="' + key + '"]');
        var text = cell ? cell.dataset.value : "";
        return text === "" ? -Infinity : parseFloat(text);
      }
      rows.sort(function (a, b) { return descending ? value(b) - value(a) : value(a) - value(b); });
      rows.forEach(function (row) { tbody.appendChild(row); });
    });
  });
  });
  var tbody = document.getElementById("board").tBodies[0];
  var panel = document.getElementById("panel-filter");
  var dataset = document.getElementById("dataset-filter");
  function filter() {
    Array.prototype.forEach.call(tbody.rows, function (row) {
      var show = (!panel.value || row.dataset.panel === panel.value) &&
                 (!dataset.value || row.dataset.dataset === dataset.value);
      row.hidden = !show;
    });
  }
  panel.addEventListener("change", filter);
  dataset.addEventListener("change", filter);
})();
