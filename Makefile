# The two set-up commands of the README. Both create or reuse .venv and install what they need.
.PHONY: report test
LAB ?= default

report:
	bash scripts/setup.sh
	HF_HUB_OFFLINE=1 .venv/bin/eagle3lab report --lab $(LAB) --out reports/

test:
	bash scripts/setup.sh
	bash scripts/setup_vllm.sh
	bash scripts/test.sh
