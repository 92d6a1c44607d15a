# The two set-up commands of the README. Both create or reuse .venv and install what they need
# (`make report BACKEND=vllm` also .venv-vllm, vLLM's CPU build).
.PHONY: report test
LAB ?= default
BACKEND ?= lab

report:
	bash scripts/setup.sh
	if [ "$(BACKEND)" = vllm ]; then bash scripts/setup_vllm.sh; fi
	HF_HUB_OFFLINE=1 .venv/bin/eagle3lab report --lab $(LAB) --backend $(BACKEND) --out reports/

test:
	bash scripts/setup.sh
	bash scripts/setup_vllm.sh
	bash scripts/test.sh
