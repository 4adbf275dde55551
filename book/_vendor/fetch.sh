#!/usr/bin/env bash
# Re-fetch the JavaScript the offline book serves (see README.md) from the npm registry.
# `npm pack` downloads the pinned tarballs only (no dependency tree, no install scripts);
# we keep just the files the pages load so the committed set stays small.
set -euo pipefail

REQUIREJS=requirejs@2.3.8
HTML_MANAGER=@jupyter-widgets/html-manager@1.0.15   # ipywidgets 8.1.x wants ^1.0.1
MATHJAX=mathjax@3.2.2                                # MathJax 3: what Sphinx 7 targets

here="$(cd "$(dirname "$0")" && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

cd "$tmp"
npm pack --silent "$REQUIREJS" "$HTML_MANAGER" "$MATHJAX" >/dev/null
for tgz in *.tgz; do
  mkdir "${tgz%.tgz}"
  tar -xzf "$tgz" -C "${tgz%.tgz}" --strip-components=1
done

out="$tmp/dist"
mkdir -p "$out/requirejs" "$out/jupyter-widgets/html-manager" "$out/mathjax"
cp requirejs-*/require.js "$out/requirejs/require.js"
# embed-amd.js bundles base + controls + output; it finds its font files next to itself.
hm=(jupyter-widgets-html-manager-*/dist)
cp "${hm[0]}/embed-amd.js" "$out/jupyter-widgets/html-manager/"
cp "${hm[0]}"/*.woff2 "$out/jupyter-widgets/html-manager/"   # Font Awesome (icons of controls)
cp "${hm[0]}/embed.js.LICENSE.txt" "$out/jupyter-widgets/html-manager/THIRD-PARTY-LICENSES.txt"
# The -full bundle holds every TeX extension (nothing is autoloaded from a server) and
# SVG output needs no font files; plotly's LaTeX labels also need MathJax's SVG output.
cp mathjax-*/es5/tex-svg-full.js "$out/mathjax/"
cp mathjax-*/LICENSE "$out/mathjax/LICENSE"

rm -rf "$here/dist"
cp -r "$out" "$here/dist"
du -sh "$here/dist"
