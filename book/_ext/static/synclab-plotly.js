// Draw the plotly figures that book/_ext/plotly_offline.py stored as JSON in the page.
// Loaded with `defer` after plotly.min.js (from the plotly wheel), so Plotly is defined.
(function () {
  "use strict";

  var CHAR_PX = 8;  // about one character of a title's text at plotly's default sizes (a little over, to be safe)
  var MODEBAR_PX = 50;  // the vertical mode bar at the right edge: no title runs under it

  // A plotly title never wraps: a long title or subtitle runs past the figure's edge. Break each of its
  // lines at spaces to fit the column. Tags that span lines (<sub>…<br>…</sub>) are closed and reopened on
  // every line first, so that each line keeps its own size.
  function splitLines(text) {
    var open = [];
    return String(text).split("<br>").map(function (line) {
      var prefix = open.map(function (tag) { return "<" + tag + ">"; }).join("");
      (line.match(/<\/?\w+>/g) || []).forEach(function (tag) {
        var name = tag.replace(/[<>\/]/g, "");
        if (tag.charAt(1) === "/") open.splice(open.lastIndexOf(name), 1); else open.push(name);
      });
      var suffix = open.slice().reverse().map(function (tag) { return "</" + tag + ">"; }).join("");
      return prefix + line + suffix;
    });
  }

  function wrapLine(line, room) {
    var open = (line.match(/^(<\w+>)+/) || [""])[0];
    var close = (line.match(/(<\/\w+>)+$/) || [""])[0];
    var words = line.slice(open.length, line.length - close.length).split(" ");
    var out = [], current = "";
    words.forEach(function (word) {
      var plain = (current + " " + word).replace(/<[^>]+>/g, "");
      if (current && plain.length > room) { out.push(current); current = word; }
      else { current = current ? current + " " + word : word; }
    });
    out.push(current);
    return out.map(function (part) { return open + part + close; });
  }

  function wrapTitle(text, width) {
    var room = Math.max(30, Math.floor((width - MODEBAR_PX) / CHAR_PX));
    var lines = [];
    splitLines(text).forEach(function (line) {
      var small = /^<sub>/.test(line);
      lines = lines.concat(wrapLine(line, small ? Math.floor(room * 1.35) : room));
    });
    return lines;
  }

  function titleText(layout) {
    var title = layout.title;
    return title && typeof title === "object" ? title.text : title;
  }

  // The title hangs from the top of the figure, and the plot starts below its last line.
  function fitTitle(layout, width) {
    var text = titleText(layout);
    if (!text) return;
    var lines = wrapTitle(text, width);
    var height = lines.reduce(function (sum, line) { return sum + (/^<sub>/.test(line) ? 16 : 24); }, 34);
    layout.title = Object.assign({}, typeof layout.title === "object" ? layout.title : {},
                                 { text: lines.join("<br>"), yref: "container", y: 1, yanchor: "top", pad: { t: 22 } });
    layout.margin = Object.assign({}, layout.margin || {});
    layout.margin.t = Math.max(layout.margin.t || 0, height);
  }

  // On a log axis spanning two decades or more, only the powers of ten are labelled ("2 5 1000 2 5" is clutter),
  // unless the figure chose its ticks (tickvals: the values it measured at).
  function tidyLogAxes(el) {
    var full = el._fullLayout, update = {};
    Object.keys(full).forEach(function (key) {
      var axis = full[key];
      if (/^[xy]axis\d*$/.test(key) && axis && axis.type === "log" && axis.range && axis.tickmode !== "array" &&
          Math.abs(axis.range[1] - axis.range[0]) >= 2) {  // ticks the figure placed itself are kept
        update[key + ".dtick"] = 1;
      }
    });
    if (Object.keys(update).length) return window.Plotly.relayout(el, update);
  }

  function draw(el) {
    if (el.dataset.synclabDrawn) return;
    el.dataset.synclabDrawn = "1";
    var source = el.querySelector('script[type="application/json"]');
    var fig = JSON.parse(source.textContent);
    var layout = Object.assign({}, fig.layout || {});
    // A width fixed in the notebook would overflow the book's column; fill it instead.
    delete layout.width;
    layout.autosize = true;
    var width = el.clientWidth || 700;
    fitTitle(layout, width);
    // The mode bar stands at the right edge, not over the title, in a margin of its own: not over the data either
    // (a learner could not read a bar's label under it).
    layout.modebar = Object.assign({ orientation: "v" }, layout.modebar || {});
    layout.margin = Object.assign({}, layout.margin || {});
    layout.margin.r = Math.max(layout.margin.r || 0, MODEBAR_PX);
    var frames = (fig.frames || []).map(function (frame) {
      var text = frame.layout && titleText(frame.layout);
      if (!text) return frame;
      var copy = Object.assign({}, frame, { layout: Object.assign({}, frame.layout) });
      copy.layout.title = Object.assign({}, typeof frame.layout.title === "object" ? frame.layout.title : {},
                                        { text: wrapTitle(text, width).join("<br>") });
      return copy;
    });
    var config = Object.assign({ displaylogo: false }, fig.config || {}, { responsive: true });
    // The whole figure, frames included: a slider's steps animate to its frames.
    var figure = { data: fig.data || [], layout: layout, frames: frames, config: config };
    window.Plotly.newPlot(el, figure).then(tidyLogAxes).catch(function (err) {
      console.error("synclab-plotly: cannot draw figure", err);
    });
  }

  function drawAll() {
    if (!window.Plotly) {
      console.error("synclab-plotly: plotly.min.js did not load");
      return;
    }
    document.querySelectorAll("div.synclab-plotly").forEach(draw);
  }

  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", drawAll);
  } else {
    drawAll();
  }
})();
