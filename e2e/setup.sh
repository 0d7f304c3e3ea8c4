#!/usr/bin/env bash
# Installs what the end-to-end tests need and the machine lacks. `make test`
# runs it first; it is idempotent and returns at once when everything is
# present, so it never needs apt, npm (or the network) on a prepared machine.
#
#   nginx     the reverse proxy of e2e/nginx_test.go (Debian's package)
#   chromium  the browser e2e/browser_test.go drives headless (Debian's
#             package, /usr/bin/chromium)
#   tmux      the terminal e2e/status_watch_test.go runs `relay status
#             --watch` in (Debian's package)
#   e2e/node/node_modules
#             the official openai npm package, the Vercel AI SDK (ai,
#             @ai-sdk/openai) and LangChain (@langchain/openai,
#             @langchain/core), Anthropic's SDK (@anthropic-ai/sdk), the
#             AI SDK's React hooks (@ai-sdk/react, react, react-dom, bundled
#             for the browser by esbuild) and the Durable Streams client and
#             server conformance suite (@durable-streams/client,
#             @durable-streams/server-conformance-tests), at the versions
#             pinned in e2e/node/package-lock.json (`npm ci`)
#
# Run it as root, or as a user that may sudo; it says what it installs.
set -euo pipefail

# Debian installs nginx to /usr/sbin, which a non-root PATH may lack.
export PATH="$PATH:/usr/sbin:/sbin"
here="$(cd "$(dirname "$0")" && pwd)"

missing=()
command -v nginx >/dev/null 2>&1 || missing+=(nginx)
[ -x /usr/bin/chromium ] || missing+=(chromium)
command -v tmux >/dev/null 2>&1 || missing+=(tmux)

if [ ${#missing[@]} -gt 0 ]; then
	if ! command -v apt-get >/dev/null 2>&1; then
		echo "e2e/setup.sh: missing ${missing[*]} and no apt-get to install it; install it by hand" >&2
		exit 1
	fi
	as_root=()
	if [ "$(id -u)" -ne 0 ]; then
		if ! command -v sudo >/dev/null 2>&1; then
			echo "e2e/setup.sh: missing ${missing[*]}; run this script as root (or install sudo) to install it" >&2
			exit 1
		fi
		as_root=(sudo)
	fi
	echo "e2e/setup.sh: installing ${missing[*]} with apt-get" >&2
	"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
	"${as_root[@]}" env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
	command -v nginx >/dev/null 2>&1 || { echo "e2e/setup.sh: nginx still not on PATH after install" >&2; exit 1; }
	[ -x /usr/bin/chromium ] || { echo "e2e/setup.sh: /usr/bin/chromium still missing after install" >&2; exit 1; }
	command -v tmux >/dev/null 2>&1 || { echo "e2e/setup.sh: tmux still not on PATH after install" >&2; exit 1; }
	echo "e2e/setup.sh: installed $(nginx -v 2>&1), $(/usr/bin/chromium --version 2>/dev/null || echo chromium), $(tmux -V)" >&2
fi

node_missing=()
for pkg in openai ai @ai-sdk/openai @langchain/openai @langchain/core @anthropic-ai/sdk \
	@ai-sdk/react react react-dom esbuild @durable-streams/client @durable-streams/server-conformance-tests; do
	[ -f "$here/node/node_modules/$pkg/package.json" ] || node_missing+=("$pkg")
done
if [ ${#node_missing[@]} -gt 0 ]; then
	if ! command -v npm >/dev/null 2>&1; then
		echo "e2e/setup.sh: npm is missing; install Node.js (20 or later) with npm" >&2
		exit 1
	fi
	echo "e2e/setup.sh: installing ${node_missing[*]} in e2e/node (npm ci)" >&2
	(cd "$here/node" && npm ci --no-audit --no-fund --loglevel=error >/dev/null)
fi
