#!/usr/bin/env bash
# Refresh the widget JavaScript the site serves itself (book/_static/widgets/README.md).
# A maintainer's step: readers and CI never run it, and it is the only step that needs npm.
# Usage: tools/vendor_widgets_js.sh [HTML_MANAGER_VERSION] [REQUIREJS_VERSION]
set -euo pipefail
cd "$(dirname "$0")/.."
html_manager="${1:-1.0.15}"
requirejs="${2:-2.3.7}"
work="$(mktemp -d)"
(cd "$work" && npm pack --silent "@jupyter-widgets/html-manager@$html_manager" "requirejs@$requirejs" >/dev/null)
mkdir -p "$work/hm" "$work/rq"
tar xzf "$work"/jupyter-widgets-html-manager-*.tgz -C "$work/hm"
tar xzf "$work"/requirejs-*.tgz -C "$work/rq"
dest=book/_static/widgets
fonts="book/_extra/book/@jupyter-widgets/html-manager/dist"  # where the manager looks, from a chapter
rm -f "$dest"/*.js "$fonts"/*.woff2
mkdir -p "$fonts"
cp "$work/hm/package/dist/embed-amd.js" "$work/rq/package/require.js" "$dest/"
# Chromium, Firefox and Safari all take the woff2 fonts, the first format each @font-face lists.
cp "$work"/hm/package/dist/*.woff2 "$fonts/"
echo "vendored html-manager $html_manager and requirejs $requirejs into $dest; update its README.md"
