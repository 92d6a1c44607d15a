"""One style for every eagle3lab figure and table (notebooks, CLI plots, reports)."""

from __future__ import annotations

# Colour per role, used consistently across plots.
COLORS = {
    "observed": "#1f77b4",
    "model": "#ff7f0e",
    "baseline": "#7f7f7f",
    "accepted": "#2ca02c",
    "rejected": "#d62728",
    "bonus": "#9467bd",
}


def apply_style() -> None:
    """Set the shared matplotlib/seaborn style and pandas table display (readable in HTML)."""
    import matplotlib
    import pandas as pd

    pd.set_option("display.precision", 3)
    pd.set_option("display.max_colwidth", 160)

    if matplotlib.get_backend().lower() not in ("agg", "module://matplotlib_inline.backend_inline") and not _interactive():
        matplotlib.use("Agg")
    import seaborn as sns

    sns.set_theme(context="notebook", style="whitegrid", palette="colorblind")
    matplotlib.rcParams.update({"figure.figsize": (7.5, 4.2), "figure.dpi": 100,
                                "savefig.dpi": 120, "savefig.bbox": "tight",
                                "axes.titleweight": "bold"})


def _interactive() -> bool:
    try:
        from IPython import get_ipython

        return get_ipython() is not None
    except Exception:
        return False
