# make demo: fresh venv, install, record PushT episodes, print the layout, read every step back.
# make test: fresh venv, install, run the tests.
VENV ?= .venv
PY := $(VENV)/bin/python
DEMO := demo-out
EPISODES ?= 10

.PHONY: demo test venv clean

$(VENV)/.installed: pyproject.toml Makefile
	python3 -m venv $(VENV)
	# torch 2.13.0 is the CPU build; an open range would pull a multi-GB CUDA build
	$(PY) -m pip install -q "torch==2.13.0"
	$(PY) -m pip install -q -e ".[dev,sim,video,torch,zarr]"
	touch $@

venv: $(VENV)/.installed

demo: venv
	rm -rf $(DEMO)
	$(VENV)/bin/trajstore record --env pusht --episodes $(EPISODES) --out $(DEMO)/pusht \
		--reference $(DEMO)/pusht-reference.npz
	$(VENV)/bin/trajstore info $(DEMO)/pusht
	$(VENV)/bin/trajstore verify $(DEMO)/pusht --reference $(DEMO)/pusht-reference.npz

test: venv
	$(PY) -m pytest -q

clean:
	rm -rf $(VENV) $(DEMO)
