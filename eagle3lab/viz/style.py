"""One style for every eagle3lab figure and table (notebooks, CLI plots, reports).

Colours are the Okabe-Ito palette (Okabe & Ito, "Color Universal Design", 2008), chosen to stay
apart for the common colour-vision deficiencies; tests/test_plots.py checks every pair of role
colours under simulated protanopia, deuteranopia and tritanopia. A figure carries its alt text
(`set_alt`); in a notebook it is displayed as ``<img alt="...">`` (text/html, which nbconvert's
HTML export prefers over the PNG it also carries), so the rendered report says what each figure
shows to a screen reader and wherever the image does not load.
"""

from __future__ import annotations

# Okabe-Ito: black, orange, sky blue, bluish green, yellow, blue, vermillion, reddish purple
OKABE_ITO = ("#000000", "#E69F00", "#56B4E9", "#009E73", "#F0E442", "#0072B2", "#D55E00", "#CC79A7")

# Colour per role, used consistently across plots.
COLORS = {
    "observed": "#0072B2",   # blue
    "model": "#E69F00",      # orange
    "baseline": "#7f7f7f",   # grey: no speculation
    "accepted": "#009E73",   # bluish green
    "rejected": "#D55E00",   # vermillion
    "bonus": "#CC79A7",      # reddish purple
}

# Lines that must be told apart, in order (no yellow: it vanishes on white).
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#000000")

ALT_ATTRIBUTE = "eagle3lab_alt"


def palette(n: int) -> list[str]:
    """n line colours from PALETTE, repeating (with a warning in the alt text's job, not here)."""
    return [PALETTE[i % len(PALETTE)] for i in range(max(n, 1))]


def apply_style() -> None:
    """Set the shared matplotlib/seaborn style and pandas table display (readable in HTML)."""
    import matplotlib
    import pandas as pd

    pd.set_option("display.precision", 3)
    pd.set_option("display.max_colwidth", 160)

    if matplotlib.get_backend().lower() not in ("agg", "module://matplotlib_inline.backend_inline") and not _interactive():
        matplotlib.use("Agg")
    import seaborn as sns

    sns.set_theme(context="notebook", style="whitegrid", palette=list(PALETTE))
    matplotlib.rcParams.update({"figure.figsize": (7.5, 4.2), "figure.dpi": 100,
                                "savefig.dpi": 120, "savefig.bbox": "tight",
                                "axes.titleweight": "bold"})
    register_alt_text()


def _interactive() -> bool:
    try:
        from IPython import get_ipython

        return get_ipython() is not None
    except Exception:
        return False


# --------------------------------------------------------------------------- alt text

def set_alt(fig, text: str):
    """Attach alt text (what the figure shows, in words) to a matplotlib Figure; returns it."""
    setattr(fig, ALT_ATTRIBUTE, " ".join(str(text).split()))
    return fig


def alt_of(fig) -> str | None:
    return getattr(fig, ALT_ATTRIBUTE, None)


def figure_html(fig) -> str | None:
    """``<img alt=... src="data:image/png;base64,...">`` for a figure with alt text, else None
    (IPython then shows only the PNG)."""
    import base64
    import html
    import io

    alt = alt_of(fig)
    if not alt:
        return None
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", bbox_inches="tight", dpi=fig.dpi)
    data = base64.b64encode(buffer.getvalue()).decode()
    return f'<img alt="{html.escape(alt, quote=True)}" src="data:image/png;base64,{data}">'


def register_alt_text() -> None:
    """In IPython: display a Figure that has alt text as text/html ``<img alt=...>`` beside its PNG."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is None:
        return
    from matplotlib.figure import Figure

    shell.display_formatter.formatters["text/html"].for_type(Figure, figure_html)


# --------------------------------------------------------------------------- legibility checks

def relative_luminance(color) -> float:
    """WCAG 2.1 relative luminance of a colour (any matplotlib colour spec)."""
    from matplotlib.colors import to_rgb

    def channel(c):
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (channel(c) for c in to_rgb(color))
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def contrast_ratio(foreground, background) -> float:
    """WCAG 2.1 contrast ratio (1 to 21); body text needs at least 4.5."""
    hi, lo = sorted((relative_luminance(foreground), relative_luminance(background)), reverse=True)
    return (hi + 0.05) / (lo + 0.05)
