#!/bin/bash
# make web-vendor: fetches the web UI's third-party browser code with npm
# (exact versions and integrity hashes from package-lock.json) and copies
# the built files with their licenses into web/static/vendor/, which is
# embedded in the binary and ignored by git. Third-party code is never
# committed: without this step the UI still works, and its Console tab says
# the terminal was not built in.
set -euo pipefail
cd "$(dirname "$0")"
out=../static/vendor
if ! command -v npm >/dev/null; then
	msg="make web-vendor: npm is not installed (apt-get install npm): the web UI's console terminal is not built in"
	if [ "${CI:-}" = true ]; then echo "$msg" >&2; exit 1; fi
	echo "$msg; go on without it" >&2
	exit 0
fi
npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
x=node_modules/@xterm
# The source-map comments would make browsers' tools ask for maps castiron does not serve.
sed '/^\/\/# sourceMappingURL=/d' $x/xterm/lib/xterm.mjs > $out/xterm.mjs.tmp
sed '/^\/\/# sourceMappingURL=/d' $x/addon-fit/lib/addon-fit.mjs > $out/addon-fit.mjs.tmp
cp $x/xterm/css/xterm.css $out/xterm.css.tmp
cp $x/xterm/LICENSE $out/xterm.LICENSE.txt
cp $x/addon-fit/LICENSE $out/addon-fit.LICENSE.txt
for f in xterm.mjs addon-fit.mjs xterm.css; do mv $out/$f.tmp $out/$f; done
echo "web/static/vendor: @xterm/xterm $(node -p 'require("./node_modules/@xterm/xterm/package.json").version'), @xterm/addon-fit $(node -p 'require("./node_modules/@xterm/addon-fit/package.json").version')"
