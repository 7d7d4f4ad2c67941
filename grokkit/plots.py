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


def success_curves(ax, curves: dict, xlabel: str, ylabel: str = "success rate") -> None:
    r"""Success rates against a sample size, one step curve per label (the phase transitions of
    exact recovery, App. D.4): ``curves`` maps a label to ``(x, rate)`` with x increasing, the rate
    at x holding until the next x."""
    for label, (x, rate) in curves.items():
        ax.step(x, rate, where="post", label=label)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_ylim(-0.04, 1.04)


def error_curves(ax, traj, g: int = 0, label_prefix: str = "") -> None:
    """Relative training (solid) and recovery (dashed) errors of configuration ``g`` against t (log-log)."""
    t = np.maximum(traj.steps, 1)
    ax.loglog(t, traj.train_error[g], color=TRAIN, label=label_prefix + r"train $\|\tilde Xb^{(t)}-y^*\|_2/\|y^*\|_2$")
    ax.loglog(t, traj.test_error[g], color=TEST, ls="--", label=label_prefix + r"recovery $\|b^{(t)}-b^*\|_2/\|b^*\|_2$")
    ax.set_xlabel("$t$")
    ax.set_ylabel("relative error")


def figure1(alpha_beta1, t2, t2_pred, err_t2, title: str | None = None):
    r"""Figure 1: :math:`t_2` (circles) and its prediction (stars) on the left axis, the error at
    :math:`t_2` (squares) and :math:`\alpha\beta_1` (crosses) on the right, against :math:`\alpha\beta_1`."""
    fig, ax = new_figure()
    ax.loglog(alpha_beta1, t2, "o", color=TRAIN, label="$t_2$ (measured)")
    ax.loglog(alpha_beta1, t2_pred, "*", color=TRAIN, alpha=0.5, ms=10,
              label=r"$\|\hat b\|_\infty/(\alpha\beta_1)$ (predicted)")
    ax.set_xlabel(r"$\alpha\beta_1$")
    ax.set_ylabel("$t_2$", color=TRAIN)
    right = twin(ax, TEST, "recovery error at $t_2$")
    right.loglog(alpha_beta1, err_t2, "s", color=TEST, label=r"$\|b^{(t_2)}-b^*\|_2$ (measured)")
    right.loglog(alpha_beta1, alpha_beta1, "x", color=TEST, alpha=0.6, label=r"$\alpha\beta_1$ (predicted scale)")
    legend_outside(fig, [ax, right])
    if title:
        ax.set_title(title)
    return fig


def figure2(traj, t1: float, t2: float, b_star: np.ndarray, g: int = 0):
    r"""Figure 2: (i) errors and the gradient ratio :math:`\|\beta_1h(b)\|/\|G_{\beta_2}(b)\|`;
    (ii) errors and :math:`\|b^{(t)}\|_1` against :math:`\|b^*\|_1`; (iii) every component
    :math:`b_i^{(t)}` (support of :math:`b^*` in colour)."""
    fig, axes = new_figure(3)
    t = np.maximum(traj.steps, 1)
    error_curves(axes[0], traj, g)
    ratio = twin(axes[0], EXTRA, "gradient ratio")
    ratio.loglog(t, traj.grad_ratio[g], color=EXTRA, label=r"$\|\beta_1 h(b^{(t)})\|_2/\|G_{\beta_2}(b^{(t)})\|_2$")
    ratio.axhline(1.0, color=EXTRA, lw=0.8, ls="-.")
    legend_outside(fig, [axes[0], ratio], panel=axes[0])
    error_curves(axes[1], traj, g)
    norm = twin(axes[1], EXTRA, r"$\|b^{(t)}\|_1$")
    norm.loglog(t, traj.l1[g], color=EXTRA, label=r"$\|b^{(t)}\|_1$")
    norm.axhline(np.abs(b_star).sum(), color=EXTRA, ls="--", lw=1, label=r"$\|b^*\|_1$")
    legend_outside(fig, [axes[1], norm], panel=axes[1])
    support = np.flatnonzero(b_star)
    for i in range(traj.b.shape[2]):
        on = i in support
        axes[2].semilogx(t, traj.b[g, :, i], color=None if on else "0.6", lw=1.4 if on else 0.6,
                         label=f"$b_{{{i}}}$" if on else None, zorder=3 if on else 2)
    axes[2].axhline(0.0, color="k", lw=0.6)
    axes[2].set_ylabel(r"$b_i^{(t)}$")
    legend_outside(fig, axes[2], ncols=min(len(support), 6), panel=axes[2])
    for i, ax in enumerate(axes):
        ax.set_xlabel("$t$" if i == len(axes) - 1 else "")
        mark_times(ax, t1, t2, arrow=i == 0)
    return fig


def bound_check(steps, distances: dict[str, np.ndarray], bound: float, t1_bound: float | None = None):
    r"""Distances to :math:`\hat b` against the radius of Theorem 2.1 (horizontal line)."""
    fig, ax = new_figure()
    t = np.maximum(steps, 1)
    for (label, d), color in zip(distances.items(), (TRAIN, TEST, EXTRA)):
        ax.loglog(t, d, color=color, label=label)
    ax.axhline(bound, color="k", ls="--", lw=1, label=r"$2\alpha\beta_1\sqrt{n}/(1-\rho_r)$")
    if t1_bound is not None and np.isfinite(t1_bound):
        ax.axvline(t1_bound, color="k", ls=":", lw=1, label="$t_1$ (Theorem C.8)")
    ax.set_xlabel("$t$")
    ax.set_ylabel("distance")
    legend_outside(fig, ax)
    return fig


def delay_scaling(alpha_beta1, delta_t, predicted, labels=None):
    r""":math:`\Delta t = t_2 - t_1` against :math:`\alpha\beta_1`, with the prediction :math:`\|\hat b\|_\infty/(\alpha\beta_1)`."""
    fig, ax = new_figure()
    ax.loglog(alpha_beta1, delta_t, "o", color=TRAIN, label=r"$\Delta t = t_2 - t_1$ (measured)")
    order = np.argsort(alpha_beta1)
    x, pred = np.asarray(alpha_beta1)[order], np.asarray(predicted)[order]
    ax.loglog(x, pred, "--", color="k", label=r"$\|\hat b\|_\infty/(\alpha\beta_1)$")
    ok = np.isfinite(delta_t) & (np.asarray(delta_t) > 0)
    C = np.exp(np.mean(np.log(np.asarray(delta_t)[ok] / np.asarray(predicted)[ok])))
    ax.loglog(x, C * pred, ":", color="k", label=rf"${C:.2f}\,\|\hat b\|_\infty/(\alpha\beta_1)$ (constant fitted)")
    ax.set_xlabel(r"$\alpha\beta_1$")
    ax.set_ylabel(r"$\Delta t$")
    legend_outside(fig, ax)
    return fig
