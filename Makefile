# make demo: fresh venv, install core + sim only, record PushT episodes, print the layout, read every step back.
# make train: add torch to that venv, train a small policy on the demo's successful episodes (examples/train_policy.py).
# make view: open the demo's buffer in the browser (trajstore view).
# make test: fresh venv, install every extra, run the whole suite (what CI runs).
# make test-quick: a venv of its own with the core and the test tools only, run the tests not marked slow.
# make bench-formats: the importers against the formats' own readers (benchmarks/format_imports.py).
# make bench-training: the training-loader benchmark (benchmarks/training_loader.py; BENCH_TRAINING_ARGS=--quick for a short run).
# make interop-check: export buffers to LeRobot v3.0 and read them back with LeRobot 0.4.4 itself (its own venv).
# make robomimic-check: import the robomimic fixture, export it and a synthetic buffer, read both with robomimic 0.3.0 (its own venv).
VENV ?= .venv
PY := $(VENV)/bin/python
DEMO := demo-out
EPISODES ?= 10


ALL_EXTRAS := dev,sim,video,torch,lerobot,zarr,ray,remote,rlds,preview
QUICK_VENV ?= .venv-quick

.PHONY: demo train view test test-quick venv clean interop-check robomimic-check bench-training bench-formats

# One venv, stamped per install level: the demo installs core + sim (seconds with a warm cache),
# train adds the CPU torch, test installs every extra.
$(VENV)/.created:
	python3 -m venv $(VENV)
	touch $@

$(VENV)/.installed-sim: $(VENV)/.created pyproject.toml
	$(PY) -m pip install -q -e ".[sim]"
	touch $@

# torch 2.13.0 is the CPU build; an open range would pull a multi-GB CUDA build
$(VENV)/.installed-torch: $(VENV)/.installed-sim
	$(PY) -m pip install -q "torch==2.13.0"
	$(PY) -m pip install -q -e ".[sim,torch]"
	touch $@

$(VENV)/.installed: $(VENV)/.installed-torch pyproject.toml Makefile
	$(PY) -m pip install -q -e ".[$(ALL_EXTRAS)]"
	touch $@

venv: $(VENV)/.installed

demo: $(VENV)/.installed-sim
	rm -rf $(DEMO)
	$(VENV)/bin/trajstore record --env pusht --episodes $(EPISODES) --out $(DEMO)/pusht \
		--reference $(DEMO)/pusht-reference.npz
	$(VENV)/bin/trajstore info $(DEMO)/pusht
	$(VENV)/bin/trajstore verify $(DEMO)/pusht --reference $(DEMO)/pusht-reference.npz

train: $(VENV)/.installed-torch
	test -d $(DEMO)/pusht || $(MAKE) demo
	$(PY) examples/train_policy.py --buffer $(DEMO)/pusht

# Screenshots of the viewer's browser tests are kept in test-artifacts/.
test: venv
	TRAJSTORE_TEST_ARTIFACTS=test-artifacts $(PY) -m pytest -q

# Look at the demo's episodes in the browser (trajstore view; Ctrl-C stops).
view: $(VENV)/.installed-sim
	test -d $(DEMO)/pusht || $(MAKE) demo
	$(VENV)/bin/trajstore view $(DEMO)/pusht --open

# The core and the test tools only: modules of optional features skip, saying which extra they need.
$(QUICK_VENV)/.installed: pyproject.toml
	python3 -m venv $(QUICK_VENV)
	$(QUICK_VENV)/bin/python -m pip install -q -e ".[testing]"
	touch $@

test-quick: $(QUICK_VENV)/.installed
	$(QUICK_VENV)/bin/python -m pytest -q -m "not slow"

# Peers (LeRobot, TorchRL, lancedb) get venvs of their own under ~/.cache/trajstore-peers, built on first use;
# data and folders are kept in ~/.cache/trajstore-peers/training and reused by later runs.
BENCH_TRAINING_ARGS ?=
bench-training: venv
	$(PY) benchmarks/training_loader.py $(BENCH_TRAINING_ARGS)

# Importers against the formats' own readers (tfrecord 1.14.6, robomimic 0.3.0, each in its own venv).
bench-formats: venv
	$(PY) benchmarks/format_imports.py --markdown

INTEROP := interop-out
# LeRobot lives in a venv of its own (it pins another torch); built on first use, ~10 min.
LEROBOT_PY = $$($(PY) benchmarks/peers/_venvs.py lerobot | sed -n 's/^lerobot: \(\/.*\)/\1/p')

interop-check: venv
	rm -rf $(INTEROP)
	$(VENV)/bin/trajstore record --env pusht --episodes 3 --max-steps 40 --out $(INTEROP)/pusht --no-progress
	$(PY) interop/lerobot_reference.py dump $(INTEROP)/pusht $(INTEROP)/pusht.npz
	$(PY) interop/lerobot_reference.py synthetic $(INTEROP)/synthetic
	$(PY) interop/lerobot_reference.py dump $(INTEROP)/synthetic $(INTEROP)/synthetic.npz
	$(VENV)/bin/trajstore export lerobot $(INTEROP)/pusht $(INTEROP)/pusht-h264 --repo-id trajstore/pusht-h264
	SVT_LOG=1 $(VENV)/bin/trajstore export lerobot $(INTEROP)/pusht $(INTEROP)/pusht-av1 --repo-id trajstore/pusht-av1 --vcodec libsvtav1
	$(VENV)/bin/trajstore export lerobot $(INTEROP)/synthetic $(INTEROP)/synthetic-h264 --repo-id trajstore/synthetic-h264
	$(VENV)/bin/trajstore export lerobot $(INTEROP)/synthetic $(INTEROP)/synthetic-png --repo-id trajstore/synthetic-png --images
	$(VENV)/bin/trajstore export lerobot $(INTEROP)/synthetic $(INTEROP)/synthetic-keys --repo-id trajstore/synthetic-keys \
		--key observation/image=observation.images.top --key reward=next.reward --no-progress
	py=$(LEROBOT_PY); test -n "$$py" || { echo "no LeRobot venv (python benchmarks/peers/_venvs.py lerobot says why)"; exit 1; }; \
	for d in pusht-h264:pusht pusht-av1:pusht synthetic-h264:synthetic synthetic-png:synthetic synthetic-keys:synthetic; do \
		HF_HUB_OFFLINE=1 $$py interop/lerobot_check.py $(INTEROP)/$${d%%:*} trajstore/$${d%%:*} $(INTEROP)/$${d##*:}.npz || exit 1; \
	done

# robomimic 0.3.0 lives in a venv of its own (--no-deps, under the CPU torch pin); built on first use, ~2 min.
ROBOMIMIC_PY = $$($(PY) benchmarks/peers/_venvs.py robomimic | sed -n 's/^robomimic: \(\/.*\)/\1/p')
RM_OUT := $(INTEROP)/robomimic

robomimic-check: venv
	rm -rf $(RM_OUT) && mkdir -p $(RM_OUT)
	$(VENV)/bin/trajstore import robomimic tests/fixtures/robomimic_hdf5/robomimic_sim.hdf5 $(RM_OUT)/fixture --camera png --no-progress
	$(PY) interop/robomimic_reference.py dump $(RM_OUT)/fixture $(RM_OUT)/fixture.npz
	$(VENV)/bin/trajstore export robomimic $(RM_OUT)/fixture $(RM_OUT)/fixture.hdf5 --no-progress
	$(PY) interop/robomimic_reference.py synthetic $(RM_OUT)/synthetic
	$(PY) interop/robomimic_reference.py dump $(RM_OUT)/synthetic $(RM_OUT)/synthetic.npz 0.25
	$(VENV)/bin/trajstore export robomimic $(RM_OUT)/synthetic $(RM_OUT)/synthetic.hdf5 --val-fraction 0.25 --no-progress
	py=$(ROBOMIMIC_PY); test -n "$$py" || { echo "no robomimic venv (python benchmarks/peers/_venvs.py robomimic says why)"; exit 1; }; \
	for d in fixture synthetic; do $$py interop/robomimic_check.py $(RM_OUT)/$$d.hdf5 $(RM_OUT)/$$d.npz || exit 1; done

clean:
	rm -rf $(VENV) $(QUICK_VENV) $(DEMO) $(INTEROP)
