"""eagle3lab: find out why EAGLE-3 speculative decoding does not pay off.

The library behind the notebooks, one package per concern (README "Layout"):
engines (what SGLang / vLLM / the lab server run for your flags), wiring (which hidden states feed
the draft, the embedding-capture patch), sources (logs, meta_info), acceptance (statistics,
predictions, diagnosis), cost (what a speculative step costs), decoder (the lab's own speculative
decoder), lab (targets and drafts built here), serving (launch, benchmark, sweep), experiments,
viz, report (the post-mortem), doctor, known_defects, commands (the CLI).

The root holds only what every layer shares (errors, spec, paths, workers, layers) and the entry
points (cli, __main__). eagle3lab/layers.py declares the layer order; tests/test_layers.py checks
it. This package's root registers `engines.effective` so `SpecConfig.resolve` works.
"""

__version__ = "0.1.0"

from eagle3lab.errors import EagleLabError  # noqa: E402,F401
from eagle3lab.engines import effective as _config  # noqa: E402,F401  (registers SpecConfig.resolve in spec)
