"""The report figures' canvas: matplotlib's object API on the Agg canvas
(no pyplot, so no global backend or figure state), at one DPI."""

from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

DPI = 110


def blank_figure(width, height, layout=None):
    """A matplotlib Figure of `width` x `height` inches at the report's DPI,
    drawn off-screen (no pyplot state)."""
    fig = Figure(figsize=(width, height), dpi=DPI, layout=layout)
    FigureCanvasAgg(fig)
    return fig


def save(fig, path):
    """Saves `fig` (None: nothing to show) and says whether it did."""
    if fig is None:
        return False
    fig.savefig(path, dpi=DPI)
    return True
