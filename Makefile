# The two set-up commands of the README. Both create or reuse .venv and install what they need
# (`make report BACKEND=vllm` also .venv-vllm, vLLM's CPU build).
.PHONY: report test
LAB ?= smollm2
BACKEND ?= lab

report:
	bash scripts/setup.sh
	if [ "$(BACKEND)" = vllm ]; then bash scripts/setup_vllm.sh; fi
	HF_HUB_OFFLINE=1 .venv/bin/eagle3lab report --lab $(LAB) --backend $(BACKEND) --out reports/

# The two venvs install side by side (mostly unpacking PyTorch: disk, not CPU); both must succeed.
test:
	bash scripts/setup.sh & main=$$!; bash scripts/setup_vllm.sh; vllm=$$?; wait $$main && [ $$vllm -eq 0 ]
	bash scripts/test.sh
