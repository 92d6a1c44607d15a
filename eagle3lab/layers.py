"""The layer order of eagle3lab, declared once: a module may import its own layer and those
below it, never one above (tests/test_layers.py parses every import, function-local ones
included, and fails on an upward edge or a cycle, naming it). The longest prefix names a
module's layer, so an engine folder's modules sit at the layer of what they do: its rules at
`engines`, its `/metrics` reader with the sources, its notebook experiments with the experiments.
"""

from __future__ import annotations

LAYERS = (
    ("foundation", ("eagle3lab.errors", "eagle3lab.spec", "eagle3lab.style", "eagle3lab.paths",
                    "eagle3lab.workers", "eagle3lab.glossary", "eagle3lab.chat_templates",
                    "eagle3lab.capture", "eagle3lab.layers", "eagle3lab.engines.base", "eagle3lab.watchdog",
                    "eagle3lab.engine.model", "eagle3lab.sources.observation",
                    "eagle3lab.sources.grammars", "eagle3lab.incident", "eagle3lab.evidence")),
    ("statistics and capture rules", ("eagle3lab.stats", "eagle3lab.predict", "eagle3lab.stepcost",
                                      "eagle3lab.costfit", "eagle3lab.findings",
                                      "eagle3lab.diagnosis", "eagle3lab.boundaries",
                                      "eagle3lab.engines.sglang.capture", "eagle3lab.engines.vllm.capture",
                                      "eagle3lab.engines.lab.capture")),
    ("sources", ("eagle3lab.sources", "eagle3lab.engines.sglang.meta_info",
                 "eagle3lab.engines.vllm.metrics", "eagle3lab.byprompt")),
    ("engines", ("eagle3lab.engines", "eagle3lab.conventions", "eagle3lab.config", "eagle3lab.known_defects",
                 "eagle3lab.wiring", "eagle3lab.patching")),
    ("lab engine", ("eagle3lab.engine",)),
    ("lab", ("eagle3lab.lab",)),
    ("serving", ("eagle3lab.server", "eagle3lab.loadtest", "eagle3lab.sweepinput", "eagle3lab.measurements", "eagle3lab.engines.lab.frontend",
                 "eagle3lab.engines.vllm.reference")),
    ("experiments", ("eagle3lab.experiments", "eagle3lab.engines.vllm.experiments", "eagle3lab.plots",
                     "eagle3lab.plotbase", "eagle3lab.speedplots", "eagle3lab.tokenview",
                     "eagle3lab.widgets", "eagle3lab.loadsweep", "eagle3lab.byprompt_lab", "eagle3lab.report",
                     "eagle3lab.prose", "eagle3lab.postmortem")),
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
