"""The post-mortem's one figure: each hypothesis' accept length with its interval, against the
incident's reported range, embedded in the page as a PNG with alt text saying what it shows."""

from __future__ import annotations

import base64
import io


def hypotheses_figure(rows: list[dict], low: float, high: float) -> str:
    """An `<img>` tag: one row per hypothesis (its accept length and 95 % interval, the lab
    measured in this run), the incident's reported range shaded. Empty without rows."""
    rows = [r for r in rows if r["_row"].get("accept_length") is not None]
    if not rows:
        return ""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from eagle3lab.viz.style import apply_style

    apply_style()
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    from eagle3lab.report.postmortem.tables import short

    fig, ax = plt.subplots(figsize=(7.5, 0.42 * len(rows) + 1.9))
    ax.axvspan(low, high, color="#bbbbbb", alpha=0.6, lw=0)
    labels = []
    for i, r in enumerate(reversed(rows)):
        point = float(r["_row"]["accept_length"])
        ci = r["_row"].get("accept_length_ci95") or [point, point]
        fits = r["_verdict"] == "consistent"
        colour = "#0072B2" if fits else "#D55E00"  # Okabe-Ito blue / vermillion: safe for colour-blind readers
        ax.errorbar([point], [i], xerr=[[point - ci[0]], [ci[1] - point]], fmt="o" if fits else "s",
                    color=colour, capsize=3, ms=5)
        labels.append(short(r["name"]) + ("" if r["name"].startswith("healthy") else f" [{r['name']}]"))
    ax.set_yticks(range(len(labels)), labels, fontsize=8)
    ax.set_xlabel("accept length at 5/1/6 (tokens per verify step, bonus included; lab, this run)")
    ax.set_ylim(-0.6, len(labels) - 0.4)
    handles = [Patch(color="#bbbbbb", alpha=0.6, label="incident's reported range"),
               Line2D([], [], color="#0072B2", marker="o", ls="", label="not excluded"),
               Line2D([], [], color="#D55E00", marker="s", ls="", label="excluded or reference")]
    # below the axes, so that no label covers a marker or an error bar
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.32 if len(rows) < 6 else -0.22),
              ncol=3, fontsize=8, frameon=False)
    ax.set_title("Which hypotheses the incident's accept length excludes", fontsize=10)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    fits = [short(r["name"]) for r in rows if r["_verdict"] == "consistent" and not r["name"].startswith("healthy")]
    n_hyp = sum(not r["name"].startswith("healthy") for r in rows)
    alt = (f"Accept length at 5/1/6 with 95 % intervals for {n_hyp} lab hypotheses and a healthy reference against "
           "the incident's "
           f"reported range {low:.2f} to {high:.2f}; not excluded: {'; '.join(fits) or 'none'}.")
    data = base64.b64encode(buf.getvalue()).decode()
    return f'<img src="data:image/png;base64,{data}" alt="{alt}" style="max-width:100%">'
