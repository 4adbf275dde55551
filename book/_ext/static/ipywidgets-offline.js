// Loaded (first, via nb_ipywidgets_js in _config.yml) on pages with ipywidgets, before
// require.js and the widget manager (@jupyter-widgets/html-manager embed-amd.js).
(function () {
  "use strict";

  // 1. Font files (Font Awesome, for icons). Each bundled AMD module of embed-amd.js
  //    takes its asset folder from its module URI, which require.js resolves against the
  //    *page*: fonts 404'd at book/@jupyter-widgets/... Point the module names at the
  //    vendored folder that holds the fonts (a `require` object defined before require.js
  //    loads is its configuration; the longest matching prefix wins).
  var here = document.currentScript && document.currentScript.src;
  if (here) {
    var assets = new URL("../jupyter-widgets/html-manager", here).href;
    window.__jupyter_widgets_assets_path__ = assets + "/";
    if (typeof window.require === "undefined") {
      window.require = {
        paths: {
          "@jupyter-widgets": assets, // base, controls, output (+ their 7.x twins)
          "@jupyter-widgets/html-manager/dist": assets,
        },
      };
    }
  }

  // 2. Math in labels. ipywidgets 8 typesets with the MathJax 2 API (MathJax.Hub.Queue);
  //    the book loads MathJax 3, so every widget with a description threw a TypeError.
  //    The manager renders on window "load", after the deferred MathJax script ran.
  function typeset(el) {
    var mj = window.MathJax;
    mj.startup.promise = mj.startup.promise
      .then(function () { return mj.typesetPromise([el]); })
      .catch(function (err) { console.error("ipywidgets-offline: typeset failed", err); });
  }

  function installHub() {
    var mj = window.MathJax;
    if (!mj || !mj.version || mj.Hub || !mj.startup) return; // absent, MathJax 2, or done
    mj.Hub = {
      Queue: function () {
        Array.prototype.forEach.call(arguments, function (job) {
          if (Array.isArray(job) && job[0] === "Typeset" && job[2] instanceof Element) {
            typeset(job[2]);
          }
        });
      },
    };
  }

  installHub();
  document.addEventListener("DOMContentLoaded", installHub);
})();
