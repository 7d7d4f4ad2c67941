/*
 * grokkit: make the book's sidebar (☰) and page-contents toggles work.
 *
 * sphinx-book-theme 1.3 draws its own toggles (.primary-toggle, .secondary-toggle) in the article
 * header, and pydata-sphinx-theme 0.17 draws a second pair in its top navbar (#pst-header), which
 * the book theme's CSS hides at every width. Both themes bind
 * document.querySelector(".primary-toggle") (and ".secondary-toggle"), i.e. the first, hidden one,
 * so the visible buttons did nothing at any width (pydata-sphinx-theme issue #2451).
 *
 * This script runs first (a deferred script in <head>, before the themes' deferred scripts at the
 * end of <body>) and takes the toggle classes off the hidden navbar copies, so that the themes
 * bind the visible buttons and do what they were written to do:
 *   - primary toggle, 992 px wide and more: hides/shows the sidebar (sphinx-book-theme toggles
 *     the class pst-sidebar-hidden on #pst-primary-sidebar);
 *   - primary toggle, narrower: opens the navigation in <dialog id="pst-primary-sidebar-modal">;
 *   - secondary toggle (shown below 1200 px, where the page contents are not beside the text):
 *     opens the page contents in <dialog id="pst-secondary-sidebar-modal">.
 * Nothing happens when there is one toggle of a kind (a theme version that fixed the markup).
 */
(function () {
  "use strict";
  ["primary-toggle", "secondary-toggle"].forEach(function (name) {
    if (document.querySelectorAll("." + name).length < 2) return;
    document.querySelectorAll("#pst-header ." + name).forEach(function (button) {
      button.classList.remove(name);
    });
  });
})();
