// Draw the plotly figures that book/_ext/plotly_offline.py stored as JSON in the page.
// Loaded with `defer` after plotly.min.js (from the plotly wheel), so Plotly is defined.
(function () {
  "use strict";

  function draw(el) {
    if (el.dataset.synclabDrawn) return;
    el.dataset.synclabDrawn = "1";
    var source = el.querySelector('script[type="application/json"]');
    var fig = JSON.parse(source.textContent);
    var layout = Object.assign({}, fig.layout || {});
    // A width fixed in the notebook would overflow the book's column; fill it instead.
    delete layout.width;
    layout.autosize = true;
    var config = Object.assign({ displaylogo: false }, fig.config || {}, { responsive: true });
    // The whole figure, frames included: a slider's steps animate to its frames.
    var figure = { data: fig.data || [], layout: layout, frames: fig.frames || [], config: config };
    window.Plotly.newPlot(el, figure).catch(function (err) {
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
