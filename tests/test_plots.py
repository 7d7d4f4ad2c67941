"""The figures as a reader sees them: legible on a phone, legends off the data, 2x images.

The book's column is about 717 CSS px wide on a desktop and 360 px on a phone (a 400 px
screen); an image is scaled down to it, never up. Each figure function runs on small
synthetic curves shaped like a grokking run.
"""
from __future__ import annotations

import base64
import importlib
import io
import itertools
import types
from types import SimpleNamespace

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from matplotlib.text import Text  # noqa: E402
from matplotlib.transforms import Bbox  # noqa: E402
from PIL import Image  # noqa: E402

from grokkit import plots  # noqa: E402
from grokkit.kernels.run import log_schedule  # noqa: E402

PHONE, DESKTOP = 360, 717  # CSS px, the book's column
MIN_PX = 8                 # smallest legible text on screen, CSS px
T1, T2 = 60.0, 1.0e5


def trajectory(n: int = 100, s: int = 5, steps: int = 200_000, seed: int = 0):
    """The fields of a :class:`grokkit.kernels.run.Trajectory` that the figures read, for one
    configuration: memorization near T1, generalization near T2."""
    rng = np.random.default_rng(seed)
    t = log_schedule(steps).astype(float)
    u = np.log10(np.maximum(t, 1))
    memorize = 1 / (1 + np.exp(-4 * (u - np.log10(T1))))  # 0 -> 1 around T1
    generalize = 1 / (1 + np.exp(-12 * (u - np.log10(T2))))  # 0 -> 1 around T2
    train = 0.7 * (1 - memorize) + 4e-4
    test = 0.9 * (1 - generalize) + 3e-4
    ratio = 10 ** (-3.5 + 3.7 * memorize)
    l1 = 0.3 + 0.7 * memorize * (1 - generalize)
    b_star = np.zeros(n)
    support = rng.choice(n, s, replace=False)
    b_star[support] = rng.uniform(-0.1, 0.1, s)
    noise = rng.normal(0, 0.01, n)
    b = (noise[None, :] * memorize[:, None] * (1 - generalize[:, None])
         + b_star[None, :] * (0.3 * memorize[:, None] + 0.7 * generalize[:, None]))
    traj = SimpleNamespace(steps=t, train_error=train[None], test_error=test[None],
                           grad_ratio=ratio[None], l1=l1[None], b=b[None])
    return traj, b_star


def matrix_trajectory(G: int = 1, n: int = 10, steps: int = 200_000, seed: int = 0):
    """The fields of a :class:`grokkit.kernels.matrix.MatrixTrajectory` that the figures read:
    G configurations of a 10 x 10 rank-2 run, memorization near T1, generalization near T2."""
    rng = np.random.default_rng(seed)
    sparse, _ = trajectory(steps=steps, seed=seed)
    t = sparse.steps
    u = np.log10(np.maximum(t, 1))
    generalize = 1 / (1 + np.exp(-12 * (u - np.log10(T2))))
    spurious = np.sort(rng.uniform(0.1, 1.0, n - 2))[::-1]
    sv = np.concatenate([np.broadcast_to([9.5, 3.2], (len(t), 2)),
                         spurious[None, :] * (1 - generalize[:, None]) + 1e-5], axis=1)
    scale = np.logspace(0, 1, G)[:, None]
    return SimpleNamespace(steps=t, train_error=sparse.train_error * scale, test_error=sparse.test_error * scale,
                           grad_ratio=np.repeat(sparse.grad_ratio, G, 0), nuclear=np.repeat(sv.sum(1)[None], G, 0),
                           singular_values=np.repeat(sv[None], G, 0))


def make_time_against_ab(title=None):
    ab = np.logspace(-6, -3, 7)
    t2 = 0.1 / ab * np.exp(np.linspace(-0.3, 0.3, 7))
    return plots.time_against_ab(ab, t2, 0.03 / ab, 3 * ab + 1e-4, title=title)


def make_mechanism():
    traj, b_star = trajectory()
    return plots.mechanism(traj, T1, T2, b_star)


def make_matrix_mechanism():
    A_star = np.diag([9.5, 3.2] + [0.0] * 8)
    return plots.mechanism(matrix_trajectory(), T1, T2, A_star)


def make_error_grid():
    alpha, beta = np.meshgrid([0.1, 0.5, 1.0, 1.5, 2.0, 3.0], [1e-6, 1e-4, 1e-2], indexing="ij")
    traj = matrix_trajectory(G=alpha.size)
    return plots.error_grid(traj, beta.ravel(), r"$\beta_*$", panel=alpha.ravel(), panel_label=r"$\alpha$",
                            t2=np.full(alpha.size, T2))


def make_error_grid_one_panel():
    tau = np.linspace(0, 1, 11)
    return plots.error_grid(matrix_trajectory(G=tau.size), tau, r"$\tau$")


def make_against():
    tau = np.linspace(0, 1, 11)
    t2 = 1.2e3 * 10 ** (1.2 * (1 - tau))
    t2[:2] = np.nan  # never generalized in the run: a gap
    return plots.against(tau, {"$t_1$ (threshold)": np.ones(11), "$t_1$ (plateau)": 300 + 50 * tau,
                               "$t_2$ (threshold)": t2, "$t_2$ (plateau)": 1.1 * t2},
                         {r"$e_{\mathrm{train}}(t_1)$": 6e-4 * np.ones(11), "final recovery error": 2e-3 - 1.4e-3 * tau},
                         xlabel=r"$\tau$", left_label="step", right_label="relative error")


def make_against_one_axis():
    return plots.against([40, 50, 60, 70, 80], {"smallest $N$": [np.nan, 70, 60, 50, 50]}, xlabel="$N$",
                         left_label="samples", logy=False, title="a title")


def make_bound_check():
    traj, _ = trajectory()
    curves = {r"$\|P_V(b^{(t)}-\hat b)\|_2$": traj.train_error[0] * 0.1,
              r"$\|b^{(t)}-\hat b\|_2$": traj.l1[0] * 0.2,
              r"$\|b^{(t)}-b^*\|_2$": traj.test_error[0] * 0.15}
    return plots.bound_check(traj.steps, curves, 2.7e-3, 55.0)


def make_delay_scaling():
    ab = np.logspace(-5.5, -3, 6)
    return plots.delay_scaling(ab, 0.12 / ab * np.exp(np.linspace(-0.2, 0.3, 6)), 0.03 / ab)


FIGURES = {"time_against_ab": make_time_against_ab, "time_against_ab-title": lambda: make_time_against_ab("a title"),
           "mechanism": make_mechanism, "mechanism-matrix": make_matrix_mechanism,
           "mechanism-no-ratio": lambda: plots.mechanism(matrix_trajectory(), 1.0, T2, np.diag([9.5, 3.2] + [0.0] * 8),
                                                         ratio=False),
           "error_grid": make_error_grid, "error_grid-one-panel": make_error_grid_one_panel,
           "against": make_against, "against-one-axis": make_against_one_axis,
           "bound_check": make_bound_check,
           "delay_scaling": make_delay_scaling}


@pytest.fixture(scope="module", params=list(FIGURES))
def fig(request):
    figure = FIGURES[request.param]()
    figure.canvas.draw()
    yield figure
    plt.close(figure)


def shown_text(fig):
    """Every text artist that is drawn: visible, not empty."""
    return [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]


def on_screen_px(fig, fontsize: float, column: int) -> float:
    """CSS px of ``fontsize`` pt when the figure is shown in a ``column`` px wide column:
    at its natural width (width in inches times dpi) or narrower, never wider."""
    natural = fig.get_figwidth() * fig.dpi
    shown = min(column, natural)
    return fontsize * shown / (fig.get_figwidth() * 72)


def test_text_is_legible_on_a_phone(fig):
    texts = shown_text(fig)
    assert texts
    small = {t.get_text(): round(on_screen_px(fig, t.get_fontsize(), PHONE), 1)
             for t in texts if on_screen_px(fig, t.get_fontsize(), PHONE) < MIN_PX}
    assert not small, f"text under {MIN_PX} px in a {PHONE} px column: {small}"


def test_figure_is_not_blown_up_on_a_desktop(fig):
    # shown at its natural size: the column is at least as wide as the figure
    assert fig.get_figwidth() * fig.dpi <= DESKTOP


def test_all_figures_share_one_width():
    widths = set()
    for make in FIGURES.values():
        figure = make()
        widths.add(figure.get_figwidth())
        plt.close(figure)
    assert widths == {plots.WIDTH}


def legends(fig):
    return [*fig.legends, *(ax.get_legend() for ax in fig.axes if ax.get_legend() is not None)]


def area(a: Bbox, b: Bbox) -> float:
    both = Bbox.intersection(a, b)
    return 0.0 if both is None else both.width * both.height


def test_legends_sit_outside_the_data(fig):
    renderer = fig.canvas.get_renderer()
    found = legends(fig)
    assert found, "every figure has a legend"
    for legend in found:
        box = legend.get_window_extent(renderer)
        assert fig.bbox.containsx(box.x0) and fig.bbox.containsx(box.x1), "legend cut at the sides"
        assert fig.bbox.containsy(box.y0) and fig.bbox.containsy(box.y1), "legend cut at the top or bottom"
        for ax in fig.axes:  # twins included: their extent is the same data area
            assert area(box, ax.get_window_extent(renderer)) == 0.0, (
                f"legend {[t.get_text() for t in legend.get_texts()]} over the data of {ax}")


def test_twin_axes_share_one_legend(fig):
    renderer = fig.canvas.get_renderer()
    places = [tuple(np.round(ax.get_window_extent(renderer).bounds, 3)) for ax in fig.axes]
    for place in set(places):  # a panel and its twins
        panel = [ax for ax, other in zip(fig.axes, places) if other == place]
        assert sum(ax.get_legend() is not None for ax in panel) <= 1, "one merged legend per panel"


def labels(fig):
    """(name, extent) of every label drawn outside a legend: tick labels, axis labels,
    titles, annotations; and each legend as one box."""
    renderer = fig.canvas.get_renderer()
    boxes = []

    def add(text):
        if text.get_visible() and text.get_text().strip():
            boxes.append((text.get_text(), text.get_window_extent(renderer)))

    for ax in fig.axes:
        for text in (ax.title, *ax.texts):
            add(text)
        data = ax.get_window_extent(renderer)
        for axis, along in ((ax.xaxis, "intervalx"), (ax.yaxis, "intervaly")):
            if not axis.get_visible():  # the shared x axis of a twin
                continue
            add(axis.label)
            lo, hi = getattr(data, along)
            for label in axis.get_ticklabels(which="both"):
                # ticks outside the view limits are kept but not drawn
                centre = label.get_window_extent(renderer).get_points().mean(axis=0)
                if lo - 1 <= centre[0 if along == "intervalx" else 1] <= hi + 1:
                    add(label)
    for legend in legends(fig):
        boxes.append(("legend", legend.get_window_extent(renderer)))
    return boxes


def test_labels_do_not_overlap(fig):
    clashes = [(a, b) for (a, box_a), (b, box_b) in itertools.combinations(labels(fig), 2)
               if area(box_a, box_b) > 1.0]
    assert not clashes, f"overlapping labels: {clashes}"


def test_notebooks_show_2x_png_at_natural_width(monkeypatch):
    """What a notebook kernel shows: grokkit.plots, imported inside IPython, sets the PNG
    formatter of figures. A phone (or any 2x screen) gets 2 image pixels per CSS px, and the
    metadata gives the width only (myst-nb writes it into the <img> style; a fixed height
    there would squash the image when the column narrows it)."""
    IPython = pytest.importorskip("IPython")
    from IPython.core.formatters import DisplayFormatter

    shell = SimpleNamespace(display_formatter=DisplayFormatter())
    monkeypatch.setattr(IPython, "get_ipython", lambda: shell)
    importlib.reload(plots)  # as imported in a kernel
    try:
        figure = make_delay_scaling()
        data, metadata = shell.display_formatter.format(figure)
        plt.close(figure)
    finally:
        monkeypatch.undo()
        importlib.reload(plots)
    assert "image/png" in data, f"a notebook shows no PNG of a figure, only {sorted(data)}"
    image = Image.open(io.BytesIO(base64.b64decode(data["image/png"])))
    shown = metadata.get("image/png", {})
    assert "width" in shown and "height" not in shown, shown
    assert shown["width"] == round(figure.get_figwidth() * figure.dpi) <= DESKTOP
    assert image.width >= 2 * shown["width"], (image.size, shown)


def test_savefig_writes_2x():
    figure = make_delay_scaling()
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png")
    plt.close(figure)
    assert Image.open(buffer).width >= 2 * figure.get_figwidth() * figure.dpi


def test_error_grid_draws_the_rows_asked_for_with_their_limits():
    steps = np.array([0, 1, 10, 100])
    traj = types.SimpleNamespace(steps=steps, train_loss=np.full((4, 4), 0.5), test_loss=np.full((4, 4), 0.7))
    fig = plots.error_grid(traj, [1e-3, 1e-2, 1e-3, 1e-2], "b", panel=[1.0, 1.0, 2.0, 3.0], panel_label="a",
                              rows=[True, True, False, True], curves=("train_loss", "test_loss"),
                              labels=("train", "test"), ylabel="MSE", yscale="linear", ylim=(0, 1))
    panels = [ax for ax in fig.axes if ax.get_title()]
    assert [ax.get_title() for ax in panels] == ["a = 1", "a = 3"]  # panel 2 held only an undrawn row
    assert [len(ax.lines) for ax in panels] == [4, 2] and panels[0].get_ylim() == (0, 1)


def test_error_grid_draws_the_control_in_grey_in_its_panels():
    steps = np.array([0, 1, 10, 100])
    traj = types.SimpleNamespace(steps=steps, train_loss=np.full((3, 4), 0.5), test_loss=np.full((3, 4), 0.7))
    control = types.SimpleNamespace(steps=steps, train_loss=np.full((3, 4), 0.1), test_loss=np.full((3, 4), 0.9))
    fig = plots.error_grid(traj, [1e-3, 1e-2, 1e-3], "b", panel=[1.0, 1.0, 2.0], panel_label="a",
                           curves=("train_loss", "test_loss"), control=control,
                           control_panel=[1.0, 2.0, 1.0], control_rows=[True, True, False])
    panels = [ax for ax in fig.axes if ax.get_title()]
    grey = [[line for line in ax.lines if line.get_color() == "0.6"] for ax in panels]
    assert [len(g) for g in grey] == [2, 2]  # the third control row is not drawn
    assert [line.get_linestyle() for line in grey[0]] == ["-", "--"]
    assert list(grey[0][1].get_ydata()) == [0.9] * 3  # the test curve, from step 1 (a log axis)
    assert "$\\beta = 0$" in [t.get_text() for t in fig.legends[0].get_texts()]
