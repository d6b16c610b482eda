// Sorting and fitting for every table.board, and the metric-vs-latency plot of every figure.plot.
// No dependencies and no requests: the rows are embedded in the page, so it works from file://.
(function () {
  "use strict";
  document.documentElement.classList.add("js");
  var rows = JSON.parse(document.getElementById("leaderboard-data").textContent);
  var SVG = "http://www.w3.org/2000/svg";
  var slice = function (list) { return Array.prototype.slice.call(list); };

  // ---- sorting -------------------------------------------------------------------------------

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
    var sorted = slice(body.rows).map(function (row, index) {
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
    // the plot follows the table: sorting by a metric plots that metric
    var metric = th.getAttribute("data-metric");
    if (metric) setPlotMetric(table.getAttribute("data-split"), metric);
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

  // ---- fitting: never wider than the page ------------------------------------------------------

  function showColumn(table, index, shown) {
    slice(table.rows).forEach(function (row) {
      if (row.cells[index]) row.cells[index].classList.toggle("off", !shown);
    });
  }

  // Drop columns in their data-drop order while the table is wider than its box; if that is not
  // enough, make the rows cards. A note above the table names what is left to each row's details.
  function fit(table) {
    var box = table.parentNode, heads = slice(table.tHead.rows[0].cells);
    var tooWide = function () { return table.getBoundingClientRect().width > box.clientWidth + 0.5; };
    table.classList.remove("cards");
    heads.forEach(function (th, i) { showColumn(table, i, true); });
    var order = heads.map(function (th, i) { return { i: i, drop: +(th.getAttribute("data-drop") || 0) }; })
      .filter(function (c) { return c.drop > 0; })
      .sort(function (a, b) { return a.drop - b.drop; });
    var dropped = [];
    for (var k = 0; k < order.length && tooWide(); k++) {
      showColumn(table, order[k].i, false);
      dropped.push(heads[order[k].i].textContent);
    }
    if (tooWide()) {
      heads.forEach(function (th, i) { showColumn(table, i, true); });
      table.classList.add("cards");
      dropped = heads.filter(function (th) { return th.classList.contains("minor"); })
        .map(function (th) { return th.textContent; });
    }
    var note = box.previousElementSibling;
    if (!note || !note.classList.contains("hidden-note")) {
      note = document.createElement("p");
      note.className = "hidden-note";
      box.parentNode.insertBefore(note, box);
    }
    var details = table.querySelector("details.evidence") !== null;
    note.textContent = dropped.length ? "Not shown at this width: " + dropped.join(", ")
      + (details ? " (in each row's details)." : ".") : "";
    note.hidden = !dropped.length;
  }

  // ---- the plot --------------------------------------------------------------------------------

  function el(name, attrs, parent, text) {
    var node = document.createElementNS(SVG, name);
    Object.keys(attrs).forEach(function (key) { node.setAttribute(key, attrs[key]); });
    if (text !== undefined) node.textContent = text;
    parent.appendChild(node);
    return node;
  }

  function textWidth(node, text) {
    var width = 0;
    try { width = node.getComputedTextLength(); } catch (e) { width = 0; }
    return width || 6.2 * text.length;
  }

  function niceTicks(low, high, count) {
    var span = high - low, step = Math.pow(10, Math.floor(Math.log10(span / count)));
    [1, 2, 5, 10].some(function (m) { if (span / (step * m) <= count) { step *= m; return true; } return false; });
    var ticks = [];
    for (var t = Math.ceil(low / step) * step; t <= high + 1e-9; t += step) ticks.push(+t.toFixed(6));
    return ticks;
  }

  // Drawn at the width the SVG has on the page, one unit a pixel: text keeps its size on a phone,
  // and every label is placed inside the drawing (beside, above or below its point, never over
  // another label or point); a point with no room for its name gets a number, named in the key.
  function drawPlot(figure, svg, points, metric) {
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    var width = Math.round(svg.getBoundingClientRect().width) || 760;
    var height = Math.round(Math.max(240, Math.min(360, 0.55 * width)));
    svg.setAttribute("viewBox", "0 0 " + width + " " + height);
    svg.setAttribute("data-width", width);
    var key = figure.querySelector(".key");
    if (key) key.parentNode.removeChild(key);
    var m = { left: 48, right: 12, top: 12, bottom: 40 };
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
    var lastRight = -Infinity; // x-axis labels: skip one that would touch the one before
    for (var d = x0; d <= x1; d++) {
      [1, 2, 5].forEach(function (f) {
        var v = d + Math.log10(f);
        if (v > x1 + 1e-9) return;
        el("line", { x1: sx(v), x2: sx(v), y1: m.top, y2: height - m.bottom }, grid);
        if (f !== 1 && x1 - x0 > 2) return;
        var value = Math.pow(10, d) * f, text = value >= 1 ? String(value) : value.toPrecision(1);
        var label = el("text", { x: sx(v), y: height - m.bottom + 15, "text-anchor": "middle" }, axis, text);
        var w = textWidth(label, text), x = Math.min(Math.max(sx(v), w / 2 + 1), width - w / 2 - 1);
        if (x - w / 2 < lastRight + 6) { axis.removeChild(label); return; }
        label.setAttribute("x", x);
        lastRight = x + w / 2;
      });
    }
    niceTicks(y0, y1, height < 300 ? 4 : 6).forEach(function (v) {
      el("line", { x1: m.left, x2: width - m.right, y1: sy(v), y2: sy(v) }, grid);
      el("text", { x: m.left - 6, y: sy(v) + 4, "text-anchor": "end" }, axis, String(v));
    });
    el("line", { x1: m.left, x2: width - m.right, y1: height - m.bottom, y2: height - m.bottom }, axis);
    el("line", { x1: m.left, x2: m.left, y1: m.top, y2: height - m.bottom }, axis);
    el("text", { x: (m.left + width - m.right) / 2, y: height - 6, "text-anchor": "middle" }, axis,
       "latency per query, p50 (ms, log scale)");
    el("text", { x: 12, y: (m.top + height - m.bottom) / 2, "text-anchor": "middle",
                 transform: "rotate(-90 12 " + (m.top + height - m.bottom) / 2 + ")" }, axis, metric + " (×100)");

    var taken = plotted.map(function (p, i) { return { x: sx(xs[i]) - 6, y: sy(ys[i]) - 6, w: 12, h: 12 }; });
    function free(b) {
      if (b.x < m.left + 2 || b.x + b.w > width - 1 || b.y < 0 || b.y + b.h > height - m.bottom - 1) return false;
      return !taken.some(function (t) { return b.x < t.x + t.w && t.x < b.x + b.w && b.y < t.y + t.h && t.y < b.y + b.h; });
    }
    // where a label of width w may go around the point (cx, cy): its box and its text's anchor
    function spots(cx, cy, w) {
      var out = [];
      [0, -12, 12, -22, 22].forEach(function (dy) {
        out.push({ x: cx + 8, y: cy + 4 + dy, anchor: "start", box: { x: cx + 8, y: cy - 6 + dy, w: w, h: 12 } });
        out.push({ x: cx - 8, y: cy + 4 + dy, anchor: "end", box: { x: cx - 8 - w, y: cy - 6 + dy, w: w, h: 12 } });
        if (dy === 0) {
          out.push({ x: cx, y: cy - 9, anchor: "middle", box: { x: cx - w / 2, y: cy - 19, w: w, h: 12 } });
          out.push({ x: cx, y: cy + 17, anchor: "middle", box: { x: cx - w / 2, y: cy + 7, w: w, h: 12 } });
        }
      });
      return out;
    }
    function place(label, cx, cy, text, force) {
      var w = textWidth(label, text), found = null;
      spots(cx, cy, w).some(function (s) { if (free(s.box)) { found = s; return true; } return false; });
      if (!found && !force) return false;
      if (!found) { // no free spot: beside the point, kept inside the drawing
        var x = Math.min(Math.max(cx + 8, m.left + 2), width - w - 1);
        found = { x: x, y: cy + 4, anchor: "start", box: { x: x, y: cy - 6, w: w, h: 12 } };
      }
      label.setAttribute("x", found.x);
      label.setAttribute("y", found.y);
      label.setAttribute("text-anchor", found.anchor);
      taken.push(found.box);
      var b = found.box, mid = b.y + b.h / 2;
      if (Math.abs(mid - cy) > 8 && found.anchor !== "middle") { // a label set off its point: a line ties them
        var ex = found.anchor === "start" ? b.x - 1 : b.x + b.w + 1;
        el("line", { x1: cx + (ex > cx ? 4 : -4), y1: cy + (mid > cy ? 3 : -3), x2: ex, y2: mid, "class": "leader" }, leaders);
      }
      return true;
    }
    var leaders = el("g", {}, svg), circles = el("g", {}, svg), labels = el("g", {}, svg);
    plotted.forEach(function (p, i) {
      var classes = "point" + (p.llm_at_query_time ? " llm" : "") + (p.sample ? " sample" : "")
        + (p.flagged ? " flagged" : "");
      var c = el("circle", { cx: sx(xs[i]), cy: sy(ys[i]), r: 5, "class": classes, "data-retriever": p.retriever }, circles);
      el("title", {}, c, p.retriever + ": " + metric + " " + ys[i].toFixed(2) + ", p50 " + p.p50_ms.toFixed(2) + " ms"
         + (p.sample ? ", " + Math.round(100 * p.sample) + "% sample" : "") + (p.llm_at_query_time ? ", LLM at query time" : "")
         + (p.seeds ? ", mean of " + p.seeds + " seeds" : "") + (p.flagged ? ", flagged: component never ran" : ""));
    });
    // best first, so that the rows that matter most keep their names
    var order = plotted.map(function (p, i) { return i; }).sort(function (a, b) { return ys[b] - ys[a] || xs[a] - xs[b]; });
    var numbered = [];
    order.forEach(function (i) {
      var p = plotted[i], cx = sx(xs[i]), cy = sy(ys[i]);
      var label = el("text", { x: 0, y: 0, "class": "label", "data-retriever": p.retriever }, labels, p.retriever);
      if (place(label, cx, cy, p.retriever, false)) return;
      var number = String(numbered.length + 1);
      label.textContent = number;
      label.setAttribute("class", "label number");
      place(label, cx, cy, number, true);
      numbered.push(number + " " + p.retriever);
    });
    if (numbered.length) {
      key = document.createElement("p");
      key.className = "key";
      numbered.forEach(function (text, n) {
        var item = document.createElement("span"), b = document.createElement("b");
        b.textContent = text.split(" ")[0];
        item.appendChild(b);
        item.appendChild(document.createTextNode(" " + text.slice(b.textContent.length + 1) + (n + 1 < numbered.length ? "; " : "")));
        key.appendChild(item);
      });
      svg.parentNode.insertBefore(key, svg.nextSibling);
    }
  }

  var plots = [];
  document.querySelectorAll("figure.plot").forEach(function (figure) {
    var split = figure.getAttribute("data-split");
    var select = figure.querySelector("select"), svg = figure.querySelector("svg");
    var points = rows.filter(function (r) { return r.split === split; });
    var plot = { split: split, select: select, svg: svg, draw: function () { drawPlot(figure, svg, points, select.value); } };
    select.addEventListener("change", plot.draw);
    plots.push(plot);
  });

  function setPlotMetric(split, metric) {
    plots.forEach(function (plot) {
      if (plot.split !== split || plot.select.value === metric) return;
      if (!slice(plot.select.options).some(function (o) { return o.value === metric; })) return;
      plot.select.value = metric;
      plot.draw();
    });
  }

  // ---- layout, now and whenever the width changes or a row's details open ----------------------

  var tables = slice(document.querySelectorAll("table.board"));
  function layout() {
    tables.forEach(fit);
    plots.forEach(function (plot) {
      if (+plot.svg.getAttribute("data-width") !== Math.round(plot.svg.getBoundingClientRect().width)) plot.draw();
    });
  }
  layout();
  var pending = false, lastWidth = window.innerWidth;
  window.addEventListener("resize", function () {
    if (pending || window.innerWidth === lastWidth) return;
    pending = true;
    window.requestAnimationFrame(function () { pending = false; lastWidth = window.innerWidth; layout(); });
  });
  // an open row's details widen its table's name column: fit that table again
  document.addEventListener("toggle", function (event) {
    var table = event.target.closest && event.target.closest("table.board");
    if (table) fit(table);
  }, true);
})();
