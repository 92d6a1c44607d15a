"""Sources of acceptance observations: server logs, per-request `meta_info`, a metrics endpoint,
the lab engine. Each source module turns what it reads into one `Observation`, so analysis,
diagnosis, notebooks and the CLI never care where the numbers came from.

May import: spec, errors, style, analysis, conventions; never engines or above (an engine's own
reader, like vLLM's /metrics, lives in its folder under eagle3lab/engines/).
"""

from eagle3lab.sources.observation import Observation

__all__ = ["Observation"]
