# mm2py: every set-up step a fresh machine needs is in here.
#   make demo   - start local brokers, replicate three "data centres" into one target, show lag
#   make test   - unit and integration tests (real brokers, real Spark in local mode)
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# Apache Kafka + MirrorMaker 2 jars for tests/real_kafka.py, resolved once from Maven Central: the pinned
# version (brokers and MM2) into .kafka-libs/jars, and broker-only jars of other versions, one pom each under
# tests/kafka-libs/<version>/, into .kafka-libs/<version>/jars (the batch path is proven against them too).
KAFKA_LIBS       := .kafka-libs
KAFKA_LIBS_STAMP := $(KAFKA_LIBS)/.resolved
KAFKA_LIBS_POM   := tests/kafka-libs/pom.xml
KAFKA_VERSIONS   := 3.9.2 4.4.0
KAFKA_LIBS_ALL   := $(KAFKA_LIBS_STAMP) $(KAFKA_VERSIONS:%=$(KAFKA_LIBS)/%/.resolved)

.PHONY: install test unit integration realkafka durations lint demo bench executor-loss bench-cutover bench-throttle \
	bench-idle bench-continuous clean kafka-libs bench-short-runs bench-broker-costs bench-backlog

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[test,dev]'
	@touch $(STAMP)

# A changed pom starts from an empty jar directory, so no jar of an old version stays on the classpath. Only that
# pom's jars go: the other versions' directories, the CDS archives (keyed by classpath, so never stale) and the
# compiled Java helpers stay.
$(KAFKA_LIBS_STAMP): $(KAFKA_LIBS_POM)
	rm -rf $(KAFKA_LIBS)/jars
	mvn -B -q -f $(KAFKA_LIBS_POM) dependency:copy-dependencies -DincludeScope=runtime \
		-DoutputDirectory=$(CURDIR)/$(KAFKA_LIBS)/jars
	@touch $@

$(KAFKA_LIBS)/%/.resolved: tests/kafka-libs/%/pom.xml
	rm -rf $(KAFKA_LIBS)/$*/jars
	mvn -B -q -f $< dependency:copy-dependencies -DincludeScope=runtime \
		-DoutputDirectory=$(CURDIR)/$(KAFKA_LIBS)/$*/jars
	@touch $@

kafka-libs: $(KAFKA_LIBS_ALL)

# An MIT Kerberos KDC for the GSSAPI tests (tests/harness/kerberos.py starts one per session in a temp
# directory): Debian's packages, installed once; the system's own KDC service is never used.
KRB5_KDC := /usr/sbin/krb5kdc
$(KRB5_KDC):
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q krb5-kdc krb5-admin-server \
		|| (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q krb5-kdc krb5-admin-server)

install: $(STAMP) $(KAFKA_LIBS_ALL) $(KRB5_KDC)

# Lint and type errors fail the build before any test runs (CI runs this target through .ci/run). Three workers
# on two cores (half of a test's time is waiting), whole modules each, the longest first (tests/durations.json),
# and never more than two of the heaviest fault modules at once (tests/harness/scheduling.py; docs/testing.md).
PYTEST_N := $(BIN)/pytest -n 3 --dist loadfile --no-loadscope-reorder
test: lint $(KAFKA_LIBS_ALL) $(KRB5_KDC)
	$(PYTEST_N) --durations=15 tests

# The tiers make test runs, each alone (docs/testing.md says how long each takes here).
unit: $(STAMP)
	$(BIN)/pytest tests/unit

integration: $(STAMP)
	$(PYTEST_N) tests/integration

realkafka: $(STAMP) $(KAFKA_LIBS_ALL) $(KRB5_KDC)
	$(PYTEST_N) tests/realkafka

# The whole suite, timed per test (tests/harness/suite_timing.py) and its CPU summed per kind of process
# (tests/harness/cpu_by_process.py): prints both and rewrites tests/durations.json, by which the workers are
# balanced.
SUITE_TIMING := bench-results/suite-timing
durations: $(STAMP) $(KAFKA_LIBS_ALL)
	rm -rf $(SUITE_TIMING)
	MM2PY_SUITE_TIMING=$(SUITE_TIMING) $(BIN)/python -m tests.harness.cpu_by_process $(SUITE_TIMING)/cpu.json \
		-- $(PYTEST_N) tests
	$(BIN)/python -m tests.harness.suite_timing $(SUITE_TIMING) --durations tests/durations.json

lint: $(STAMP)
	$(BIN)/ruff format --check mm2py tests bench examples
	$(BIN)/ruff check mm2py tests bench examples
	$(BIN)/mypy
	$(BIN)/python -m tests.layout_rules

# As a module from the repository root, so examples/demo.py can import the broker harness in tests/.
demo: $(STAMP)
	$(BIN)/python -m examples.demo

# mm2py run --once against a tuned one-process consume->produce loop (docs/performance.md);
# e.g. make bench BENCH_ARGS="--records 100000" for a quick run
bench: $(STAMP) $(KAFKA_LIBS_ALL)
	$(BIN)/python -m bench.run_bench $(BENCH_ARGS)

# An executor JVM SIGKILLed mid-copy on a two-worker Spark standalone cluster, three real Kafka sources merged
# into one target, --once and continuous (bench/executor_loss.py); one JSON line per scenario run, e.g.
# make executor-loss EXECUTOR_LOSS_ARGS="--mode once --runs 3"
executor-loss: $(STAMP) $(KAFKA_LIBS_STAMP)
	$(BIN)/python -m bench.executor_loss $(EXECUTOR_LOSS_ARGS)

# The cut-over must-shows of issue 31 at full size (bench/cutover_drill.py): a planned cut-over taking the flow
# from a running run, a failover after every node of A was SIGKILLed, and three sources merged into one topic cut
# over together, each on fresh Kafka clusters; one JSON line per run, e.g.
# make bench-cutover CUTOVER_ARGS="--scenario merged --runs 1"
bench-cutover: $(STAMP) $(KAFKA_LIBS_STAMP)
	$(BIN)/python -m bench.cutover_drill $(CUTOVER_ARGS)

# mm2py.throughput.max.bytes.per.second on a 2 GB backlog, window by window, beside an unlimited flow, then
# without the limit (bench/throttle.py; about 6 minutes)
bench-throttle: $(STAMP) $(KAFKA_LIBS_STAMP)
	$(BIN)/python -m bench.throttle $(THROTTLE_ARGS)

# One flow's backlog caught up in continuous mode at each tasks.max, alternated: MB/s, CPU per GB, every record
# checked (bench/backlog.py; about 8 minutes)
bench-backlog: $(STAMP) $(KAFKA_LIBS_STAMP)
	$(BIN)/python -m bench.backlog $(BACKLOG_ARGS)

# Six flows and 804 partitions idle for 120 s: CPU and wake-ups of mm2py's process tree and of MirrorMaker 2's on
# the same clusters, and the first record after the idle spell (bench/idle.py; about 10 minutes)
bench-idle: $(STAMP) $(KAFKA_LIBS_STAMP)
	$(BIN)/python -m bench.idle $(IDLE_ARGS)

# Continuous mode beside MirrorMaker 2 on the same brokers and load, per load step: latency (overall, per 5-s
# window, after the source's acknowledgement) and CPU per million records (bench/continuous.py; about 50 minutes)
bench-continuous: $(STAMP) $(KAFKA_LIBS_STAMP)
	$(BIN)/python -m bench.continuous $(CONTINUOUS_ARGS)

# One short `mm2py run --once` (a cron job's run) start to exit: wall time and the process tree's CPU, variants
# alternated round by round (bench/short_runs.py; about 5 minutes)
bench-short-runs: $(STAMP) $(KAFKA_LIBS_STAMP)
	$(BIN)/python -m bench.short_runs $(SHORT_RUNS_ARGS)

# What the suite's test brokers cost: idle (fresh and after a suite's worth of topics) per broker setting, and
# under the broker-fault module's copies per JVM option (bench/broker_costs.py; about 5 and 7 minutes)
bench-broker-costs: $(STAMP) $(KAFKA_LIBS_STAMP)
	$(BIN)/python -m bench.broker_costs idle $(BROKER_COSTS_ARGS)
	$(BIN)/python -m bench.broker_costs jit $(BROKER_COSTS_ARGS)

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .mypy_cache .ruff_cache
