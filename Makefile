# Every target installs what it needs: `npm ci` runs when node_modules is missing or
# older than package-lock.json.
.PHONY: run build coverage test test-fast test-unit test-store test-process test-openstack lint test-packages test-services openstack-venv typecheck bench screenshots clean

DEPS := node_modules/.shardbridge-installed

$(DEPS): package-lock.json
	npm ci --no-audit --no-fund
	@touch $@

# What the build reads: `make run` and `make test` build again only when one of these changed
# (a commit too: the version names it).
BUILD_INPUTS := $(shell find src -type f) scripts/build-info.mjs tsconfig.json tsconfig.build.json $(wildcard .git/HEAD .git/index)

dist/.built: $(DEPS) $(BUILD_INPUTS)
	npm run --silent build
	@touch $@

build: dist/.built

# The inspection webhook's secret for `make run`, made once (readable by its owner only), so the
# webhook answers from the first start; given by environment, never on the command line.
.state/dev-inspector-secret:
	@mkdir -p .state && umask 077 && node -e 'process.stdout.write(require("node:crypto").randomBytes(24).toString("hex") + "\n")' > $@

run: build .state/dev-inspector-secret
	SHARDBRIDGE_INSPECTOR_SECRET="$$(cat .state/dev-inspector-secret)" node dist/cli.js serve --dev-tokens .state/dev-tokens.json --definitions-backup .state/shard-definitions.json --trait-rules examples/trait-rules.json --ownership examples/ownership.json

typecheck: $(DEPS)
	npx tsc -p tsconfig.json --noEmit

# The rules tools hold: the format (prettier, every file it knows), and eslint's promises
# nobody awaits and code nobody uses (eslint.config.js). The folder order is a test
# (test/unit/layers.test.ts), read from docs/ARCHITECTURE.md.
lint: $(DEPS)
	npx prettier --check --log-level warn .
	npx eslint src test

# The Debian packages the tests need (redis-server, the OpenStack peers' ...): installed
# when missing, or — not root — the one apt-get line to run.
test-packages:
	@bash scripts/test-packages.sh

# MariaDB and RabbitMQ answering (started when down): the OpenStack tests' databases and bus.
test-services: test-packages
	@bash scripts/test-services.sh

# nova, Ironic, placement, keystone at the versions test/openstack/requirements.txt pins,
# in a virtual environment kept between runs (rebuilt when a pin changes).
openstack-venv:
	@bash scripts/openstack-venv.sh >/dev/null

# The tests in four tiers, run in this order so the fast ones fail first: unit (pure code:
# no socket, no process), store (the app and the store in this process, real redis-servers
# on loopback), process (the bridge, agents, `run`, the CLI and chromium as processes, and
# the kernel's faults), openstack (against nova, Ironic, placement, keystone from the venv).
# `make test-unit` (or -store, -process, -openstack) runs one tier.
# Built first: the tests run the CLI from dist/ when it is current (see test/helpers/cli.ts).
TIERS := unit store process openstack

# c8 (V8's own coverage) around the run: what the tests' own process ran of src/ — the
# unit and store tiers, and what the others call in process — as a summary at the end
# (the processes the tests start are not counted: test/helpers/setup.ts). Its files go
# under the recipe's own temporary folder, $$dir.
C8 = npx c8 --temp-directory "$$dir/v8" --report-dir "$$dir/report" --src src --include 'src/**'

test: test-packages test-services openstack-venv $(DEPS) typecheck lint build
	@dir="$$(mktemp -d)" && trap 'rm -rf "$$dir"' EXIT && \
	$(C8) --reporter text-summary mocha $(foreach tier,$(TIERS),'test/$(tier)/**/*.test.ts')

$(addprefix test-,$(TIERS)): test-%: test-packages test-services openstack-venv $(DEPS) build
	npx mocha 'test/$*/**/*.test.ts'

# What a developer runs on every change: the unit and store tiers (no process of the bridge,
# no cloud; redis-servers of its own on loopback). CI runs `make test`.
test-fast: test-packages $(DEPS)
	npx mocha 'test/unit/**/*.test.ts' 'test/store/**/*.test.ts'

# What the unit and store tiers run of src/, by folder and file (c8, V8's own coverage; the
# process and openstack tiers run the bridge in processes of their own and are left out).
# About the time of the two tiers; `make test` prints the summary of all four.
# COVERAGE_TIERS=unit for one.
coverage: test-packages $(DEPS)
	@dir="$$(mktemp -d)" && trap 'rm -rf "$$dir"' EXIT && \
	$(C8) --reporter text --reporter text-summary --skip-full \
		mocha $(foreach tier,$(or $(COVERAGE_TIERS),unit store),'test/$(tier)/**/*.test.ts')

# `make bench NAME...` runs only those benches (the names test/bench/run.ts lists: lease, http,
# nova, ...). The nova bench runs a private cloud: MariaDB, RabbitMQ and the venv first.
# `make bench scale` is a million nodes and 20,000 agents on one bridge (about 4 minutes, ~12,000
# sockets: ulimit -n 20000); BENCH_SCALE_NODES, _SHARDS and _SECONDS make it smaller.
ifeq (bench,$(firstword $(MAKECMDGOALS)))
BENCHES := $(wordlist 2,$(words $(MAKECMDGOALS)),$(MAKECMDGOALS))
$(eval $(BENCHES):;@:)
endif

# The HTTP benches drive the bridge with wrk (Debian's package), a C load generator that
# costs less than the bridge; `make bench peers` runs etcd (Debian's etcd-server) beside it.
# Built first: the benches run the compiled bridge, as operators do.
bench: test-services openstack-venv $(DEPS) build
	@command -v wrk >/dev/null 2>&1 || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null; }
	@command -v etcd >/dev/null 2>&1 || { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq etcd-server >/dev/null; }
	npx tsx test/bench/run.ts $(BENCHES)

# The README's pictures of the status page and the simulator's page, from the real pages
# in Debian's chromium (docs/img/).
screenshots: test-packages $(DEPS)
	npx tsx test/tools/screenshots.ts

clean:
	rm -rf dist node_modules
