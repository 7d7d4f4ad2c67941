r"""Figures, panel for panel as in the paper, with the paper's symbols on the axes."""
from __future__ import annotations

import matplotlib.pyplot as plt
import numpy as np

plt.rcParams.update({
    "figure.dpi": 110, "savefig.dpi": 150, "axes.grid": True, "grid.alpha": 0.3,
    "axes.spines.top": False, "legend.frameon": False, "font.size": 10,
})

TRAIN, TEST, EXTRA = "tab:blue", "tab:orange", "tab:green"


def mark_times(ax, t1: float | None, t2: float | None, arrow: bool = True) -> None:
    r"""Vertical lines at :math:`t_1` and :math:`t_2`, with a :math:`\Delta t` arrow between them if ``arrow``."""
    for t, label, ls in ((t1, "$t_1$", "--"), (t2, "$t_2$", ":")):
        if t is not None and np.isfinite(t) and t > 0:
            ax.axvline(t, color="k", ls=ls, lw=1)
            ax.annotate(label, (t, 1.0), xycoords=("data", "axes fraction"), ha="left", va="bottom")
    if arrow and all(t is not None and np.isfinite(t) and t > 0 for t in (t1, t2)):
        ax.annotate("", xy=(t2, 0.93), xytext=(t1, 0.93), xycoords=("data", "axes fraction"),
                    arrowprops={"arrowstyle": "<->", "color": "k"})
        ax.annotate(r"$\Delta t$", (np.sqrt(t1 * t2), 0.95), xycoords=("data", "axes fraction"), ha="center")


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
    fig, ax = plt.subplots(figsize=(7, 4.2))
    ax.loglog(alpha_beta1, t2, "o", color=TRAIN, label="$t_2$ (measured)")
    ax.loglog(alpha_beta1, t2_pred, "*", color=TRAIN, alpha=0.5, ms=10,
              label=r"$\|\hat b\|_\infty/(\alpha\beta_1)$ (predicted)")
    ax.set_xlabel(r"$\alpha\beta_1$")
    ax.set_ylabel("$t_2$", color=TRAIN)
    right = ax.twinx()
    right.loglog(alpha_beta1, err_t2, "s", color=TEST, label=r"$\|b^{(t_2)}-b^*\|_2$ (measured)")
    right.loglog(alpha_beta1, alpha_beta1, "x", color=TEST, alpha=0.6, label=r"$\alpha\beta_1$ (predicted scale)")
    right.set_ylabel("recovery error at $t_2$", color=TEST)
    right.grid(False)
    handles = ax.get_legend_handles_labels()[0] + right.get_legend_handles_labels()[0]
    ax.legend(handles, [h.get_label() for h in handles], loc="upper center", fontsize=8, ncol=2,
              bbox_to_anchor=(0.5, -0.18))
    if title:
        ax.set_title(title)
    fig.tight_layout()
    return fig


def figure2(traj, t1: float, t2: float, b_star: np.ndarray, g: int = 0):
    r"""Figure 2: (i) errors and the gradient ratio :math:`\|\beta_1h(b)\|/\|G_{\beta_2}(b)\|`;
    (ii) errors and :math:`\|b^{(t)}\|_1` against :math:`\|b^*\|_1`; (iii) every component
    :math:`b_i^{(t)}` (support of :math:`b^*` in colour)."""
    fig, axes = plt.subplots(3, 1, figsize=(7, 9), sharex=True)
    t = np.maximum(traj.steps, 1)
    error_curves(axes[0], traj, g)
    ratio = axes[0].twinx()
    ratio.loglog(t, traj.grad_ratio[g], color=EXTRA, label=r"$\|\beta_1 h(b^{(t)})\|_2/\|G_{\beta_2}(b^{(t)})\|_2$")
    ratio.axhline(1.0, color=EXTRA, lw=0.8, ls="-.")
    ratio.set_ylabel("gradient ratio", color=EXTRA)
    ratio.grid(False)
    axes[0].legend(axes[0].get_legend_handles_labels()[0] + ratio.get_legend_handles_labels()[0],
                   [h.get_label() for h in axes[0].get_legend_handles_labels()[0] + ratio.get_legend_handles_labels()[0]],
                   loc="lower left", fontsize=8)
    error_curves(axes[1], traj, g)
    axes[1].set_xlabel("")
    norm = axes[1].twinx()
    norm.loglog(t, traj.l1[g], color=EXTRA, label=r"$\|b^{(t)}\|_1$")
    norm.axhline(np.abs(b_star).sum(), color=EXTRA, ls="--", lw=1, label=r"$\|b^*\|_1$")
    norm.set_ylabel(r"$\|b^{(t)}\|_1$", color=EXTRA)
    norm.grid(False)
    norm.legend(loc="lower left", fontsize=8)
    support = np.flatnonzero(b_star)
    for i in range(traj.b.shape[2]):
        on = i in support
        axes[2].semilogx(t, traj.b[g, :, i], color=None if on else "0.6", lw=1.4 if on else 0.6,
                         label=f"$b_{{{i}}}$" if on else None, zorder=3 if on else 2)
    axes[2].axhline(0.0, color="k", lw=0.6)
    axes[2].set_ylabel(r"$b_i^{(t)}$")
    axes[2].set_xlabel("$t$")
    axes[2].legend(loc="upper left", fontsize=8, ncol=len(support))
    for i, ax in enumerate(axes):
        mark_times(ax, t1, t2, arrow=i == 0)
    fig.tight_layout()
    return fig


def bound_check(steps, distances: dict[str, np.ndarray], bound: float, t1_bound: float | None = None):
    r"""Distances to :math:`\hat b` against the radius of Theorem 2.1 (horizontal line)."""
    fig, ax = plt.subplots(figsize=(7, 4))
    t = np.maximum(steps, 1)
    for (label, d), color in zip(distances.items(), (TRAIN, TEST, EXTRA)):
        ax.loglog(t, d, color=color, label=label)
    ax.axhline(bound, color="k", ls="--", lw=1, label=r"$2\alpha\beta_1\sqrt{n}/(1-\rho_r)$")
    if t1_bound is not None and np.isfinite(t1_bound):
        ax.axvline(t1_bound, color="k", ls=":", lw=1, label="$t_1$ (Theorem C.8)")
    ax.set_xlabel("$t$")
    ax.set_ylabel("distance")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig


def delay_scaling(alpha_beta1, delta_t, predicted, labels=None):
    r""":math:`\Delta t = t_2 - t_1` against :math:`\alpha\beta_1`, with the prediction :math:`\|\hat b\|_\infty/(\alpha\beta_1)`."""
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.loglog(alpha_beta1, delta_t, "o", color=TRAIN, label=r"$\Delta t = t_2 - t_1$ (measured)")
    order = np.argsort(alpha_beta1)
    x, pred = np.asarray(alpha_beta1)[order], np.asarray(predicted)[order]
    ax.loglog(x, pred, "--", color="k", label=r"$\|\hat b\|_\infty/(\alpha\beta_1)$")
    ok = np.isfinite(delta_t) & (np.asarray(delta_t) > 0)
    C = np.exp(np.mean(np.log(np.asarray(delta_t)[ok] / np.asarray(predicted)[ok])))
    ax.loglog(x, C * pred, ":", color="k", label=rf"${C:.2f}\,\|\hat b\|_\infty/(\alpha\beta_1)$ (constant fitted)")
    ax.set_xlabel(r"$\alpha\beta_1$")
    ax.set_ylabel(r"$\Delta t$")
    ax.legend(fontsize=8)
    fig.tight_layout()
    return fig
