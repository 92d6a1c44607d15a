"""eagle3lab: find out why EAGLE-3 speculative decoding does not pay off.

The library behind the notebooks: log parsing (`logs`), effective speculative
configuration (`config`), hidden-state wiring (`boundaries`, `conventions`, `capture`, `wiring`),
a tiny real lab (`lab`), a reference speculative decoder and server (`engine`),
server control and benchmarks (`server`, `bench`), the SGLang embedding-capture
patch (`patching`), acceptance statistics (`stats`), models (`predict`) and diagnosis
(`diagnosis`, `findings`), plots and widgets (`plots`, `widgets`).

The rooms, bottom up (eagle3lab/layers.py declares the order; tests/test_layers.py checks it):
foundation (errors, spec, paths, style, workers), statistics and capture rules (+ boundaries,
each engine's capture.py), sources, engines (+ conventions, config, known_defects, wiring,
patching), the lab engine (`engine`), the lab (`lab`), serving (server, loadtest), experiments (+ plots, report, prose), doctor, the front door (cli, commands).
This package's root may import any of them (it registers `config` so `SpecConfig.resolve` works).
"""

__version__ = "0.1.0"

from eagle3lab.errors import EagleLabError  # noqa: E402,F401
from eagle3lab.engines import effective as _config  # noqa: E402,F401  (registers SpecConfig.resolve in spec)
