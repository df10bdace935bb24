/* gilprof pages: GIL timeline lanes, flame graphs with their controls, a shared tooltip.
 * URL fragment (for links and tests): #search=REGEX&zoom=FUNCTION&thread=NAME&flame=ID
 * applies to the flame graph ID (default: the first one on the page). */
"use strict";

function gilprofTooltip(lines, ev) {
  var tip = document.getElementById("tooltip");
  if (!lines) { tip.hidden = true; return; }
  tip.hidden = false;
  tip.textContent = "";
  lines.forEach(function (line, i) {
    var div = document.createElement("div");
    if (i === 0) div.className = "tip-title";
    div.textContent = line;
    tip.appendChild(div);
  });
  var x = ev.clientX + 14, y = ev.clientY + 14;
  var w = tip.offsetWidth, h = tip.offsetHeight;
  if (x + w > window.innerWidth - 4) x = Math.max(4, ev.clientX - w - 14);
  if (y + h > window.innerHeight - 4) y = Math.max(4, ev.clientY - h - 14);
  tip.style.left = x + "px";
  tip.style.top = y + "px";
}

function gilprofTimeline(box, tl, range) {
  box.textContent = "";
  var labelW = Math.min(180, Math.max(90, box.clientWidth * 0.22));
  var W = Math.max(100, box.clientWidth - labelW - 8), laneH = 22;
  var full = [tl.windows[0][0], tl.windows[tl.windows.length - 1][1]];
  range = range || full;
  var t0 = range[0], t1 = range[1], span = (t1 - t0) || 1;
  box.dataset.range = t0.toFixed(3) + "-" + t1.toFixed(3);
  var reset = document.getElementById("timeline-reset");
  if (reset) {
    reset.hidden = t0 <= full[0] && t1 >= full[1];
    reset.onclick = function () { gilprofTimeline(box, tl, null); };
  }
  box.gilprofZoom = function (t) { // click: 4x closer around t, down to 50 ms
    var half = Math.max(0.025, span / 8);
    var a = Math.max(full[0], t - half), b = Math.min(full[1], a + 2 * half);
    gilprofTimeline(box, tl, [Math.max(full[0], b - 2 * half), b]);
  };
  var dpr = window.devicePixelRatio || 1;
  function px(t) { return (t - t0) / span * W; }
  function lane(name, draw, hover) {
    var row = document.createElement("div");
    row.className = "lane";
    var label = document.createElement("div");
    label.className = "lane-name";
    label.style.width = labelW + "px";
    label.textContent = name;
    label.title = name;
    var canvas = document.createElement("canvas");
    canvas.width = W * dpr; canvas.height = laneH * dpr;
    canvas.style.width = W + "px"; canvas.style.height = laneH + "px";
    var ctx = canvas.getContext("2d");
    ctx.scale(dpr, dpr);
    ctx.fillStyle = "#f4f5f7"; ctx.fillRect(0, 0, W, laneH);
    draw(ctx);
    canvas.addEventListener("mousemove", function (ev) {
      var r = canvas.getBoundingClientRect();
      gilprofTooltip(hover(t0 + (ev.clientX - r.left) / W * span), ev);
    });
    canvas.addEventListener("mouseout", function () { gilprofTooltip(null); });
    canvas.addEventListener("click", function (ev) {
      var r = canvas.getBoundingClientRect();
      gilprofTooltip(null);
      box.gilprofZoom(t0 + (ev.clientX - r.left) / W * span);
    });
    row.appendChild(label); row.appendChild(canvas);
    box.appendChild(row);
  }
  function windowAt(t) {
    var lo = 0, hi = tl.windows.length - 1;
    while (lo < hi) { var mid = (lo + hi + 1) >> 1; if (tl.windows[mid][0] <= t) lo = mid; else hi = mid - 1; }
    return lo;
  }
  tl.lanes.forEach(function (ln) {
    lane(ln.name, function (ctx) {
      if (tl.perTick) {
        ln.runs.forEach(function (r) {
          ctx.fillStyle = tl.colors[tl.states[r[2]]];
          var a = px(r[0] / 1e4), b = px(r[1] / 1e4);
          ctx.fillRect(a, 1, Math.max(b - a, 0.6), laneH - 2);
        });
        return;
      }
      tl.windows.forEach(function (w, i) {
        var x = px(w[0]), width = Math.max(px(w[1]) - x, 0.8), y = laneH - 1;
        tl.states.forEach(function (s) {
          var f = ln.states[s] ? ln.states[s][i] : 0;
          if (!f) return;
          var h = Math.min(f, 1) * (laneH - 2);
          ctx.fillStyle = tl.colors[s];
          ctx.fillRect(x, y - h, width, h);
          y -= h;
        });
      });
    }, function (t) {
      var i = windowAt(t), w = tl.windows[i], parts = [];
      tl.states.forEach(function (s) {
        if (ln.states[s] && ln.states[s][i]) parts.push(s + " " + (100 * ln.states[s][i]).toFixed(0) + "%");
      });
      var lines = [ln.name + " (tid " + ln.tid + ")", "t = " + t.toFixed(2) + " s, window " +
                   w[0].toFixed(1) + "-" + w[1].toFixed(1) + " s", parts.join(", ") || "not sampled"];
      if (tl.perTick) {
        var r = ln.runs.find(function (r) { return r[0] / 1e4 <= t && t < r[1] / 1e4; });
        lines.push(r ? "at this tick: " + tl.states[r[2]] : "at this tick: not sampled");
      }
      return lines;
    });
  });
  if (tl.steps && tl.steps.length) {
    lane("steps", function (ctx) {
      tl.steps.forEach(function (s, i) {
        ctx.fillStyle = i % 2 ? "#7048e8" : "#9775fa";
        ctx.fillRect(px(s[0]), 2, Math.max(px(s[1]) - px(s[0]), 0.8), laneH - 4);
      });
    }, function (t) {
      var s = tl.steps.find(function (s) { return s[0] <= t && t < s[1]; });
      return s ? ["step " + s[2], ((s[1] - s[0]) * 1000).toFixed(1) + " ms"] : ["between steps"];
    });
  }
  var axis = document.createElement("div");
  axis.className = "axis";
  axis.style.marginLeft = labelW + "px";
  axis.style.width = W + "px";
  var n = Math.max(2, Math.min(10, Math.floor(W / 90)));
  for (var i = 0; i <= n; i++) {
    var mark = document.createElement("span");
    mark.style.left = (i / n * W) + "px";
    mark.textContent = (t0 + i / n * span).toFixed(span < 1 ? 2 : span < 10 ? 1 : 0) + " s";
    if (i === n) mark.style.transform = "translateX(-100%)";
    axis.appendChild(mark);
  }
  box.appendChild(axis);
}

function gilprofFlameSection(svg, data) {
  var section = svg.closest("section");
  var matched = section.querySelector(".matched");
  var flame = new GilprofFlame(svg, data, {
    width: svg.parentNode.clientWidth,
    onhover: gilprofTooltip,
    onchange: function (f) {
      svg.setAttribute("height", f.height + 2);
      svg.setAttribute("width", f.width);
      matched.textContent = f.term ? "matched: " + (100 * f.matchedShare).toFixed(2) + "% of ticks" : "";
      var select = section.querySelector("select.thread");
      if (select) select.value = f.zoomed.depth === 1 ? f.zoomed.name : "";
    }
  });
  var select = section.querySelector("select.thread");
  if (select) select.addEventListener("change", function () {
    flame.zoom(select.value ? flame.find(function (n) { return n.depth === 1 && n.name === select.value; }) : null);
  });
  var search = section.querySelector("input.search");
  search.addEventListener("input", function () { flame.search(search.value); });
  section.querySelector("button.reset").addEventListener("click", function () {
    search.value = ""; flame.search(""); flame.zoom(null);
  });
  var side = section.querySelector("select.side");
  if (side) side.addEventListener("change", function () { flame.side = +side.value; flame.search(flame.term); });
  return flame;
}

function gilprofPage() {
  var data = JSON.parse(document.getElementById("page-data").textContent);
  window.gilprof = { flames: {} };
  if (data.empty) return;
  var tlBox = document.getElementById("timeline");
  if (tlBox && data.timeline && data.timeline.windows.length) gilprofTimeline(tlBox, data.timeline);
  var first = null;
  Object.keys(data.flames || {}).forEach(function (id) {
    var svg = document.getElementById(id);
    if (!svg) return;
    window.gilprof.flames[id] = gilprofFlameSection(svg, data.flames[id]);
    first = first || id;
  });
  var params = gilprofHashParams();
  var target = window.gilprof.flames[params.flame || first];
  Object.keys(window.gilprof.flames).forEach(function (id) {
    var f = window.gilprof.flames[id];
    if (f !== target) { f.render(); return; }
    if (params.thread) f.zoomed = f.find(function (n) { return n.depth === 1 && n.name === params.thread; }) || f.root;
    if (params.zoom) f.zoomed = f.find(function (n) { return n.depth > 1 && n.name === params.zoom; }) || f.zoomed;
    var input = f.svg.closest("section").querySelector("input.search");
    if (params.search) input.value = params.search;
    f.search(params.search || "");
  });
  var timer = null;
  window.addEventListener("resize", function () {
    clearTimeout(timer);
    timer = setTimeout(function () {
      if (tlBox && data.timeline) gilprofTimeline(tlBox, data.timeline, null);
      Object.keys(window.gilprof.flames).forEach(function (id) {
        var f = window.gilprof.flames[id];
        f.width = f.svg.parentNode.clientWidth;
        f.render();
      });
    }, 150);
  });
}
