# The two commands: `make study` runs the default study, `make test` sets up and passes the tests.
SHELL := /bin/bash
VENV ?= .venv
BIN := $(abspath $(VENV))/bin
# Study files to lay over config/config.yaml, later ones overriding, e.g. make study STUDY=config/studies/smoke.yaml
# or STUDY="config/studies/smoke.yaml my-tiers.yaml"
STUDY ?=
# More Snakemake arguments, e.g. ARGS="--cores 4 --config resolution=C96"
ARGS ?=
# A workflow profile that sends the jobs to a cluster, e.g. make study PROFILE=profiles/mysite (docs/cluster.md):
# the cluster is checked first (cycleio cluster-check), then every job goes through the profile
PROFILE ?=
CONFIG_ARGS := $(if $(strip $(STUDY)),--configfile $(STUDY))
PROFILE_ARGS := $(if $(strip $(PROFILE)),--workflow-profile $(PROFILE))
RUN := PATH="$(BIN):$$PATH"
# ARGS as one single-quoted shell word: each ' of ARGS becomes '\'' so quotes inside ARGS survive.
QUOTED_ARGS = '$(subst ','\'',$(ARGS))'
# Looked up once, on first use (each lookup starts Python and Snakemake's config parser: about a second)
STUDY_NAME = $(eval STUDY_NAME := $(shell $(RUN) python -m cycleio study-name config/config.yaml $(STUDY) --snakemake-args=$(QUOTED_ARGS) 2>/dev/null || echo default))$(STUDY_NAME)

# MPI=system also builds the parallel-netCDF stack (.venv-parallel, against the system's MPI netCDF) that the
# parallel and quilt_parallel write strategies run with; the tests that need it build it themselves.
MPI ?=

.PHONY: setup setup-parallel study report test test-fast lint format bench
setup:
	@bash scripts/bootstrap.sh
ifeq ($(MPI),system)
	@bash scripts/bootstrap-parallel.sh
endif

setup-parallel:
	@bash scripts/bootstrap-parallel.sh

# A dry run (-n) only shows the jobs: no report, no "done".
DRY_RUN = $(filter -n --dry-run --dryrun,$(ARGS))

# The config files first (an error names its file), then with PROFILE the cluster (before any job is
# submitted; a dry run submits none), then the lock a killed run left (removed only when no run works
# here), then the study.
study: setup
	@$(RUN) python -m cycleio check-config config/config.yaml $(STUDY) --snakemake-args=$(QUOTED_ARGS)
ifneq ($(strip $(PROFILE)),)
ifeq ($(DRY_RUN),)
	@$(RUN) python -m cycleio cluster-check --profile $(PROFILE) config/config.yaml $(STUDY) --snakemake-args=$(QUOTED_ARGS)
endif
endif
	@$(RUN) python -m cycleio unlock-stale -- $(CONFIG_ARGS)
	$(RUN) snakemake $(PROFILE_ARGS) $(CONFIG_ARGS) $(ARGS)
ifeq ($(DRY_RUN),)
	@$(MAKE) --no-print-directory report STUDY='$(STUDY)' ARGS=$(QUOTED_ARGS) STUDY_NAME='$(STUDY_NAME)'
	@echo
	@cat results/$(STUDY_NAME)/summary.md
	@echo
	@echo "Study '$(STUDY_NAME)' is done:"
	@echo "  answer:  results/$(STUDY_NAME)/summary.md, summary.csv, capacity.csv (the capacity plan)"
	@echo "  tables:  results/$(STUDY_NAME)/tables/ (step_summary.csv, cycle_timeline.csv, io_events.parquet, staging.csv, benchmarks.csv, efficiency.csv, io_gap.csv, scaling_fit.csv, ...)"
	@echo "  figures: results/$(STUDY_NAME)/figures/ (PNG and SVG)"
	@echo "  report:  results/$(STUDY_NAME)/report.html"
endif

report: setup
	@$(RUN) snakemake $(CONFIG_ARGS) $(ARGS) --report results/$(STUDY_NAME)/report.html

# The unit tests on every core (test-fast), then the end-to-end tests, real jobs, MPI and other real programs
# (Snakemake, Slurm, GlusterFS, mpiexec, fio, make) by group (--dist loadgroup: a group's tests share its studies
# and clusters; tests/conftest.py groups them and starts the longest first): two workers take the busy groups, a
# third the Slurm tests, which mostly wait on Slurm (a third busy worker from the start slowed every test by a third),
# then what is left of the others'.
# Exit 5 is "none of PYTEST_ARGS's tests is one".
test: test-fast
	$(RUN) $(PYTEST) -m "e2e or job or mpi or integration" -n 3 --dist loadgroup $(PYTEST_ARGS) || [ $$? -eq 5 ]

# The unit tests only, one worker per core: no Snakemake runs, Slurm, GlusterFS, MPI program, fio or make (marked
# e2e, job, mpi or integration).
test-fast: setup
	$(RUN) $(PYTEST) -m "not e2e and not job and not mpi and not integration" -n auto $(PYTEST_ARGS) || [ $$? -eq 5 ]

# pytest keeps each test module with its assertions rewritten as bytecode (tests/__pycache__), unless the environment
# sets PYTHONDONTWRITEBYTECODE (some do): then every worker of every session rewrites every module again, about 8
# CPU-s a worker here
PYTEST = PYTHONDONTWRITEBYTECODE= python -m pytest

lint: setup
	$(RUN) snakemake --lint
	$(RUN) snakefmt --check Snakefile rules/
	PYTHONPATH=scripts $(RUN) lint-imports

format: setup
	$(RUN) snakefmt Snakefile rules/

# Benchmarks of cycleio against baselines measured in the same run: bench/RESULTS.md, bench/results.png.
# BENCH_ARGS="--quick" for a short smoke version, "--only staging planning" for some of them.
BENCH_ARGS ?=
bench: setup
	$(RUN) python bench/run.py $(BENCH_ARGS)
