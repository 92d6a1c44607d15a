"""The layer order of eagle3lab, declared once: a module may import its own layer and those
below it, never one above (tests/test_layers.py parses every import, function-local ones
included, and fails on an upward edge or a cycle, naming it). The longest prefix names a
module's layer, so an engine folder's modules sit at the layer of what they do: its rules at
`engines`, its `/metrics` reader with the sources, its notebook experiments with the experiments.
"""

from __future__ import annotations

LAYERS = (
    # what every layer shares, and the few modules of higher packages that import nothing above
    ("foundation", ("eagle3lab.errors", "eagle3lab.spec", "eagle3lab.paths", "eagle3lab.workers",
                    "eagle3lab.layers", "eagle3lab.engines.base", "eagle3lab.decoder.forward",
                    "eagle3lab.sources.observation", "eagle3lab.sources.grammars",
                    "eagle3lab.serving.watchdog", "eagle3lab.viz.style",
                    "eagle3lab.wiring.chat_templates", "eagle3lab.wiring.capture",
                    "eagle3lab.report.glossary", "eagle3lab.report.incident",
                    "eagle3lab.report.evidence")),
    ("statistics and capture rules", ("eagle3lab.acceptance", "eagle3lab.cost", "eagle3lab.wiring.boundaries",
                                      "eagle3lab.engines.sglang.sglang_capture",
                                      "eagle3lab.engines.vllm.vllm_capture",
                                      "eagle3lab.engines.lab.lab_capture")),
    ("sources", ("eagle3lab.sources", "eagle3lab.engines.sglang.meta_info", "eagle3lab.engines.vllm.metrics",
                 "eagle3lab.acceptance.byprompt")),
    ("engines", ("eagle3lab.engines", "eagle3lab.wiring", "eagle3lab.known_defects")),
    ("lab engine", ("eagle3lab.decoder",)),
    ("lab", ("eagle3lab.lab",)),
    ("serving", ("eagle3lab.serving", "eagle3lab.engines.lab.frontend", "eagle3lab.engines.vllm.reference")),
    ("experiments", ("eagle3lab.experiments", "eagle3lab.engines.vllm.experiments", "eagle3lab.serving.loadsweep",
                     "eagle3lab.viz", "eagle3lab.report")),
    ("doctor", ("eagle3lab.doctor",)),
    ("front door", ("eagle3lab.commands", "eagle3lab.cli", "eagle3lab.__main__", "eagle3lab")),
)


def layer_of(module: str) -> int:
    """Index in LAYERS of `module` (dotted name): the layer of its longest matching prefix."""
    best, depth = None, -1
    for i, (_, prefixes) in enumerate(LAYERS):
        for p in prefixes:
            if (module == p or module.startswith(p + ".")) and len(p) > depth:
                best, depth = i, len(p)
    if best is None:
        raise KeyError(f"{module} is in no layer of eagle3lab.layers.LAYERS")
    return best
