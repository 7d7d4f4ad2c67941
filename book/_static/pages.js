// Search results quote the pages' text, TeX delimiters included (Sphinx's search snippets are the
// text of the page's HTML, before MathJax ran): typeset them as the pages are, after cutting a
// formula that the snippet's ends split in two.
function balanceSnippet(element) {
  let text = element.textContent;
  const close = text.indexOf("\\)");
  if (close !== -1 && (text.indexOf("\\(") === -1 || close < text.indexOf("\\("))) {
    text = "…" + text.slice(close + 2);
  }
  const open = text.lastIndexOf("\\(");
  if (open !== -1 && text.indexOf("\\)", open) === -1) {
    text = text.slice(0, open) + "…";
  }
  if (text !== element.textContent) element.textContent = text;
}

document.addEventListener("DOMContentLoaded", () => {
  const results = document.getElementById("search-results");
  if (!results) return;
  let pending = null;
  new MutationObserver(() => {
    clearTimeout(pending);
    pending = setTimeout(() => {
      if (!results.textContent.includes("\\(") && !results.textContent.includes("\\)")) return;
      results.querySelectorAll("p.context").forEach(balanceSnippet);
      if (window.MathJax && MathJax.typesetPromise) MathJax.typesetPromise([results]);
    }, 100);
  }).observe(results, { childList: true, subtree: true });
});
