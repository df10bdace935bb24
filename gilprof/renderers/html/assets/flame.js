/* gilprof flame graph: draws a tree (from gilprof.renderers.flamegraph.flame_json) into an
 * <svg> element, root on top. Click a frame to zoom to it (its ancestors stay, full width);
 * click the root to reset. search(term) marks matching frames and reports their share.
 * Used by the HTML pages and by the standalone SVG, so it only touches SVG elements. */
"use strict";

var GILPROF_SVGNS = "http://www.w3.org/2000/svg";

function GilprofFlame(svg, data, opts) {
  this.svg = svg;
  this.data = data;
  this.opts = opts || {};
  this.row = 17;
  this.left = this.opts.left || 0;
  this.top = this.opts.top || 0;
  this.width = this.opts.width || 1000;
  this.side = 1; // diff: 1 = widths from the after profile, 0 = before
  this.term = "";
  this.onhover = this.opts.onhover || function () {};
  this.onchange = this.opts.onchange || function () {};
  this.group = this.opts.group || svg;
  this.root = this._load(data.root, null, 0);
  this.zoomed = this.root;
}

GilprofFlame.prototype._load = function (raw, parent, depth) {
  var key = this.data.names[raw[0]].split("\t");
  var node = { name: key[0], file: key[1] || "", parent: parent, depth: depth, kids: [] };
  if (typeof raw[1] === "number") { node.v = raw[1]; node.b = 0; }
  else { node.b = raw[1][0]; node.v = raw[1][1]; }
  node.extra = raw.length > 3 ? raw[3] : null;
  for (var i = 0; i < raw[2].length; i++) node.kids.push(this._load(raw[2][i], node, depth + 1));
  return node;
};

GilprofFlame.prototype.val = function (n) {
  return this.data.kind === "diff" && this.side === 0 ? n.b : n.v;
};

GilprofFlame.prototype.label = function (n) {
  return n.name;
};

GilprofFlame.prototype.matches = function (n) {
  if (!this.term || n.depth === 0) return false;
  if (!this.regex) {
    try { this.regex = new RegExp(this.term, "i"); }
    catch (e) { this.regex = { test: (s) => s.toLowerCase().indexOf(this.term.toLowerCase()) >= 0 }; }
  }
  return this.regex.test(n.name) || this.regex.test(n.file);
};

GilprofFlame.prototype.color = function (n) {
  if (this.term && this.matches(n)) return "#d23fd2";
  if (n.depth <= 1) return n.depth === 0 ? "#c9cbd3" : "#dcdde3";
  var h = 0;
  for (var i = 0; i < n.name.length; i++) h = (h * 31 + n.name.charCodeAt(i)) >>> 0;
  var r = (h % 1000) / 1000;
  var kind = this.data.kind;
  if (kind === "diff") {
    var sign = n.extra ? n.extra[0] : 0;
    if (!sign) return "#e2e2e2";
    var d = n.v / (this.data.ticks || 1) - n.b / (this.data.ticksBefore || 1);
    var k = Math.min(1, Math.abs(d) / 0.05) * 0.6 + 0.4;
    return sign > 0 ? "rgb(235," + Math.round(200 - 160 * k) + "," + Math.round(200 - 160 * k) + ")"
      : "rgb(" + Math.round(200 - 160 * k) + "," + Math.round(210 - 120 * k) + ",240)";
  }
  if (kind === "blocked") return "hsl(" + Math.round(250 + 40 * r) + "," + Math.round(25 + 15 * r) + "%," + Math.round(66 + 10 * r) + "%)";
  if (kind === "wait") return "hsl(" + Math.round(195 + 35 * r) + "," + Math.round(55 + 20 * r) + "%," + Math.round(62 + 10 * r) + "%)";
  var native = n.file && !/\.(py|pyw|pyx)$/.test(n.file) && n.file.charAt(0) !== "<";
  if (native) return "hsl(" + Math.round(80 + 40 * r) + ",45%," + Math.round(58 + 10 * r) + "%)";
  return "hsl(" + Math.round(8 + 42 * r) + "," + Math.round(78 + 12 * r) + "%," + Math.round(58 + 8 * r) + "%)";
};

GilprofFlame.prototype.describe = function (n) {
  var d = this.data, lines = [];
  var where = n.file ? n.name + " (" + n.file + ")" : n.name;
  lines.push(where);
  if (d.kind === "diff") {
    var b = n.b / (d.ticksBefore || 1), a = n.v / (d.ticks || 1);
    lines.push("before " + (100 * b).toFixed(2) + "% -> after " + (100 * a).toFixed(2) + "% of ticks");
    var note = n.extra && n.extra[1];
    lines.push(note ? "function: " + note : "function not among the compared rows: not tested");
    return lines;
  }
  var share = d.ticks ? n.v / d.ticks : 0;
  lines.push((100 * share).toFixed(2) + "% of ticks, " + (n.v * d.spt).toFixed(2) + " s, " +
             Math.round(n.v) + " samples" + (n.depth && n.parent ? ", " +
             (100 * n.v / (this.val(n.parent) || 1)).toFixed(1) + "% of its caller" : ""));
  if (d.kind === "wait") {
    if (n.extra && n.extra.length) {
      var total = 0, parts = [];
      n.extra.forEach(function (e) { total += e[1]; });
      n.extra.forEach(function (e) {
        parts.push(d.holders[e[0]] + " " + (100 * e[1] / (total || 1)).toFixed(0) + "%");
      });
      lines.push("meanwhile the GIL was held by: " + parts.join(", "));
    } else {
      lines.push("who held the GIL meanwhile: unknown (no per-tick spans)");
    }
  }
  return lines;
};

GilprofFlame.prototype._node = function (n, x, w, y) {
  var g = document.createElementNS(GILPROF_SVGNS, "g");
  g.setAttribute("class", "frame" + (this.term && this.matches(n) ? " match" : ""));
  g.setAttribute("data-name", n.name);
  var rect = document.createElementNS(GILPROF_SVGNS, "rect");
  rect.setAttribute("x", (this.left + x).toFixed(1));
  rect.setAttribute("y", y);
  rect.setAttribute("width", Math.max(w - 0.6, 0.2).toFixed(1));
  rect.setAttribute("height", this.row - 1);
  rect.setAttribute("rx", 2);
  rect.setAttribute("fill", this.color(n));
  g.appendChild(rect);
  var chars = Math.floor((w - 6) / 6.6);
  var label = this.label(n);
  if (chars >= 3) {
    var t = document.createElementNS(GILPROF_SVGNS, "text");
    t.setAttribute("x", (this.left + x + 3).toFixed(1));
    t.setAttribute("y", y + 12);
    t.textContent = label.length <= chars ? label : label.slice(0, chars - 2) + "..";
    g.appendChild(t);
  }
  var self = this;
  g.addEventListener("click", function (ev) { ev.stopPropagation(); self.zoom(n === self.zoomed ? (n.parent || n) : n); });
  g.addEventListener("mousemove", function (ev) { self.onhover(self.describe(n), ev); });
  g.addEventListener("mouseout", function () { self.onhover(null); });
  this.group.appendChild(g);
};

GilprofFlame.prototype.render = function () {
  while (this.group.firstChild) this.group.removeChild(this.group.firstChild);
  var z = this.zoomed, W = this.width, self = this, maxDepth = z.depth;
  for (var p = z.parent; p; p = p.parent) this._node(p, 0, W, this.top + p.depth * this.row);
  var total = this.val(z) || 1;
  (function walk(n, x) {
    var w = W * self.val(n) / total;
    if (w < 0.5) return;
    maxDepth = Math.max(maxDepth, n.depth);
    self._node(n, x, w, self.top + n.depth * self.row);
    var cx = x;
    n.kids.forEach(function (k) { walk(k, cx); cx += W * self.val(k) / total; });
  })(z, 0);
  this.height = this.top + (maxDepth + 1) * this.row;
  this.svg.setAttribute("data-zoom", z === this.root ? "" : z.name);
  this.svg.setAttribute("data-search", this.term);
  this.onchange(this);
};

GilprofFlame.prototype.zoom = function (n) { this.zoomed = n || this.root; this.render(); };

GilprofFlame.prototype.find = function (pred) {
  // the widest node for which pred holds (zoom targets given by name)
  var best = null, self = this;
  (function walk(n) {
    if (pred(n) && (!best || self.val(n) > self.val(best))) best = n;
    n.kids.forEach(walk);
  })(this.root);
  return best;
};

GilprofFlame.prototype.search = function (term) {
  this.term = term || "";
  this.regex = null;
  var matched = 0, self = this;
  if (this.term) {
    (function walk(n) {
      if (self.matches(n)) { matched += self.val(n); return; } // counted once per subtree
      n.kids.forEach(walk);
    })(this.root);
  }
  var ticks = this.data.kind === "diff" && this.side === 0 ? this.data.ticksBefore : this.data.ticks;
  this.matchedShare = this.term ? matched / (ticks || 1) : null;
  this.svg.setAttribute("data-matched", this.term ? this.matchedShare.toFixed(4) : "");
  this.render();
  return this.matchedShare;
};

function gilprofHashParams() {
  var out = {};
  (location.hash || "").replace(/^#/, "").split("&").forEach(function (kv) {
    var i = kv.indexOf("=");
    if (i > 0) out[decodeURIComponent(kv.slice(0, i))] = decodeURIComponent(kv.slice(i + 1));
  });
  return out;
}

/* The standalone SVG file (gilprof report --format svg): static frames are replaced by live ones. */
function gilprofStandaloneSvg() {
  var svg = document.documentElement;
  var data = JSON.parse(document.getElementById("flame-data").textContent);
  var details = document.getElementById("details");
  var matchedText = document.getElementById("matched");
  var width = +svg.getAttribute("width");
  var flame = new GilprofFlame(svg, data, {
    group: document.getElementById("frames"), left: 10, top: 52, width: width - 20,
    onhover: function (lines) { details.textContent = lines ? lines.join("  |  ") : " "; },
    onchange: function (f) {
      var h = f.height + 40;
      svg.setAttribute("height", h);
      svg.setAttribute("viewBox", "0 0 " + width + " " + h);
      details.setAttribute("y", h - 14);
      matchedText.textContent = f.term ? "Matched: " + (100 * f.matchedShare).toFixed(2) + "% of ticks" : "";
    }
  });
  document.getElementById("reset").addEventListener("click", function () { flame.search(""); flame.zoom(null); });
  function ask() {
    var term = prompt("Search (regular expression)", flame.term);
    if (term !== null) flame.search(term);
  }
  document.getElementById("search-btn").addEventListener("click", ask);
  window.addEventListener("keydown", function (e) {
    if (e.key === "f" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); ask(); }
  });
  var params = gilprofHashParams();
  if (params.zoom) flame.zoomed = flame.find(function (n) { return n.name === params.zoom; }) || flame.root;
  flame.search(params.search || "");
  window.gilprofFlame = flame;
}
