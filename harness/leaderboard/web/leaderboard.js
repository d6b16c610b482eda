// Sorting for every table.board and the metric-vs-latency plot of every figure.plot.
// No dependencies and no requests: the rows are embedded in the page, so it works from file://.
(function () {
  "use strict";
  var rows = JSON.parse(document.getElementById("leaderboard-data").textContent);
  var SVG = "http://www.w3.org/2000/svg";

  function sortKey(cell, numeric) {
    var raw = cell.getAttribute("data-value");
    if (raw === null) raw = cell.textContent.trim();
    if (!numeric) return raw.toLowerCase();
    return raw === "" ? NaN : parseFloat(raw);
  }

  function sortTable(table, th, column) {
    var numeric = th.getAttribute("data-type") === "number";
    var current = th.getAttribute("aria-sort");
    var direction = current === "descending" ? "ascending" : current === "ascending" ? "descending"
      : (numeric ? "descending" : "ascending");
    table.querySelectorAll("thead th").forEach(function (h) { h.removeAttribute("aria-sort"); });
    th.setAttribute("aria-sort", direction);
    var sign = direction === "ascending" ? 1 : -1;
    var body = table.tBodies[0];
    var sorted = Array.prototype.slice.call(body.rows).map(function (row, index) {
      return { row: row, key: sortKey(row.cells[column], numeric), index: index };
    });
    sorted.sort(function (a, b) {
      if (numeric) {
        var na = isNaN(a.key), nb = isNaN(b.key);
        if (na || nb) return na === nb ? a.index - b.index : (na ? 1 : -1); // blanks last
        return a.key === b.key ? a.index - b.index : sign * (a.key - b.key);
      }
      var order = a.key.localeCompare(b.key);
      return order === 0 ? a.index - b.index : sign * order;
    });
    sorted.forEach(function (item) { body.appendChild(item.row); });
  }

  document.querySelectorAll("table.board").forEach(function (table) {
    table.querySelectorAll("thead th").forEach(function (th, column) {
      th.tabIndex = 0;
      th.addEventListener("click", function () { sortTable(table, th, column); });
      th.addEventListener("keydown", function (event) {
        if (event.key === "Enter" || event.key === " ") { event.preventDefault(); sortTable(table, th, column); }
      });
    });
  });

  function el(name, attrs, parent, text) {
    var node = document.createElementNS(SVG, name);
    Object.keys(attrs).forEach(function (key) { node.setAttribute(key, attrs[key]); });
    if (text !== undefined) node.textContent = text;
    parent.appendChild(node);
    return node;
  }

  function niceTicks(low, high, count) {
    var span = high - low, step = Math.pow(10, Math.floor(Math.log10(span / count)));
    [1, 2, 5, 10].some(function (m) { if (span / (step * m) <= count) { step *= m; return true; } return false; });
    var ticks = [];
    for (var t = Math.ceil(low / step) * step; t <= high + 1e-9; t += step) ticks.push(+t.toFixed(6));
    return ticks;
  }

  function drawPlot(svg, points, metric) {
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    var width = +svg.getAttribute("width"), height = +svg.getAttribute("height");
    var m = { left: 52, right: 150, top: 14, bottom: 42 };
    var plotted = points.filter(function (p) { return p.metrics[metric] !== undefined && p.p50_ms > 0; });
    if (!plotted.length) {
      el("text", { x: 20, y: 30 }, svg, "no rows report " + metric);
      return;
    }
    var xs = plotted.map(function (p) { return Math.log10(p.p50_ms); });
    var ys = plotted.map(function (p) { return 100 * p.metrics[metric]; });
    var x0 = Math.floor(Math.min.apply(null, xs)), x1 = Math.ceil(Math.max.apply(null, xs));
    if (x1 === x0) x1 = x0 + 1;
    var y0 = Math.max(0, Math.floor((Math.min.apply(null, ys) - 5) / 10) * 10);
    var y1 = Math.min(100, Math.ceil((Math.max.apply(null, ys) + 5) / 10) * 10);
    if (y1 <= y0) y1 = y0 + 10;
    var sx = function (v) { return m.left + (v - x0) / (x1 - x0) * (width - m.left - m.right); };
    var sy = function (v) { return height - m.bottom - (v - y0) / (y1 - y0) * (height - m.top - m.bottom); };
    var grid = el("g", { "class": "grid" }, svg), axis = el("g", { "class": "axis" }, svg);
    for (var d = x0; d <= x1; d++) {
      [1, 2, 5].forEach(function (f) {
        var v = d + Math.log10(f);
        if (v > x1 + 1e-9) return;
        el("line", { x1: sx(v), x2: sx(v), y1: m.top, y2: height - m.bottom }, grid);
        if (f === 1 || x1 - x0 <= 2) {
          var label = Math.pow(10, d) * f;
          el("text", { x: sx(v), y: height - m.bottom + 15, "text-anchor": "middle" }, axis,
             label >= 1 ? String(label) : label.toPrecision(1));
        }
      });
    }
    niceTicks(y0, y1, 6).forEach(function (v) {
      el("line", { x1: m.left, x2: width - m.right, y1: sy(v), y2: sy(v) }, grid);
      el("text", { x: m.left - 6, y: sy(v) + 4, "text-anchor": "end" }, axis, String(v));
    });
    el("line", { x1: m.left, x2: width - m.right, y1: height - m.bottom, y2: height - m.bottom }, axis);
    el("line", { x1: m.left, x2: m.left, y1: m.top, y2: height - m.bottom }, axis);
    el("text", { x: (m.left + width - m.right) / 2, y: height - 6, "text-anchor": "middle" }, axis,
       "latency per query, p50 (ms, log scale)");
    el("text", { x: 14, y: (m.top + height - m.bottom) / 2, "text-anchor": "middle",
                 transform: "rotate(-90 14 " + (m.top + height - m.bottom) / 2 + ")" }, axis, metric + " (×100)");
    var placed = []; // label boxes so far: nudge a label up or down rather than overprint one
    function labelY(x, y, w) {
      var offsets = [0, -12, 12, -24, 24, -36, 36];
      for (var k = 0; k < offsets.length; k++) {
        var top = y + offsets[k] - 9, clash = placed.some(function (b) {
          return x < b.x + b.w && b.x < x + w && top < b.y + 12 && b.y < top + 12;
        });
        if (!clash) { placed.push({ x: x, y: top, w: w }); return y + offsets[k]; }
      }
      return y;
    }
    plotted.forEach(function (p, i) {
      placed.push({ x: sx(xs[i]) - 5, y: sy(ys[i]) - 5, w: 10 });
    });
    plotted.forEach(function (p, i) {
      var classes = "point" + (p.llm_at_query_time ? " llm" : "") + (p.sample ? " sample" : "")
        + (p.flagged ? " flagged" : "");
      var c = el("circle", { cx: sx(xs[i]), cy: sy(ys[i]), r: 5, "class": classes, "data-retriever": p.retriever }, svg);
      el("title", {}, c, p.retriever + ": " + metric + " " + ys[i].toFixed(2) + ", p50 " + p.p50_ms.toFixed(2) + " ms"
         + (p.sample ? ", " + Math.round(100 * p.sample) + "% sample" : "") + (p.llm_at_query_time ? ", LLM at query time" : "")
         + (p.seeds ? ", mean of " + p.seeds + " seeds" : "") + (p.flagged ? ", flagged: component never ran" : ""));
      var x = sx(xs[i]) + 8, y = labelY(x, sy(ys[i]) + 4, 6.2 * p.retriever.length);
      el("text", { x: x, y: y, "class": "label" }, svg, p.retriever);
    });
  }

  document.querySelectorAll("figure.plot").forEach(function (figure) {
    var split = figure.getAttribute("data-split");
    var select = figure.querySelector("select"), svg = figure.querySelector("svg");
    var points = rows.filter(function (r) { return r.split === split; });
    var draw = function () { drawPlot(svg, points, select.value); };
    select.addEventListener("change", draw);
    draw();
  });
})();
