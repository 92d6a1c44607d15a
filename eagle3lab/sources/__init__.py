"""Sources of acceptance observations: server logs, per-request `meta_info`, the lab engine's steps, each turned into one `Observation`. Not: an engine's own endpoint readers (engines/<name>).

May import: spec, errors, viz.style, acceptance, wiring; never engines or above (an engine's own
reader, like vLLM's /metrics, lives in its folder under eagle3lab/engines/).
"""

from eagle3lab.sources.observation import Observation

__all__ = ["Observation"]
