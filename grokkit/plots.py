r"""Figures, panel for panel as in the paper, with the paper's symbols on the axes.

One vocabulary for every page, sized for the book's column (about 717 CSS px on a desktop,
360 px on a phone; images are only ever scaled down to it):

* every figure is :data:`WIDTH` = 5.5 in wide, so text of ``p`` pt is ``p * 360 / 396`` px on
  a phone: the smallest text, :data:`SMALL` = 10 pt (tick labels, legends), is 9.1 px there;
* :data:`DPI` = 110 CSS px per inch at natural size: 605 px, narrower than the desktop column,
  which therefore shows the figure at its natural size (10 pt = 15.3 px), never blown up;
* notebooks show a PNG of :data:`RESOLUTION` = 2 pixels per CSS px (retina), with its display
  width as metadata (see :func:`png`); ``savefig`` writes 2x too;
* layout is constrained and legends sit outside the data (:func:`legend_outside`): below a
  single-panel figure, above each panel of a stacked one, one merged legend for a twin-axis panel.

Make a new figure with :func:`new_figure` and finish it with :func:`legend_outside`.
"""
from __future__ import annotations

import base64
import io

import matplotlib.pyplot as plt
import numpy as np
from matplotlib.figure import Figure
from matplotlib.transforms import ScaledTranslation

WIDTH = 5.5          # in, every figure
DPI = 110            # CSS px per inch at natural size: WIDTH * DPI = 605 px
RESOLUTION = 2       # image pixels per CSS px
FONT, SMALL = 11, 10  # pt: labels and titles; tick labels and legends
PANEL_HEIGHT = 2.6   # in, one panel of a stacked figure (without its legend)

plt.rcParams.update({
    "figure.figsize": (WIDTH, 0.7 * WIDTH), "figure.dpi": DPI, "savefig.dpi": RESOLUTION * DPI,
    "figure.constrained_layout.use": True,
    "font.size": FONT, "axes.labelsize": FONT, "axes.titlesize": FONT,
    "xtick.labelsize": SMALL, "ytick.labelsize": SMALL, "legend.fontsize": SMALL,
    "legend.frameon": False, "legend.handlelength": 2.5, "legend.columnspacing": 1.5,
    "axes.grid": True, "grid.alpha": 0.3, "axes.spines.top": False,
})

TRAIN, TEST, EXTRA = "tab:blue", "tab:orange", "tab:green"


def png(fig: Figure) -> tuple[bytes, dict[str, int]]:
    """The PNG a notebook shows for ``fig``, and its display metadata.

    The whole figure (constrained layout already fits it, no tight crop) at
    :data:`RESOLUTION` pixels per CSS px, with ``{"width": natural width in CSS px}``. Only the
    width: myst-nb writes output metadata into the ``<img>`` style, and a fixed height there
    would stay when the theme's ``max-width: 100%`` narrows the image on a phone, squashing it
    (IPython's own ``"retina"`` format gives both)."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=RESOLUTION * fig.dpi,
                facecolor=fig.get_facecolor(), edgecolor=fig.get_edgecolor())
    return buffer.getvalue(), {"width": round(fig.get_figwidth() * fig.dpi)}


def _png_base64(fig: Figure):
    if not fig.axes and not fig.lines:  # as IPython: nothing for an empty figure
        return None
    data, metadata = png(fig)
    return base64.b64encode(data).decode("ascii"), metadata


def _show_in_ipython() -> None:
    """Inside IPython (a notebook kernel), display figures with :func:`png`."""
    try:
        from IPython import get_ipython
    except ImportError:
        return
    shell = get_ipython()
    if shell is None:
        return
    try:  # first: loading the inline backend resets the figure formatters
        import matplotlib_inline.backend_inline  # noqa: F401
    except ImportError:
        pass
    shell.display_formatter.formatters["image/png"].for_type(Figure, _png_base64)


_show_in_ipython()


def new_figure(rows: int = 1, height: float | None = None, sharex: bool = True):
    """A figure of the vocabulary: :data:`WIDTH` wide, ``rows`` panels stacked (sharing the
    x axis), constrained layout. Returns ``(fig, ax)`` for one row, ``(fig, axes)`` otherwise."""
    if height is None:
        height = 0.7 * WIDTH if rows == 1 else PANEL_HEIGHT * rows + 0.3
    fig, axes = plt.subplots(rows, 1, figsize=(WIDTH, height), sharex=sharex, layout="constrained")
    if rows > 1:  # room between a panel and the legend of the next one, which sits above that
        fig.get_layout_engine().set(hspace=0.05)
    return fig, axes


def twin(ax, color: str, label: str):
    """A right-hand y axis for ``ax`` in ``color``, labelled ``label``, without a grid."""
    right = ax.twinx()
    right.set_ylabel(label, color=color)
    right.grid(False)
    return right


def legend_outside(fig, axes, ncols: int = 2, panel=None):
    r"""One legend for the labelled artists of ``axes`` (a panel and its twins: merged, the
    first of each label kept), outside the data.

    With ``panel=None`` it is the figure's legend, below everything
    (``loc="outside lower center"``, which constrained layout makes room for). With ``panel``
    an axes of a stacked figure, it sits above that panel, clear of the row above the axes
    where :func:`mark_times` writes :math:`t_1`, :math:`t_2` and :math:`\Delta t`. Returns the
    legend, or None when nothing is labelled."""
    handles, labels = [], []
    for ax in np.atleast_1d(axes):
        for handle, label in zip(*ax.get_legend_handles_labels()):
            if label not in labels:
                handles.append(handle)
                labels.append(label)
    if not handles:
        return None
    if panel is None:
        return fig.legend(handles, labels, loc="outside lower center", ncols=ncols)
    return panel.legend(handles, labels, loc="lower center", bbox_to_anchor=(0.5, 1.0),
                        ncols=ncols, borderaxespad=1.6)


def mark_times(ax, t1: float | None, t2: float | None, arrow: bool = True) -> None:
    r"""Vertical lines at :math:`t_1` (dashed) and :math:`t_2` (dotted), labelled in a row just
    above the axes, :math:`t_1` left of its line and :math:`t_2` right of its line, with a
    :math:`\Delta t` arrow between them in that row if ``arrow``: nothing written over the data."""
    def given(t):
        return t is not None and np.isfinite(t) and t > 0

    row = ax.get_xaxis_transform()  # x: data, y: axes fraction
    for t, label, ls, side in ((t1, "$t_1$", "--", -1), (t2, "$t_2$", ":", 1)):
        if given(t):
            ax.axvline(t, color="k", ls=ls, lw=1)
            ax.annotate(label, (t, 1.0), xycoords=row, xytext=(2 * side, 2), textcoords="offset points",
                        ha="left" if side > 0 else "right", va="bottom")
    if arrow and given(t1) and given(t2):
        middle = row + ScaledTranslation(0, 7 / 72, ax.figure.dpi_scale_trans)
        ax.annotate("", xy=(t2, 1.0), xytext=(t1, 1.0), xycoords=middle, textcoords=middle,
                    arrowprops={"arrowstyle": "<->", "color": "k", "shrinkA": 0, "shrinkB": 0})
        ax.annotate(r"$\Delta t$", (np.sqrt(t1 * t2), 1.0), xycoords=row, xytext=(0, 2),
                    textcoords="offset points", ha="center", va="bottom",
                    bbox={"fc": "white", "ec": "none", "pad": 2})


def _symbols(traj) -> dict[str, str]:
    """The paper's symbols for a sparse (:class:`grokkit.kernels.Trajectory`) or a matrix
    (:class:`grokkit.kernels.matrix.MatrixTrajectory`) run."""
    if hasattr(traj, "singular_values"):
        return {"train": r"$\|\mathcal{X}(A^{(t)})-y^*\|_2/\|y^*\|_2$", "test": r"$\|A^{(t)}-A^*\|_F/\|A^*\|_F$",
                "ratio": r"$\|\beta_* h(A^{(t)})\|_F/\|G_{\beta_2}(A^{(t)})\|_F$",
                "norm": r"$\|A^{(t)}\|_*$", "target": r"$\|A^*\|_*$"}
    return {"train": r"$\|\tilde Xb^{(t)}-y^*\|_2/\|y^*\|_2$", "test": r"$\|b^{(t)}-b^*\|_2/\|b^*\|_2$",
            "ratio": r"$\|\beta_1 h(b^{(t)})\|_2/\|G_{\beta_2}(b^{(t)})\|_2$",
            "norm": r"$\|b^{(t)}\|_1$", "target": r"$\|b^*\|_1$"}


def _logged(traj):
    """The recorded steps t >= 1 (a log axis has no room for the start, step 0) and their mask."""
    keep = np.asarray(traj.steps) >= 1
    return np.asarray(traj.steps)[keep], keep


def success_curves(ax, curves: dict, xlabel: str, ylabel: str = "success rate") -> None:
    r"""Success rates against a sample size, one step curve per label (the phase transitions of
    exact recovery, App. D.4): ``curves`` maps a label to ``(x, rate)`` with x increasing, the rate
    at x holding until the next x."""
    for label, (x, rate) in curves.items():
        ax.step(x, rate, where="post", label=label)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_ylim(-0.04, 1.04)


def _norm(values, log: bool):
    from matplotlib.colors import LogNorm, Normalize

    values = np.asarray(values, dtype=float)
    finite = values[np.isfinite(values) & (values > 0 if log else True)]
    return (LogNorm if log else Normalize)(finite.min(), finite.max())


def heat_map(ax, x, y, values, *, xlabel: str, ylabel: str, label: str, log: bool = True, cmap: str = "viridis"):
    r"""``values`` (len(y), len(x)) over a grid of x (columns) and y (rows), each cell centred on its
    grid point (grids need not be uniform), with a colour bar labelled ``label`` (log scale when
    ``log``): e.g. the recovery error over (s, N) of Figure 7. A grid of at most 12 values gets a
    tick at each. Returns the mesh."""
    def edges(v):
        v = np.asarray(v, dtype=float)
        mid = (v[1:] + v[:-1]) / 2 if v.size > 1 else np.array([])
        first, last = (v[0] - (mid[0] - v[0]), v[-1] + (v[-1] - mid[-1])) if v.size > 1 else (v[0] - 0.5, v[0] + 0.5)
        return np.concatenate([[first], mid, [last]])

    values = np.asarray(values, dtype=float)
    mesh = ax.pcolormesh(edges(x), edges(y), values, norm=_norm(values, log), cmap=cmap)
    for values_, set_ticks in ((x, ax.set_xticks), (y, ax.set_yticks)):
        if len(values_) <= 12:
            set_ticks(values_)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.grid(False)
    ax.figure.colorbar(mesh, ax=ax, label=label)
    return mesh


def curve_family(ax, x, curves, values, *, label: str, log: bool = False, **style) -> None:
    r"""Each row of ``curves`` (K, M) against ``x`` (M,), coloured by its value in ``values`` (K,)
    (viridis) with a colour bar labelled ``label`` (log scale when ``log``): a family of curves
    indexed by a parameter, e.g. one per N (Figure 6a). ``style`` goes to ``ax.plot``."""
    norm = _norm(values, log)
    for row, value in zip(np.asarray(curves, dtype=float), np.asarray(values, dtype=float)):
        ax.plot(x, row, color=plt.cm.viridis(norm(value)), **style)
    ax.figure.colorbar(plt.cm.ScalarMappable(norm=norm, cmap=plt.cm.viridis), ax=ax, label=label)


def error_curves(ax, traj, g: int = 0, label_prefix: str = "") -> None:
    """Relative training (solid) and recovery (dashed) errors of configuration ``g`` against t
    (log-log, from step 1), for a sparse or a matrix run."""
    (t, keep), sym = _logged(traj), _symbols(traj)
    ax.loglog(t, traj.train_error[g][keep], color=TRAIN, label=label_prefix + "train " + sym["train"])
    ax.loglog(t, traj.test_error[g][keep], color=TEST, ls="--", label=label_prefix + "recovery " + sym["test"])
    ax.set_xlabel("$t$")
    ax.set_ylabel("relative error")


def error_scales(traj, target: np.ndarray, g: int = 0, t1: float | None = None, t2: float | None = None):
    r"""A sparse run's relative errors on a linear (top) and a log (bottom) y axis, with
    :math:`\|b^{(t)}\|_2` (top) and :math:`\|b^{(t)}\|_1` (bottom) on twin axes (dash-dotted) against the
    target's (``target`` :math:`b^*`, dotted), log x, :math:`t_1`, :math:`t_2` marked where given (Figures 25 and
    33: a drop that looks like grokking on the linear axis can end far above 0 on the log one)."""
    fig, axes = new_figure(2)
    t, keep = _logged(traj)
    target = np.asarray(target, dtype=float)
    for ax, scale, p, norms in zip(axes, ("linear", "log"), (2, 1), (traj.l2, traj.l1)):
        error_curves(ax, traj, g)
        ax.set_yscale(scale)
        right = twin(ax, EXTRA, f"$\\ell_{p}$ norm")
        right.plot(t, norms[g][keep], color=EXTRA, ls="-.", label=f"$\\|b^{{(t)}}\\|_{p}$")
        right.axhline(np.linalg.norm(target, p), color=EXTRA, ls=":", lw=1, label=f"$\\|b^*\\|_{p}$")
        right.set_yscale(scale)
        ax.set_zorder(right.get_zorder() + 1)  # the errors over the norm, which can coincide on a linear axis
        ax.patch.set_visible(False)
        legend_outside(fig, [ax, right], panel=ax)
        mark_times(ax, t1, t2)
        ax.set_xlabel("")
    axes[-1].set_xlabel("$t$")
    return fig


def time_against_ab(alpha_beta, t2, t2_pred, err_t2, *, penalty: str = r"\beta_1",
                    prediction: str = r"\|\hat b\|_\infty", error: str = r"\|b^{(t_2)}-b^*\|_2",
                    title: str | None = None):
    r"""Time against :math:`\alpha\beta` (Figures 1 and 5): :math:`t_2` (circles) and its
    prediction ``prediction``/(αβ) (stars) on the left axis; the error at :math:`t_2`
    (squares) and αβ itself (crosses) on the right. ``penalty`` is the coefficient's symbol
    (``r"\beta_1"``, ``r"\beta_*"``), ``error`` the measured error's."""
    ab = rf"\alpha{penalty}"
    fig, ax = new_figure()
    ax.loglog(alpha_beta, t2, "o", color=TRAIN, label="$t_2$ (measured)")
    ax.loglog(alpha_beta, t2_pred, "*", color=TRAIN, alpha=0.5, ms=10, label=rf"${prediction}/({ab})$ (predicted)")
    ax.set_xlabel(f"${ab}$")
    ax.set_ylabel("$t_2$", color=TRAIN)
    right = twin(ax, TEST, "recovery error at $t_2$")
    right.loglog(alpha_beta, err_t2, "s", color=TEST, label=f"${error}$ (measured)")
    right.loglog(alpha_beta, alpha_beta, "x", color=TEST, alpha=0.6, label=f"${ab}$ (predicted scale)")
    legend_outside(fig, [ax, right])
    if title:
        ax.set_title(title)
    return fig


MARKERS, LINESTYLES = ("o", "s", "^", "D", "v", "P"), ("-", "--", ":", "-.")


def _against_axes(ax, x, left: dict, right: dict | None, *, left_label: str, right_label: str | None,
                  logx: bool, logy: bool) -> list:
    """Draw the series of :func:`against` on ``ax`` (and its twin); returns the axes drawn on."""
    axes = [(ax, left, TRAIN)]
    if right:
        axes.append((twin(ax, TEST, right_label or ""), right, TEST))
    k = 0
    for axis, series, color in axes:
        for label, values in series.items():
            axis.plot(x, np.asarray(values, dtype=float), color=color if right else f"C{k % 10}",
                      marker=MARKERS[k % len(MARKERS)], ls=LINESTYLES[k % len(LINESTYLES)], ms=5, label=label)
            k += 1
        if logy:
            axis.set_yscale("log")
    if logx:
        ax.set_xscale("log")
    ax.set_ylabel(left_label, color=TRAIN if right else "k")
    return [a for a, _, _ in axes]


def against(x, left: dict[str, np.ndarray], right: dict[str, np.ndarray] | None = None, *, xlabel: str,
            left_label: str, right_label: str | None = None, logx: bool = False, logy: bool = True,
            title: str | None = None):
    r"""Quantities against a swept parameter ``x`` (K,) on twin y axes (Figure 46, and any
    summary of a sweep): each entry of ``left`` (label → K values) on the left axis, labelled
    ``left_label``; with ``right``, each of its entries on a right axis labelled
    ``right_label``, the left series in :data:`TRAIN`'s colour and the right ones in
    :data:`TEST`'s (the axes' labels in the same colours), told apart by marker and line style;
    without it, one colour per series too. Log y axes when ``logy``, log x when ``logx``; a NaN
    (an event that did not happen in the run) leaves a gap. One legend below the axes."""
    x = np.asarray(x, dtype=float)
    fig, ax = new_figure()
    axes = _against_axes(ax, x, left, right, left_label=left_label, right_label=right_label, logx=logx, logy=logy)
    ax.set_xlabel(xlabel)
    if title:
        ax.set_title(title)
    legend_outside(fig, axes)
    return fig


def against_grid(x, panels: dict[str, dict[str, np.ndarray]], right: dict[str, dict[str, np.ndarray]] | None = None,
                 *, xlabel: str, left_label: str = "", right_label: str | None = None, ncols: int = 2,
                 logx: bool = False, logy: bool = True):
    r"""Several panels of :func:`against` sharing the swept parameter ``x`` (K,): one panel per
    entry of ``panels`` (title → {label → K values}), with, where ``right`` has the same title,
    those series on a right axis; ``ncols`` panels a row, and one legend below them all (the
    panels use the same labels: a summary of a sweep per value of a second parameter, such as
    Figures 14 and 15 per sparsity s, or one quantity per panel, one curve per s)."""
    x = np.asarray(x, dtype=float)
    right = right or {}
    rows = -(-len(panels) // ncols)
    cols = min(len(panels), ncols)
    fig, axes = plt.subplots(rows, cols, figsize=(WIDTH, 0.7 * WIDTH if rows == 1 else 2.3 * rows + 0.8),
                             sharex=True, layout="constrained", squeeze=False)
    drawn = []
    for ax, (title, left) in zip(axes.flat, panels.items()):
        drawn += _against_axes(ax, x, left, right.get(title), left_label=left_label if ax in axes[:, 0] else "",
                               right_label=right_label if ax in axes[:, -1] else "", logx=logx, logy=logy)
        ax.set_title(title)
    for ax in axes.flat[len(panels):]:
        ax.set_visible(False)
    for ax in axes[-1]:
        ax.set_xlabel(xlabel)
    legend_outside(fig, drawn)
    return fig


def landscape(u, v, color, color_label: str, *, marks=None, points: dict | None = None,
              xlabel: str = r"$u(t) = \|b_I^{(t)}\|_2$", ylabel: str = r"$v(t) = \|b_{I^c}^{(t)}\|_2$"):
    r"""Paths :math:`(u_g(t), v_g(t))` of G configurations in a plane, log-log (Figure 10's
    landscape: the norms of :math:`b^{(t)}` on and off the support of :math:`b^*`). ``u``, ``v``
    (G, T); one colour per value of ``color`` (G,) on a viridis colour bar labelled
    ``color_label`` (log scale when the values span more than a decade). ``marks``: a dict
    {label: record index} drawn on every path with one marker shape per entry; ``points``: a
    dict {label: (u (G,), v (G,), marker)} of reference points, one per configuration, in red
    (:math:`\hat b` and :math:`b^*`). One legend below the axes."""
    from matplotlib.colors import LogNorm, Normalize
    from matplotlib.lines import Line2D

    u, v = np.atleast_2d(np.asarray(u, dtype=float)), np.atleast_2d(np.asarray(v, dtype=float))
    color = np.asarray(color, dtype=float)
    positive = color[color > 0]
    log = positive.size == color.size and positive.max() > 10 * positive.min()
    norm = LogNorm(color.min(), color.max()) if log else Normalize(color.min(), color.max())
    fig, ax = new_figure()
    handles = []
    for g in range(u.shape[0]):
        c = plt.cm.viridis(norm(color[g]))
        ax.plot(u[g], v[g], color=c, lw=1, alpha=0.8)
        for k, index in enumerate((marks or {}).values()):
            ax.plot(u[g, index], v[g, index], MARKERS[k % len(MARKERS)], color=c, ms=5, mec="k", mew=0.4)
    for k, label in enumerate(marks or {}):
        handles.append(Line2D([], [], ls="", marker=MARKERS[k % len(MARKERS)], color="0.6", mec="k", mew=0.4,
                              label=label))
    for label, (pu, pv, marker) in (points or {}).items():
        ax.plot(pu, pv, marker, ls="", color="tab:red", ms=7, mfc="none" if marker == "o" else "tab:red")
        handles.append(Line2D([], [], ls="", marker=marker, color="tab:red", ms=7,
                              mfc="none" if marker == "o" else "tab:red", label=label))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    fig.colorbar(plt.cm.ScalarMappable(norm=norm, cmap=plt.cm.viridis), ax=ax, label=color_label, aspect=30,
                 fraction=0.05)
    if handles:
        fig.legend(handles=handles, loc="outside lower center", ncols=min(len(handles), 4))
    return fig


def components(ax, t, values, highlight=None, label: str = "b") -> None:
    r"""Every component of a recorded vector against t (log x), ``values`` (T, k). With
    ``highlight`` (indices: the support of :math:`b^*`) those are coloured and labelled
    :math:`{label}_i`, the others grey, on a linear y axis. Without it (singular values) every
    component is coloured by its index (viridis, :math:`{label}_1` the largest) on a log y
    axis, where the spurious values that oscillate in :math:`[0, \alpha\beta_*)` stay visible."""
    k = values.shape[1]
    colors = plt.cm.viridis(np.linspace(0, 0.9, k))
    for i in range(k):
        on = highlight is None or i in highlight
        ax.plot(t, values[:, i], color=colors[i] if highlight is None else (None if on else "0.6"),
                lw=1.2 if on else 0.6, zorder=3 if on else 2,
                label=(f"${label}_{{{i + 1}}}$" if highlight is None else f"${label}_{{{i}}}$") if on else None)
    ax.set_xscale("log")
    if highlight is None:
        ax.set_yscale("log")
    else:
        ax.axhline(0.0, color="k", lw=0.6)
    ax.set_ylabel(f"${label}_i^{{(t)}}$")


def component_map(t, values, reference=None, *, threshold: float = 0.0, label: str = "b",
                  reference_label: str = "b^*"):
    r"""A recorded vector over time as a heat map (Figures 11 and 26): one row per recorded step
    t >= 1 (log axis, the first at the top), one column per coordinate, ``values`` (T, k) on a
    diverging colour scale symmetric about 0 (symmetric-log, linear below ``threshold`` where
    it is > 0, so that values of every scale stay visible); entries with
    :math:`|{\rm value}| <` ``threshold`` are drawn as 0 (the authors' :math:`10^{-4}`). With
    ``reference`` (k,) (:math:`b^*`), a strip above shows it on the same scale."""
    from matplotlib.colors import Normalize, SymLogNorm

    t, values = np.asarray(t, dtype=float), np.asarray(values, dtype=float)
    keep = t >= 1
    t, values = t[keep], values[keep]
    values = np.where(np.abs(values) < threshold, 0.0, values)
    top = np.nanmax(np.abs(values if reference is None else np.concatenate([values.ravel(), reference])))
    norm = (SymLogNorm(threshold, vmin=-top, vmax=top) if threshold > 0
            else Normalize(-top, top))
    cols = np.arange(values.shape[1] + 1) - 0.5
    edges = np.sqrt(t[1:] * t[:-1])
    rows = np.concatenate([[t[0] ** 1.5 / t[1] ** 0.5 if t.size > 1 else t[0] / 2], edges,
                           [t[-1] ** 1.5 / t[-2] ** 0.5 if t.size > 1 else 2 * t[0]]])
    if reference is None:
        fig, ax = new_figure()
        axes = [ax]
    else:
        fig, axes = plt.subplots(2, 1, figsize=(WIDTH, 0.8 * WIDTH), sharex=True, layout="constrained",
                                 gridspec_kw={"height_ratios": [1, 12]})
        axes[0].pcolormesh(cols, [0, 1], np.asarray(reference, dtype=float)[None], cmap="RdBu_r", norm=norm)
        axes[0].set_yticks([])
        axes[0].set_ylabel(f"${reference_label}$", rotation=0, ha="right", va="center")
        axes[0].grid(False)
    ax = axes[-1]
    mesh = ax.pcolormesh(cols, rows, values, cmap="RdBu_r", norm=norm)
    ax.set_yscale("log")
    ax.invert_yaxis()
    ax.grid(False)
    ax.set_xlabel("coordinate $i$")
    ax.set_ylabel("$t$")
    fig.colorbar(mesh, ax=axes, label=f"${label}_i^{{(t)}}$", aspect=30, fraction=0.05)
    return fig


def snapshots(values, titles, *, shape=None, reference=None, x=None, xlabel: str = "$j$",
              label: str = "value", cmap: str = "gray_r", columns: int = 4):
    r"""A vector at several moments side by side (Figures 37 and 40: a reconstruction at several
    steps), ``values`` (k, n) with one title each. With ``shape`` (an image's rows and columns)
    each panel is the vector as an image on one colour scale shared by all (``imshow``, a colour
    bar), ``columns`` to a row; without it each panel plots the vector against ``x`` (default 0..n − 1) with
    ``reference`` (n,) dashed, the panels stacked."""
    values = np.asarray(values, dtype=float)
    if values.ndim != 2 or values.shape[0] != len(titles):
        raise ValueError(f"values must be (k, n) with one title per row, got shape {values.shape} "
                         f"and {len(titles)} titles")
    k = values.shape[0]
    if shape is not None:
        rows = -(-k // columns)
        fig, axes = plt.subplots(rows, columns, figsize=(WIDTH, rows * (WIDTH / columns + 0.3)),
                                 layout="constrained", squeeze=False)
        axes = axes.ravel()
        for ax in axes[k:]:
            ax.set_axis_off()
        low, high = min(values.min(), 0.0), max(values.max(), 1e-300)
        for ax, v, title in zip(axes, values, titles):
            image = ax.imshow(v.reshape(shape), cmap=cmap, vmin=low, vmax=high)
            ax.set_title(title, fontsize="small")
            ax.set_xticks([])
            ax.set_yticks([])
            ax.grid(False)
        fig.colorbar(image, ax=axes[:k], label=label, aspect=20, fraction=0.04)
        return fig
    x = np.arange(values.shape[1]) if x is None else np.asarray(x)
    fig, axes = new_figure(k, height=1.5 * k + 0.6)
    for i, (ax, v, title) in enumerate(zip(np.atleast_1d(axes), values, titles)):
        ax.plot(x, v, color=TEST, lw=1.2, label="reconstruction" if i == 0 else None)
        if reference is not None:
            ax.plot(x, reference, color="k", ls="--", lw=0.8, label="target" if i == 0 else None)
        ax.set_title(title, fontsize="small")
        ax.set_ylabel(label)
    ax.set_xlabel(xlabel)
    if reference is not None:
        fig.legend(loc="outside lower center", ncols=2)
    return fig


def mechanism(traj, t1: float, t2: float, target: np.ndarray, g: int = 0, ratio: bool = True):
    r"""The grokking mechanism in three panels (Figures 2, 4, 43 and 44): (i) the errors and
    the gradient ratio :math:`\|\beta h\|/\|G_{\beta_2}\|`; (ii) the errors and the norm
    (:math:`\|b^{(t)}\|_1` or :math:`\|A^{(t)}\|_*`) against the target's (``target`` is
    :math:`b^*` or :math:`A^*`); (iii) every component :math:`b_i^{(t)}` (support of
    :math:`b^*` in colour) or every singular value :math:`\sigma_i(A^{(t)})`. Without
    ``ratio`` (projected methods, whose data gradient is 0 after the first projection) panel
    (i) is left out."""
    fig, axes = new_figure(3 if ratio else 2)
    (t, keep), sym = _logged(traj), _symbols(traj)
    matrix = hasattr(traj, "singular_values")
    if ratio:
        error_curves(axes[0], traj, g)
        right = twin(axes[0], EXTRA, "gradient ratio")
        right.loglog(t, traj.grad_ratio[g][keep], color=EXTRA, label=sym["ratio"])
        right.axhline(1.0, color=EXTRA, lw=0.8, ls="-.")
        legend_outside(fig, [axes[0], right], panel=axes[0])
    error_curves(axes[-2], traj, g)
    norm = twin(axes[-2], EXTRA, sym["norm"])
    norm.loglog(t, (traj.nuclear if matrix else traj.l1)[g][keep], color=EXTRA, label=sym["norm"])
    target_norm = np.linalg.svd(target, compute_uv=False).sum() if matrix else np.abs(target).sum()
    norm.axhline(target_norm, color=EXTRA, ls="--", lw=1, label=sym["target"])
    legend_outside(fig, [axes[-2], norm], panel=axes[-2])
    if matrix:
        values = traj.singular_values[g][keep]
        components(axes[-1], t, values, label=r"\sigma")
        legend_outside(fig, axes[-1], ncols=min(values.shape[1], 5), panel=axes[-1])
    else:
        support = np.flatnonzero(target)
        components(axes[-1], t, traj.b[g][keep], highlight=support)
        legend_outside(fig, axes[-1], ncols=min(len(support), 6), panel=axes[-1])
    for i, ax in enumerate(axes):
        ax.set_xlabel("$t$" if i == len(axes) - 1 else "")
        mark_times(ax, t1, t2, arrow=i == 0)
    return fig


def error_grid(traj, color, color_label: str, panel=None, panel_label: str | None = None, t2=None,
               ncols: int = 3, curves: tuple[str, str] = ("train_error", "test_error"),
               labels: tuple[str, str] = ("train", "recovery"), ylabel: str = "relative error",
               yscale: str = "log", rows=None, ylim: tuple[float, float] | None = None,
               control=None, control_panel=None, control_rows=None):
    r"""Train and test curves of many configurations (Figures 3, 42, 45, 47–57): one panel per
    value of ``panel`` (G,) (titled ``panel_label`` = value), one colour per value of ``color``
    (G,) on a colour bar labelled ``color_label`` (log scale when the values span more than a
    decade), the first of ``curves`` solid and the second dashed (by default the relative
    training and recovery errors; ``train_loss``/``test_loss`` or ``train_accuracy``/
    ``test_accuracy`` for networks), log step axis, ``yscale`` "log" or "linear" and ``ylim``;
    dotted vertical lines at ``t2`` (G,) where given. ``rows`` (a boolean mask or indices of
    the G configurations) draws only those, ``color``, ``panel`` and ``t2`` staying (G,).
    ``control``, a trajectory of the same model without the penalty (β = 0), is drawn in grey
    in each panel: its configurations whose ``control_panel`` value is the panel's, among
    ``control_rows`` (a mask or indices; all by default), within the range of the grid's curves."""
    from matplotlib.colors import LogNorm, Normalize
    from matplotlib.lines import Line2D

    color = np.asarray(color, dtype=float)
    panel = np.zeros(len(color)) if panel is None else np.asarray(panel, dtype=float)
    drawn = np.zeros(len(color), dtype=bool)
    drawn[np.arange(len(color)) if rows is None else np.asarray(rows)] = True
    values = np.unique(panel[drawn])
    rows = -(-len(values) // ncols) if len(values) > 1 else 1
    cols = min(len(values), ncols)
    fig, axes = plt.subplots(rows, cols, figsize=(WIDTH, 0.7 * WIDTH if rows == 1 else 2.3 * rows + 0.8),
                             sharex=True, sharey=True, layout="constrained", squeeze=False)
    positive = color[color > 0]
    log = positive.size == color.size and positive.max() > 10 * positive.min()
    norm = LogNorm(color.min(), color.max()) if log else Normalize(color.min(), color.max())
    cmap = plt.cm.viridis
    t, keep = _logged(traj)
    for ax, value in zip(axes.flat, values):
        for g in np.flatnonzero((panel == value) & drawn):
            c = cmap(norm(color[g]))
            ax.plot(t, getattr(traj, curves[0])[g][keep], color=c, lw=1)
            ax.plot(t, getattr(traj, curves[1])[g][keep], color=c, lw=1, ls="--")
            ax.set_xscale("log")
            ax.set_yscale(yscale)
            if t2 is not None and np.isfinite(t2[g]):
                ax.axvline(t2[g], color=c, ls=":", lw=0.8)
        if panel_label is not None:
            ax.set_title(f"{panel_label} = {value:g}")
    if control is not None:
        # The panels keep the grid's range: a control that fits its training set to rounding
        # leaves the frame rather than squash the grid's curves.
        frame = ylim if ylim is not None else axes.flat[0].get_ylim()
        t_c, keep_c = _logged(control)
        n_c = len(getattr(control, curves[0]))
        c_panel = np.zeros(n_c) if control_panel is None else np.asarray(control_panel, dtype=float)
        c_drawn = np.zeros(n_c, dtype=bool)
        c_drawn[np.arange(n_c) if control_rows is None else np.asarray(control_rows)] = True
        for ax, value in zip(axes.flat, values):
            for g in np.flatnonzero((c_panel == value) & c_drawn):
                ax.plot(t_c, getattr(control, curves[0])[g][keep_c], color="0.6", lw=1.2, zorder=1.9)
                ax.plot(t_c, getattr(control, curves[1])[g][keep_c], color="0.6", lw=1.2, ls="--",
                        zorder=1.9)
        ylim = frame
    if ylim is not None:
        for ax in axes.flat[:len(values)]:
            ax.set_ylim(*ylim)
    for ax in axes.flat[len(values):]:
        ax.set_visible(False)
    for ax in axes[-1]:
        ax.set_xlabel("$t$")
    for ax in axes[:, 0]:
        ax.set_ylabel(ylabel)
    fig.colorbar(plt.cm.ScalarMappable(norm=norm, cmap=cmap), ax=axes, label=color_label, aspect=30, fraction=0.04)
    styles = [Line2D([], [], color="0.3", label=labels[0]), Line2D([], [], color="0.3", ls="--", label=labels[1])]
    if t2 is not None:
        styles.append(Line2D([], [], color="0.3", ls=":", label="$t_2$"))
    if control is not None:
        styles.append(Line2D([], [], color="0.6", lw=1.2, label=r"$\beta = 0$"))
    fig.legend(handles=styles, loc="outside lower center", ncols=len(styles))
    return fig


def bound_check(steps, distances: dict[str, np.ndarray], bound: float, t1_bound: float | None = None, *,
                bound_label: str = r"$2\alpha\beta_1\sqrt{n}/(1-\rho_r)$", t1_label: str = "$t_1$ (Theorem C.8)",
                ylabel: str = "distance"):
    r"""Distances (``{label: curve}``) against a radius (horizontal line, ``bound_label``) and
    the step ``t1_bound`` after which a theorem puts them inside it (Theorems 2.1, 2.2, C.8,
    D.8), or any norms against their bound (``ylabel``: the quantity)."""
    fig, ax = new_figure()
    t = np.maximum(steps, 1)
    for (label, d), color in zip(distances.items(), (TRAIN, TEST, EXTRA, "tab:purple")):
        ax.loglog(t, d, color=color, label=label)
    ax.axhline(bound, color="k", ls="--", lw=1, label=bound_label)
    if t1_bound is not None and np.isfinite(t1_bound):
        ax.axvline(t1_bound, color="k", ls=":", lw=1, label=t1_label)
    ax.set_xlabel("$t$")
    ax.set_ylabel(ylabel)
    legend_outside(fig, ax)
    return fig


def delay_scaling(alpha_beta, delta_t, predicted, *, penalty: str = r"\beta_1",
                  prediction: str = r"\|\hat b\|_\infty"):
    r""":math:`\Delta t = t_2 - t_1` against αβ, with the prediction ``prediction``/(αβ)
    (dashed) and the same times the fitted constant (dotted): Theorems 2.1 and 2.2 fix it up
    to a constant. ``penalty`` is the coefficient's symbol."""
    ab = rf"\alpha{penalty}"
    fig, ax = new_figure()
    ax.loglog(alpha_beta, delta_t, "o", color=TRAIN, label=r"$\Delta t = t_2 - t_1$ (measured)")
    order = np.argsort(alpha_beta)
    x, pred = np.asarray(alpha_beta)[order], np.asarray(predicted)[order]
    ax.loglog(x, pred, "--", color="k", label=rf"${prediction}/({ab})$")
    ok = np.isfinite(delta_t) & (np.asarray(delta_t) > 0)
    C = np.exp(np.mean(np.log(np.asarray(delta_t)[ok] / np.asarray(predicted)[ok])))
    ax.loglog(x, C * pred, ":", color="k", label=rf"${C:.2f}\,{prediction}/({ab})$ (constant fitted)")
    ax.set_xlabel(f"${ab}$")
    ax.set_ylabel(r"$\Delta t$")
    legend_outside(fig, ax)
    return fig
